package cpu_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/tsplit/tsplit/compiler"
	"github.com/tsplit/tsplit/executor"
	"github.com/tsplit/tsplit/internal/oracle"
	"github.com/tsplit/tsplit/ir"
)

// ortBenchIters is how many timed iterations scripts/ort/bench.js runs
// (after its 2 warm-up iterations).
const ortBenchIters = 10

// BenchmarkResNet18ForwardBatch8 times one forward step of torchvision's
// resnet18 (training-mode export: BatchNormalization with batch
// statistics) at batch 8 on tsplit's CPU runtime, pool = the memory
// model's need, and compares it with ONNX Runtime (CPU, default graph
// optimisations) timed by scripts/ort/bench.js on the same model and
// batch: it reports ms/iter (ours), ORT_ms/iter and x_ORT = ours / ORT.
// ORT runs once per process, outside the timed loop; without it the
// ratio is left out and a line says why.
func BenchmarkResNet18ForwardBatch8(b *testing.B) {
	benchForward(b, "resnet18", 8)
}

func benchForward(b *testing.B, name string, batch int64) {
	path := oracle.TorchModel(b, name)
	m, err := compiler.Import(path, compiler.Options{Batch: batch})
	if err != nil {
		b.Fatal(err)
	}
	probe, err := executor.New(m, mustDev(b, 0), executor.Options{})
	if err != nil {
		b.Fatal(err)
	}
	x, err := executor.New(m, mustDev(b, probe.Mem.Need()), executor.Options{})
	if err != nil {
		b.Fatal(err)
	}
	inputs := seededInputs(b, m.Graph)
	// One untimed step: faults the pool's pages in and loads the weights'
	// data once.
	if _, err := x.Run(inputs); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := x.Run(inputs); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	ours := float64(b.Elapsed().Nanoseconds()) / 1e6 / float64(b.N)
	b.ReportMetric(ours, "ms/iter")

	ort, err := ortBench(path, batch)
	if err != nil {
		b.Logf("%s batch %d: %.1f ms/iter on tsplit's CPU runtime (BLAS %s); no ONNX Runtime ratio: %v", name, batch, ours, blasBuild(), err)
		return
	}
	b.ReportMetric(ort, "ORT_ms/iter")
	b.ReportMetric(ours/ort, "x_ORT")
	b.Logf("%s batch %d: tsplit %.1f ms/iter, ONNX Runtime %.1f ms/iter: tsplit takes %.2fx ORT's time (GOMAXPROCS threads, BLAS %s)",
		name, batch, ours, ort, ours/ort, blasBuild())
}

// blasBuild names the BLAS the kernels were built with: OpenBLAS under
// the openblas build tag, gonum's pure-Go BLAS otherwise (kernels/blas.go).
func blasBuild() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "-tags" && slices.Contains(strings.Split(s.Value, ","), "openblas") {
				return "openblas"
			}
		}
	}
	return "gonum"
}

// ortBench runs scripts/ort/bench.js once per (model, batch) in this
// process and returns its ms/iter.
func ortBench(path string, batch int64) (float64, error) {
	key := fmt.Sprintf("%s@%d", path, batch)
	ortRuns.Lock()
	defer ortRuns.Unlock()
	if r, ok := ortRuns.m[key]; ok {
		return r.ms, r.err
	}
	ms, err := runORTBench(path, batch)
	if ortRuns.m == nil {
		ortRuns.m = map[string]ortResult{}
	}
	ortRuns.m[key] = ortResult{ms, err}
	return ms, err
}

type ortResult struct {
	ms  float64
	err error
}

var ortRuns struct {
	sync.Mutex
	m map[string]ortResult
}

func runORTBench(path string, batch int64) (float64, error) {
	if !oracle.ORTAvailable() {
		return 0, fmt.Errorf("ONNX Runtime is absent (install it with `make deps`)")
	}
	root, err := oracle.ModuleRoot()
	if err != nil {
		return 0, err
	}
	cmd := exec.Command("node", filepath.Join(root, "scripts", "ort", "bench.js"), path,
		strconv.FormatInt(batch, 10), strconv.Itoa(ortBenchIters))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return 0, fmt.Errorf("bench.js: %v: %s", err, bytes.TrimSpace(stderr.Bytes()))
	}
	var out struct {
		MsPerIter float64 `json:"ms_per_iter"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		return 0, fmt.Errorf("bench.js printed %q: %v", stdout.String(), err)
	}
	if !(out.MsPerIter > 0) || math.IsInf(out.MsPerIter, 0) {
		return 0, fmt.Errorf("bench.js reported %v ms/iter", out.MsPerIter)
	}
	return out.MsPerIter, nil
}

// seededInputs makes the graph inputs: floats uniform in [-1, 1),
// integers in [0, 10) (as scripts/ort/bench.js and tsplitc --run).
func seededInputs(b *testing.B, g *ir.Graph) map[string][]byte {
	rng := rand.New(rand.NewPCG(12345, 0))
	in := map[string][]byte{}
	for _, v := range g.Inputs {
		if v.Kind != ir.KindInput {
			continue
		}
		n, _ := v.Shape.NumElements()
		switch v.DType {
		case ir.Float:
			f := make([]float32, n)
			for i := range f {
				f[i] = float32(rng.Float64()*2 - 1)
			}
			in[v.Name] = oracle.FromFloat32(v.Shape, f).Data
		case ir.Int64:
			ids := make([]int64, n)
			for i := range ids {
				ids[i] = rng.Int64N(10)
			}
			in[v.Name] = oracle.FromInt64(v.Shape, ids).Data
		default:
			b.Fatalf("input %q: no seeded data for %v", v.Name, v.DType)
		}
	}
	return in
}
