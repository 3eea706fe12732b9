package cpu_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tsplit/tsplit/compiler"
	"github.com/tsplit/tsplit/executor"
	"github.com/tsplit/tsplit/internal/oracle"
	"github.com/tsplit/tsplit/ir"
	"github.com/tsplit/tsplit/kernels"
)

// refBenchIters is how many timed iterations scripts/ort/bench.js and
// scripts/torch_bench.py run (after their 2 warm-up iterations).
const refBenchIters = 10

// BenchmarkResNet18ForwardBatch8 times one forward step of torchvision's
// resnet18 (training-mode export: BatchNormalization with batch
// statistics) at batch 8 on tsplit's CPU runtime, pool = the memory
// model's need, and compares it with ONNX Runtime (CPU, default graph
// optimisations) timed by scripts/ort/bench.js on the same model and
// batch: it reports ms/iter (ours, the median step), cpu-ms/iter (the
// median CPU time of the process per step), ORT_ms/iter (ORT's median)
// and x_ORT = ours / ORT. ORT runs once per process, outside the timed
// loop; without it the ratio is left out and a line says why.
func BenchmarkResNet18ForwardBatch8(b *testing.B) {
	benchStep(b, "resnet18", 8, false)
}

// BenchmarkResNet18TrainBatch8 is BenchmarkResNet18ForwardBatch8 for the
// training step `tsplitc train` builds (cross-entropy, backward, SGD),
// compared with the same step in PyTorch on the CPU
// (scripts/torch_bench.py: torchvision's resnet18, train() mode, SGD,
// torch.set_num_threads(os.cpu_count())): torch_ms/iter and x_torch.
func BenchmarkResNet18TrainBatch8(b *testing.B) {
	benchStep(b, "resnet18", 8, true)
}

// benchStep times the forward step (train false) or the training step
// of an exported torchvision model on the CPU device and compares it
// with the reference runtime's time (ORT, or PyTorch for training).
func benchStep(b *testing.B, name string, batch int64, train bool) {
	path := oracle.TorchModel(b, name)
	m, err := compiler.Import(path, compiler.Options{Batch: batch})
	if err != nil {
		b.Fatal(err)
	}
	if train {
		if _, err := compiler.BuildTrainingStep(m, compiler.TrainOptions{}); err != nil {
			b.Fatal(err)
		}
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
	wall, cpu := make([]float64, 0, b.N), make([]float64, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0, c0 := time.Now(), processCPU()
		if _, err := x.Run(inputs); err != nil {
			b.Fatal(err)
		}
		wall = append(wall, float64(time.Since(t0).Nanoseconds())/1e6)
		cpu = append(cpu, (processCPU()-c0).Seconds()*1e3)
	}
	b.StopTimer()
	ours, oursCPU := median(wall), median(cpu)
	b.ReportMetric(ours, "ms/iter")
	b.ReportMetric(oursCPU, "cpu-ms/iter")

	step, ref, unit, target := "forward", "ONNX Runtime", "ORT", 2.0
	if train {
		step, ref, unit, target = "training", "PyTorch", "torch", 1.5
	}
	var r refResult
	if train {
		r = refBench("torch", path, name, batch)
	} else {
		r = refBench("ort", path, name, batch)
	}
	if r.err != nil {
		b.Logf("%s %s step, batch %d: tsplit %.1f ms (%.0f CPU ms) on the CPU device (GOMAXPROCS %d, sgemm %s); no %s comparison: %v",
			name, step, batch, ours, oursCPU, runtime.GOMAXPROCS(0), kernels.SgemmName(), ref, r.err)
		return
	}
	b.ReportMetric(r.ms, unit+"_ms/iter")
	b.ReportMetric(ours/r.ms, "x_"+unit)
	b.Logf("%s %s step, batch %d: tsplit %.1f ms (%.0f CPU ms), %s %.1f ms (%.0f CPU ms): %.2fx (target <= %gx; medians of %d and %d steps, GOMAXPROCS %d, sgemm %s)",
		name, step, batch, ours, oursCPU, ref, r.ms, r.cpuMS, ours/r.ms, target, len(wall), refBenchIters, runtime.GOMAXPROCS(0), kernels.SgemmName())
}

// median of a non-empty slice (sorted in place).
func median(xs []float64) float64 {
	sort.Float64s(xs)
	n := len(xs)
	if n%2 == 1 {
		return xs[n/2]
	}
	return (xs[n/2-1] + xs[n/2]) / 2
}

// processCPU is the CPU time (user + system) the process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// refBench runs the reference runtime's timing script once per
// (runtime, model, batch) in this process: scripts/ort/bench.js on the
// ONNX file (tool "ort") or scripts/torch_bench.py on the torchvision
// model of that name (tool "torch"), with as many threads as tsplit has
// (GOMAXPROCS: GOMAXPROCS=1 compares single-threaded runtimes).
func refBench(tool, path, name string, batch int64) refResult {
	key := fmt.Sprintf("%s %s@%d", tool, path, batch)
	refRuns.Lock()
	defer refRuns.Unlock()
	if r, ok := refRuns.m[key]; ok {
		return r
	}
	var r refResult
	if tool == "torch" {
		r = runTorchBench(name, batch)
	} else {
		r = runORTBench(path, batch)
	}
	if refRuns.m == nil {
		refRuns.m = map[string]refResult{}
	}
	refRuns.m[key] = r
	return r
}

// refResult is a reference runtime's median step time and median CPU
// time per step, in ms, or why there is none.
type refResult struct {
	ms, cpuMS float64
	err       error
}

var refRuns struct {
	sync.Mutex
	m map[string]refResult
}

func runORTBench(path string, batch int64) refResult {
	if !oracle.ORTAvailable() {
		return refResult{err: fmt.Errorf("ONNX Runtime is absent (install it with `make deps`)")}
	}
	root, err := oracle.ModuleRoot()
	if err != nil {
		return refResult{err: err}
	}
	return runRefScript(exec.Command("node", filepath.Join(root, "scripts", "ort", "bench.js"), path,
		strconv.FormatInt(batch, 10), strconv.Itoa(refBenchIters), "--threads", strconv.Itoa(runtime.GOMAXPROCS(0))))
}

func runTorchBench(name string, batch int64) refResult {
	py := os.Getenv("TSPLIT_PYTHON")
	if py == "" {
		py = oracle.DefaultPython
	}
	if out, err := exec.Command(py, "-c", "import torch, torchvision").CombinedOutput(); err != nil {
		return refResult{err: fmt.Errorf("%s cannot import torch and torchvision (%v: %s; install them with `make deps`)", py, err, bytes.TrimSpace(out))}
	}
	root, err := oracle.ModuleRoot()
	if err != nil {
		return refResult{err: err}
	}
	return runRefScript(exec.Command(py, filepath.Join(root, "scripts", "torch_bench.py"), name,
		strconv.FormatInt(batch, 10), strconv.Itoa(refBenchIters), "--threads", strconv.Itoa(runtime.GOMAXPROCS(0))))
}

// runRefScript runs a timing script that prints one JSON object with the
// median step time (median_ms, else ms_per_iter) and the median CPU time
// per step (cpu_ms_per_iter).
func runRefScript(cmd *exec.Cmd) refResult {
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return refResult{err: fmt.Errorf("%s: %v: %s", filepath.Base(cmd.Args[1]), err, bytes.TrimSpace(stderr.Bytes()))}
	}
	var out struct {
		MsPerIter float64 `json:"ms_per_iter"`
		MedianMs  float64 `json:"median_ms"`
		CPUMs     float64 `json:"cpu_ms_per_iter"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		return refResult{err: fmt.Errorf("%s printed %q: %v", filepath.Base(cmd.Args[1]), stdout.String(), err)}
	}
	ms := out.MedianMs
	if ms == 0 {
		ms = out.MsPerIter
	}
	if !(ms > 0) || math.IsInf(ms, 0) {
		return refResult{err: fmt.Errorf("%s reported %v ms/iter", filepath.Base(cmd.Args[1]), ms)}
	}
	return refResult{ms: ms, cpuMS: out.CPUMs}
}

// seededInputs makes the graph inputs: floats uniform in [-1, 1),
// integers in [0, 10) (as scripts/ort/bench.js and tsplitc --run).
func seededInputs(b testing.TB, g *ir.Graph) map[string][]byte {
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
