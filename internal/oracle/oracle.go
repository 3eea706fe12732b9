package oracle

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"
)

// DefaultPython is the interpreter that has Debian's python3-torch and
// python3-onnx (the python3 first on PATH may be a shim that does not see
// them). TSPLIT_PYTHON overrides it.
const DefaultPython = "/usr/bin/python3"

const installHint = "install the oracles with `make deps` (scripts/install-deps.sh)"

// skipf skips the test because an oracle tool is missing, or fails it when
// TSPLIT_REQUIRE_ORACLES is set.
func skipf(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := "oracle: " + fmt.Sprintf(format, args...) + "; " + installHint
	if os.Getenv(RequireEnv) != "" {
		t.Fatal(msg + " (" + RequireEnv + " is set, so this is an error)")
	}
	t.Skip(msg)
}

// ---- module root ----

var root struct {
	once sync.Once
	dir  string
	err  error
}

// ModuleRoot returns the directory holding go.mod, found by walking up from
// the working directory (a test's package directory).
func ModuleRoot() (string, error) {
	root.once.Do(func() {
		dir, err := os.Getwd()
		if err != nil {
			root.err = err
			return
		}
		for {
			if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
				root.dir = dir
				return
			}
			parent := filepath.Dir(dir)
			if parent == dir {
				root.err = errors.New("no go.mod above the working directory")
				return
			}
			dir = parent
		}
	})
	return root.dir, root.err
}

func mustRoot(t testing.TB) string {
	t.Helper()
	dir, err := ModuleRoot()
	if err != nil {
		t.Fatalf("oracle: %v", err)
	}
	return dir
}

// ---- python ----

var pyChecks struct {
	mu   sync.Mutex
	done map[string]error // modules -> result of importing them
}

func pythonPath() string {
	if p := os.Getenv("TSPLIT_PYTHON"); p != "" {
		return p
	}
	return DefaultPython
}

// pythonWith returns the interpreter if `import <modules>` works in it,
// skipping the test otherwise. Results are cached per process.
func pythonWith(t testing.TB, modules string) string {
	t.Helper()
	Oracles(t, "python3 with "+modules)
	py := pythonPath()
	pyChecks.mu.Lock()
	if pyChecks.done == nil {
		pyChecks.done = map[string]error{}
	}
	err, ok := pyChecks.done[modules]
	if !ok {
		out, runErr := exec.Command(py, "-c", "import "+modules).CombinedOutput()
		if runErr != nil {
			err = withOutput(runErr, out)
		}
		pyChecks.done[modules] = err
	}
	pyChecks.mu.Unlock()
	if err != nil {
		skipf(t, "%s cannot `import %s` (%v); it needs Debian's python3-torch python3-torchvision python3-onnx python3-numpy", py, modules, err)
	}
	return py
}

// Python returns the path of a python3 in which torch and onnx import
// (/usr/bin/python3 unless TSPLIT_PYTHON is set); it skips the test if there
// is none.
func Python(t testing.TB) string {
	t.Helper()
	return pythonWith(t, "torch, onnx")
}

// PythonONNX is like Python but needs only the onnx package.
func PythonONNX(t testing.TB) string {
	t.Helper()
	return pythonWith(t, "onnx")
}

// PythonNumpy is like Python but needs only numpy (to read the .npy
// files `tsplitc run --save-outputs` writes).
func PythonNumpy(t testing.TB) string {
	t.Helper()
	return pythonWith(t, "numpy")
}

// ---- PyTorch models ----

var exportMu sync.Mutex

// TorchModel returns the absolute path of testdata/torch/<name>.onnx under
// the module root, exporting it with scripts/export_torch_models.py first if
// it does not exist (skipping the test if python with torch is missing).
// Exports are serialised within the process by a mutex and across processes
// (parallel `go test` packages) by a file lock.
func TorchModel(t testing.TB, name string) string {
	t.Helper()
	Oracles(t, "the PyTorch export "+name)
	dir := filepath.Join(mustRoot(t), "testdata", "torch")
	path := filepath.Join(dir, name+".onnx")
	if fileExists(path) {
		return path
	}
	py := Python(t)

	exportMu.Lock()
	defer exportMu.Unlock()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("oracle: %v", err)
	}
	unlock, err := lockFile(filepath.Join(dir, ".export.lock"))
	if err != nil {
		t.Fatalf("oracle: locking %s: %v", dir, err)
	}
	defer unlock()
	if fileExists(path) { // exported by another process meanwhile
		return path
	}
	start := time.Now()
	script := filepath.Join(mustRoot(t), "scripts", "export_torch_models.py")
	run(t, exec.Command(py, script, dir, name))
	if !fileExists(path) {
		t.Fatalf("oracle: %s did not write %s", script, path)
	}
	t.Logf("oracle: exported %s in %v", path, time.Since(start).Round(time.Millisecond))
	return path
}

// ---- ONNX Runtime (Node.js) ----

var ort struct {
	once    sync.Once
	missing string // why ORT cannot be used; "" if it can
}

func ortDir() string {
	dir, err := ModuleRoot()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "scripts", "ort")
}

// ORTAvailable reports whether the oracles are on (OraclesOn) and
// Node.js and onnxruntime-node (in scripts/ort/node_modules) are
// installed and load.
func ORTAvailable() bool {
	if !OraclesOn() {
		return false
	}
	ort.once.Do(func() {
		dir := ortDir()
		if dir == "" {
			ort.missing = "no module root (go.mod) above the working directory"
			return
		}
		node, err := exec.LookPath("node")
		if err != nil {
			ort.missing = "Node.js (`node`) is not on PATH"
			return
		}
		if !fileExists(filepath.Join(dir, "node_modules", "onnxruntime-node", "package.json")) {
			ort.missing = "onnxruntime-node is not installed in scripts/ort/node_modules"
			return
		}
		cmd := exec.Command(node, "-e", "require('onnxruntime-node')")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			ort.missing = fmt.Sprintf("onnxruntime-node does not load (%v)", withOutput(err, out))
		}
	})
	return ort.missing == ""
}

func requireORT(t testing.TB) {
	t.Helper()
	Oracles(t, "ONNX Runtime")
	if !ORTAvailable() {
		skipf(t, "ONNX Runtime oracle unavailable: %s", ort.missing)
	}
}

// ORTRun runs model with ONNX Runtime (CPU) on inputs and returns every graph
// output. noOpt disables ORT's graph optimisations (which delete Dropout
// nodes, even training-mode ones). It skips the test if ORT is missing and
// fails it if the run fails. Results are cached (see CacheDir).
func ORTRun(t testing.TB, model string, inputs map[string]*Tensor, noOpt bool) map[string]*Tensor {
	t.Helper()
	in := filepath.Join(t.TempDir(), "in.json")
	if err := WriteTensors(in, inputs); err != nil {
		t.Fatalf("oracle: writing ORT inputs: %v", err)
	}
	k := ortKey(t, "ort-run", "ONNX Runtime run of "+model, model)
	k.file(t, "inputs", in)
	k.add("no-opt", strconv.FormatBool(noOpt))
	dir := cached(t, k, func(dir string) {
		requireORT(t)
		args := []string{filepath.Join(ortDir(), "run.js"), abs(t, model), in, filepath.Join(dir, "out.json")}
		if noOpt {
			args = append(args, "--no-opt")
		}
		run(t, exec.Command("node", args...))
	})
	res, err := ReadTensors(filepath.Join(dir, "out.json"))
	if err != nil {
		t.Fatalf("oracle: reading ORT outputs: %v", err)
	}
	return res
}

// ORTShapes runs model with ONNX Runtime on seeded-random inputs whose
// symbolic dimensions are all batch and returns the shape of every output.
// Results are cached (see CacheDir).
func ORTShapes(t testing.TB, model string, batch int) map[string][]int64 {
	t.Helper()
	return ORTShapesAt(t, model, batch)[batch]
}

// ORTShapesAt is ORTShapes at several batches: one Node.js process loads
// the model once and runs it at every batch whose result is not cached.
func ORTShapesAt(t testing.TB, model string, batches ...int) map[int]map[string][]int64 {
	t.Helper()
	keys := map[int]*key{}
	for _, b := range batches {
		k := ortKey(t, "ort-shapes", fmt.Sprintf("ONNX Runtime shapes of %s at batch %d", model, b), model)
		k.add("batch", strconv.Itoa(b))
		keys[b] = k
	}
	files := cachedBatches(t, batches, keys, "shapes.json", func(out string, missing string) {
		requireORT(t)
		run(t, exec.Command("node", filepath.Join(ortDir(), "shapes.js"), abs(t, model), missing, out))
	})
	res := map[int]map[string][]int64{}
	for b, f := range files {
		var r struct {
			Outputs map[string][]int64 `json:"outputs"`
		}
		readJSON(t, f, &r)
		res[b] = r.Outputs
	}
	return res
}

// ortKey starts the cache key of a Node.js oracle run on model: the
// ONNX Runtime installed, the scripts in scripts/ort and the model.
func ortKey(t testing.TB, tool, what, model string) *key {
	t.Helper()
	Oracles(t, what)
	if _, err := os.Stat(model); err != nil {
		requireORT(t) // a missing ORT skips first, as it did before the cache
	}
	k := newKey(tool, what)
	k.add("ort", ortVersion(t))
	k.files(t, ortDir(), ".js")
	k.model(t, abs(t, model))
	return k
}

// ---- onnx shape inference ----

// OnnxShapes runs python onnx's shape inference (strict_mode off, data
// propagation on) on model with every symbolic input dimension set to batch,
// and returns the shape of every input, output and intermediate value it
// could infer a rank for; a dimension it could not infer is -1. Results
// are cached (see CacheDir).
func OnnxShapes(t testing.TB, model string, batch int) map[string][]int64 {
	t.Helper()
	return OnnxShapesAt(t, model, batch)[batch]
}

// OnnxShapesAt is OnnxShapes at several batches: one python process
// reads the model once and infers at every batch whose result is not
// cached.
func OnnxShapesAt(t testing.TB, model string, batches ...int) map[int]map[string][]int64 {
	t.Helper()
	keys := map[int]*key{}
	for _, b := range batches {
		k := pythonKey(t, "onnx-shapes", fmt.Sprintf("onnx shape inference of %s at batch %d", model, b))
		k.model(t, abs(t, model))
		k.add("batch", strconv.Itoa(b))
		keys[b] = k
	}
	files := cachedBatches(t, batches, keys, "shapes.json", func(out string, missing string) {
		py := PythonONNX(t)
		script := filepath.Join(mustRoot(t), "scripts", "onnx_shapes.py")
		run(t, exec.Command(py, script, abs(t, model), missing, out))
	})
	res := map[int]map[string][]int64{}
	for b, f := range files {
		var r struct {
			Values map[string][]*int64 `json:"values"`
		}
		readJSON(t, f, &r)
		shapes := make(map[string][]int64, len(r.Values))
		for name, dims := range r.Values {
			s := make([]int64, len(dims))
			for i, d := range dims {
				if d == nil {
					s[i] = -1
				} else {
					s[i] = *d
				}
			}
			shapes[name] = s
		}
		res[b] = shapes
	}
	return res
}

// pythonKey starts the cache key of a python oracle run: the
// interpreter and package versions and every script in scripts/ (the
// scripts import one another).
func pythonKey(t testing.TB, tool, what string) *key {
	t.Helper()
	Oracles(t, what)
	k := newKey(tool, what)
	k.add("python", pythonVersions(t, pythonPath()))
	k.files(t, filepath.Join(mustRoot(t), "scripts"), ".py")
	return k
}

// ---- helpers ----

// run runs cmd and fails the test, showing its output, if it fails.
func run(t testing.TB, cmd *exec.Cmd) {
	t.Helper()
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	if err := cmd.Run(); err != nil {
		t.Fatalf("oracle: %s: %v\n%s", cmd, err, lastLines(buf.Bytes(), 40))
	}
}

func readJSON(t testing.TB, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("oracle: %v", err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("oracle: %s: %v", path, err)
	}
}

func abs(t testing.TB, path string) string {
	t.Helper()
	p, err := filepath.Abs(path)
	if err != nil {
		t.Fatalf("oracle: %v", err)
	}
	return p
}

func fileExists(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular()
}

// withOutput adds the telling line of a failed command's output to its
// error: the first line that mentions an error (Python's and Node's
// exceptions), else the last line.
func withOutput(err error, out []byte) error {
	lines := bytes.Split(bytes.TrimSpace(out), []byte("\n"))
	msg := bytes.TrimSpace(lines[len(lines)-1])
	for _, l := range lines {
		if bytes.Contains(l, []byte("Error")) {
			msg = bytes.TrimSpace(l)
			break
		}
	}
	if len(msg) > 0 {
		return fmt.Errorf("%w: %s", err, msg)
	}
	return err
}

// lastLines returns at most the last n lines of b.
func lastLines(b []byte, n int) []byte {
	b = bytes.TrimRight(b, "\n")
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] == '\n' {
			n--
			if n == 0 {
				return b[i+1:]
			}
		}
	}
	return b
}
