package compiler_test

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/tsplit/tsplit/autodiff"
	"github.com/tsplit/tsplit/backend"
	"github.com/tsplit/tsplit/compiler"
	"github.com/tsplit/tsplit/executor"
	"github.com/tsplit/tsplit/executor/cpu"
	"github.com/tsplit/tsplit/internal/oracle"
	"github.com/tsplit/tsplit/ir"
)

// Training steps of the exported PyTorch models (scripts/
// export_torch_models.py) checked against PyTorch and ONNX Runtime.
//
// Tolerances are max |ours − reference| over a tensor relative to the
// tensor's max |reference|.
const (
	// gradRelTol: tsplit's float32 step vs PyTorch's float32 autograd.
	gradRelTol = 1e-4
	// ortTrainRelTol: tsplit's runtime vs ONNX Runtime on the same
	// training-step file.
	ortTrainRelTol = 1e-5
)

// trainingStep imports the exported PyTorch model name at batch and
// builds its training step.
func trainingStep(t *testing.T, name string, batch int, opts compiler.TrainOptions) (*ir.Model, *compiler.TrainingInfo) {
	t.Helper()
	path := oracle.TorchModel(t, name)
	m, err := compiler.Import(path, compiler.Options{Batch: int64(batch)})
	if err != nil {
		t.Fatal(err)
	}
	ti, err := compiler.BuildTrainingStep(m, opts)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return m, ti
}

// stepExecutor makes an executor for m on a CPU device whose pool is
// what the memory model needs.
func stepExecutor(t *testing.T, m *ir.Model) *executor.Executor {
	t.Helper()
	probeDev, err := cpu.New(0)
	if err != nil {
		t.Fatal(err)
	}
	probe, err := executor.New(m, probeDev, executor.Options{})
	if err != nil {
		t.Fatal(err)
	}
	dev, err := cpu.New(probe.Mem.Need())
	if err != nil {
		t.Fatal(err)
	}
	x, err := executor.New(m, dev, executor.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// tensorTypes maps IR element types to tensor-file type names.
var tensorTypes = map[ir.DType]string{ir.Float: "float32", ir.Double: "float64", ir.Int64: "int64", ir.Int32: "int32", ir.Bool: "bool"}

// stepFeeds gives the data inputs of a training step (the model's
// inputs and the labels) from tensors named as the forward model's
// inputs and "labels". Weights, BatchNormalization running statistics
// and optimizer state get nothing: their initializer data is used.
func stepFeeds(t *testing.T, m *ir.Model, ti *compiler.TrainingInfo, in map[string]*oracle.Tensor) map[string][]byte {
	t.Helper()
	feeds := map[string][]byte{}
	used := map[string]bool{}
	for _, v := range m.Graph.Inputs {
		if v.Kind == ir.KindInit {
			continue
		}
		src := v.Name
		if v.Name == ti.Labels {
			src = "labels"
		}
		x, ok := in[src]
		if !ok {
			t.Fatalf("no data for training-step input %q (looked for %q)", v.Name, src)
		}
		if x.Type != tensorTypes[v.DType] || !ir.Shape(x.Dims).Equal(v.Shape) {
			t.Fatalf("input %q: given %s%v, the training step wants %v%v", v.Name, x.Type, x.Dims, v.DType, v.Shape)
		}
		feeds[v.Name] = x.Data
		used[src] = true
	}
	for n := range in {
		if !used[n] {
			t.Fatalf("given input %q is not an input of the training step", n)
		}
	}
	return feeds
}

// seededInputs makes data for a training step's data inputs: floats
// N(0, 1), labels in [0, classes), other int64 (token ids) in [0, 1000).
func seededInputs(m *ir.Model, ti *compiler.TrainingInfo, seed uint64) map[string]*oracle.Tensor {
	rng := rand.New(rand.NewPCG(seed, 0x747261696e))
	in := map[string]*oracle.Tensor{}
	for _, v := range m.Graph.Inputs {
		if v.Kind == ir.KindInit {
			continue
		}
		n, _ := v.Shape.NumElements()
		switch v.DType {
		case ir.Float:
			f := make([]float32, n)
			for i := range f {
				f[i] = float32(rng.NormFloat64())
			}
			in[v.Name] = oracle.FromFloat32(v.Shape, f)
		case ir.Int64:
			hi := int64(1000)
			if v.Name == ti.Labels {
				hi = ti.Classes
			}
			ids := make([]int64, n)
			for i := range ids {
				ids[i] = rng.Int64N(hi)
			}
			in[v.Name] = oracle.FromInt64(v.Shape, ids)
		default:
			panic(fmt.Sprintf("input %q: no seeded data for %v", v.Name, v.DType))
		}
	}
	return in
}

// relDiff is max |got − want| / max |want| over a float32 tensor (the
// absolute difference when want is all zeros), the max |want|, and the
// index of the worst element.
func relDiff(got []byte, want *oracle.Tensor) (rel, scale float64, worst int, err error) {
	if want.Type != "float32" {
		return 0, 0, 0, fmt.Errorf("reference is %s, not float32", want)
	}
	w := want.Float32s()
	if len(got) != 4*len(w) {
		return 0, 0, 0, fmt.Errorf("%d bytes from tsplit, %d reference values", len(got), len(w))
	}
	var diff float64
	for i, wv := range w {
		g := float64(math.Float32frombits(binary.LittleEndian.Uint32(got[4*i:])))
		if math.IsNaN(g) || math.IsInf(g, 0) {
			return math.Inf(1), 0, i, fmt.Errorf("element %d is %v in tsplit (reference %v)", i, g, wv)
		}
		scale = max(scale, math.Abs(float64(wv)))
		if d := math.Abs(g - float64(wv)); d > diff {
			diff, worst = d, i
		}
	}
	if scale == 0 {
		return diff, 0, worst, nil
	}
	return diff / scale, scale, worst, nil
}

func float32At(b []byte, i int) float32 {
	return math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
}

// tensorErr is one compared tensor.
type tensorErr struct {
	name  string
	rel   float64
	scale float64
}

// logWorst logs the n worst tensors of a comparison.
func logWorst(t *testing.T, what string, errs []tensorErr, n int) {
	t.Helper()
	sort.Slice(errs, func(i, j int) bool { return errs[i].rel > errs[j].rel })
	var parts []string
	for _, e := range errs[:min(n, len(errs))] {
		parts = append(parts, fmt.Sprintf("%s %.3g (max |ref| %.3g)", e.name, e.rel, e.scale))
	}
	t.Logf("%s: worst tensors: %s", what, strings.Join(parts, "; "))
}

// TestGradientsMatchPyTorch builds the training step (mean cross-entropy,
// optimizer "none": the step outputs the loss and every parameter
// gradient) of exported PyTorch models, runs it on the CPU runtime with
// the inputs scripts/torch_grads.py made, and compares the loss and
// every parameter gradient with PyTorch's autograd on the same weights
// (loaded from the exported file) and inputs, in train() mode with no
// dropout: max |tsplit − torch| ≤ 1e-4 · max |torch| per tensor.
// BatchNormalization normalises with the batch's statistics on both
// sides. resnet18 is skipped under -short.
func TestGradientsMatchPyTorch(t *testing.T) {
	for _, c := range []struct {
		name  string
		batch int
	}{{"resnet18", 4}, {"vgg_small", 4}, {"transformer_nodrop", 4}} {
		t.Run(c.name, func(t *testing.T) {
			if testing.Short() && c.name == "resnet18" {
				t.Skip("resnet18 skipped under -short")
			}
			inputs, want := oracle.TorchGrads(t, c.name, c.batch)
			m, ti := trainingStep(t, c.name, c.batch, compiler.TrainOptions{Loss: "cross-entropy", Optimizer: "none"})
			feeds := stepFeeds(t, m, ti, inputs)
			x := stepExecutor(t, m)
			start := time.Now()
			res, err := x.Run(feeds)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s batch %d: tsplit training step (%d ops) ran in %v (pool %s)", c.name, c.batch,
				len(m.Graph.Order()), time.Since(start).Round(time.Millisecond), compiler.FormatBytes(x.Mem.Need()))

			var errs []tensorErr
			check := func(label, out string, ref *oracle.Tensor) {
				got, ok := res.Outputs[out]
				if !ok {
					t.Errorf("%s: no output %q", label, out)
					return
				}
				if v := m.Graph.Lookup(out); v == nil || !v.Shape.Equal(ir.Shape(ref.Dims)) && !(len(ref.Dims) == 0 && v.Shape.Equal(ir.Shape{1})) {
					t.Errorf("%s: tsplit shape %v, PyTorch %v", label, v.Shape, ref.Dims)
					return
				}
				rel, scale, worst, err := relDiff(got, ref)
				if err != nil {
					t.Errorf("%s: %v", label, err)
					return
				}
				errs = append(errs, tensorErr{label, rel, scale})
				if !(rel <= gradRelTol) {
					t.Errorf("%s: max |tsplit − torch| / max |torch| = %.3g > %g (element %d: tsplit %.7g, torch %.7g)",
						label, rel, gradRelTol, worst, float32At(got, worst), ref.Float32s()[worst])
				}
			}
			check("loss", ti.Loss, want["loss"])
			t.Logf("%s: loss tsplit %.7g, torch %.7g", c.name, float32At(res.Outputs[ti.Loss], 0), want["loss"].Float32s()[0])
			for _, p := range ti.Params {
				ref, ok := want[p]
				if !ok {
					t.Errorf("parameter %q: PyTorch has no gradient for it", p)
					continue
				}
				check("grad "+p, ti.Grads[p], ref)
			}
			for n := range want {
				if n != "loss" && !slices.Contains(ti.Params, n) {
					t.Errorf("PyTorch parameter %q is not a parameter of the training step", n)
				}
			}
			logWorst(t, c.name, errs, 5)
			t.Logf("%s: worst relative error %.3g over the loss and %d gradients (tolerance %g)", c.name, errs[0].rel, len(ti.Params), gradRelTol)
		})
	}
}

// TestTrainStepRunsInORT writes the training step (optimizer "none") of
// resnet18 and transformer_nodrop at batch 2 to an ONNX file, runs it in
// ONNX Runtime (graph optimisations off) and on tsplit's CPU runtime
// with the same seeded inputs, and compares every output (the loss, the
// gradients, BatchNormalization running statistics): max |tsplit − ORT|
// ≤ 1e-5 · max |ORT| per tensor. resnet18 is skipped under -short.
func TestTrainStepRunsInORT(t *testing.T) {
	for _, name := range []string{"resnet18", "transformer_nodrop"} {
		t.Run(name, func(t *testing.T) {
			if testing.Short() && name == "resnet18" {
				t.Skip("resnet18 skipped under -short")
			}
			const batch = 2
			m, ti := trainingStep(t, name, batch, compiler.TrainOptions{Loss: "cross-entropy", Optimizer: "none"})
			path := filepath.Join(t.TempDir(), name+"-train.onnx")
			if err := backend.WriteFile(m, path); err != nil {
				t.Fatal(err)
			}
			in := seededInputs(m, ti, 7)
			start := time.Now()
			want := oracle.ORTRun(t, path, in, true)
			t.Logf("%s: ONNX Runtime (optimisations off) ran the training step in %v", name, time.Since(start).Round(time.Millisecond))

			feeds := map[string][]byte{}
			for n, x := range in {
				feeds[n] = x.Data
			}
			x := stepExecutor(t, m)
			res, err := x.Run(feeds)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: tsplit ran it in %v", name, res.Duration.Round(time.Millisecond))
			x = nil
			runtime.GC()

			grads := map[string]string{}
			for p, g := range ti.Grads {
				grads[g] = p
			}
			var errs []tensorErr
			for _, v := range m.Graph.Outputs {
				label := v.Name
				if p, ok := grads[v.Name]; ok {
					label = "grad " + p
				}
				w, ok := want[v.Name]
				if !ok {
					t.Errorf("%s: ONNX Runtime gave no output %q", name, label)
					continue
				}
				if !ir.Shape(w.Dims).Equal(v.Shape) {
					t.Errorf("%s: %s has shape %v in tsplit, %v in ORT", name, label, v.Shape, w.Dims)
					continue
				}
				rel, scale, worst, err := relDiff(res.Outputs[v.Name], w)
				if err != nil {
					t.Errorf("%s: %s: %v", name, label, err)
					continue
				}
				errs = append(errs, tensorErr{label, rel, scale})
				if !(rel <= ortTrainRelTol) {
					t.Errorf("%s: %s: max |tsplit − ORT| / max |ORT| = %.3g > %g (element %d: tsplit %.7g, ORT %.7g)",
						name, label, rel, ortTrainRelTol, worst, float32At(res.Outputs[v.Name], worst), w.Float32s()[worst])
				}
			}
			if len(want) != len(m.Graph.Outputs) {
				t.Errorf("%s: ORT gave %d outputs, the training step has %d", name, len(want), len(m.Graph.Outputs))
			}
			logWorst(t, name, errs, 5)
			t.Logf("%s: loss tsplit %.7g, ORT %.7g; worst relative difference %.3g over %d outputs (tolerance %g)",
				name, float32At(res.Outputs[ti.Loss], 0), want[ti.Loss].Float32s()[0], errs[0].rel, len(errs), ortTrainRelTol)
		})
	}
}

// monotonicLR is the SGD learning rate of TestResNet18TrainsMonotonically.
const monotonicLR = 0.01

// TestResNet18TrainsMonotonically runs 20 plain SGD steps (lr 0.01) of
// the exported resnet18 at batch 2 on one fixed batch on the CPU
// runtime, feeding the updated weights (and BatchNormalization running
// statistics) of each step into the next: the loss must strictly
// decrease at every step. PyTorch's 20 losses on the same batch and
// weights (scripts/torch_grads.py --sgd-steps) are logged next to
// tsplit's, and the two trajectories must stay within 1e-3 of each
// other relative to the first loss. Skipped under -short.
func TestResNet18TrainsMonotonically(t *testing.T) {
	if testing.Short() {
		t.Skip("20 resnet18 training steps skipped under -short")
	}
	const steps, batch = 20, 2
	inputs, want := oracle.TorchGrads(t, "resnet18", batch, fmt.Sprintf("--sgd-steps=%d", steps), fmt.Sprintf("--lr=%g", monotonicLR))
	m, ti := trainingStep(t, "resnet18", batch, compiler.TrainOptions{Loss: "cross-entropy", Optimizer: "sgd", LR: monotonicLR})
	feeds := stepFeeds(t, m, ti, inputs)
	x := stepExecutor(t, m)
	torchLosses := want["sgd_losses"].Float32s()
	var losses []float64
	start := time.Now()
	for i := 0; i < steps; i++ {
		res, err := x.Run(feeds)
		if err != nil {
			t.Fatalf("step %d: %v", i+1, err)
		}
		for _, fb := range ti.Feedback {
			feeds[fb[1]] = res.Outputs[fb[0]]
		}
		losses = append(losses, float64(float32At(res.Outputs[ti.Loss], 0)))
	}
	elapsed := time.Since(start)
	var ours, theirs []string
	dev := 0.0
	for i, l := range losses {
		ours = append(ours, fmt.Sprintf("%.6f", l))
		theirs = append(theirs, fmt.Sprintf("%.6f", torchLosses[i]))
		dev = max(dev, math.Abs(l-float64(torchLosses[i])))
	}
	t.Logf("resnet18 batch %d, SGD lr %g, %d steps in %v (%v/step)", batch, monotonicLR, steps,
		elapsed.Round(time.Millisecond), (elapsed / steps).Round(time.Millisecond))
	t.Logf("tsplit losses:  %s", strings.Join(ours, " "))
	t.Logf("PyTorch losses: %s", strings.Join(theirs, " "))
	t.Logf("max |tsplit − PyTorch| over the trajectory: %.3g (%.3g of the first loss)", dev, dev/math.Abs(float64(torchLosses[0])))
	for i := 1; i < len(losses); i++ {
		if !(losses[i] < losses[i-1]) {
			t.Errorf("step %d: loss %.7g does not decrease from %.7g", i+1, losses[i], losses[i-1])
		}
	}
	if !(dev <= 1e-3*math.Abs(float64(torchLosses[0]))) {
		t.Errorf("tsplit's losses leave PyTorch's: max difference %.3g", dev)
	}
}

// TestSavedFeatureMapsVsPyTorch compares the feature maps tsplit's
// resnet18 training step (batch 8) keeps for backward — the forward
// values autodiff.SavedForBackward lists, each counted once, without
// parameters, other weights (BatchNormalization running statistics),
// compile-time constants and values computed from weights alone — with
// the bytes PyTorch's autograd saves (scripts/torch_saved.py: the
// saved-tensor pack hook's storages, parameters and buffers excluded).
// It logs both, the ratio and both breakdowns, and asserts only that
// both are positive and within 2× of each other.
func TestSavedFeatureMapsVsPyTorch(t *testing.T) {
	const name, batch = "resnet18", 8
	m, ti := trainingStep(t, name, batch, compiler.TrainOptions{Loss: "cross-entropy"})
	g := m.Graph
	params := map[string]bool{}
	for _, p := range ti.Params {
		params[p] = true
	}
	// data: values computed from a data input (image, labels).
	data := make([]bool, g.NumValueIDs())
	for _, v := range g.Inputs {
		if v.Kind == ir.KindInput && !params[v.Name] {
			data[v.ID] = true
		}
	}
	for _, op := range g.Order() {
		for _, in := range op.Inputs() {
			if in != nil && data[in.ID] {
				for _, out := range op.Outputs() {
					if out != nil {
						data[out.ID] = true
					}
				}
				break
			}
		}
	}
	type bucket struct {
		count int
		bytes int64
	}
	var fmaps, weights, consts, derived int64
	byOp := map[string]*bucket{}
	for _, v := range autodiff.SavedForBackward(g) {
		b := v.Bytes()
		switch {
		case v.Kind == ir.KindInit || params[v.Name]:
			weights += b
		case v.Const != nil:
			consts += b
		case !data[v.ID]:
			derived += b
		default:
			fmaps += b
			what := "graph input"
			if v.Kind == ir.KindOp {
				what = v.Def.Type + " output"
			}
			e := byOp[what]
			if e == nil {
				e = &bucket{}
				byOp[what] = e
			}
			e.count++
			e.bytes += b
		}
	}
	torch := oracle.TorchSaved(t, name, batch)

	t.Logf("%s batch %d: tsplit saves %s of feature maps for backward (%d bytes); PyTorch %s (%d bytes, %d storages)",
		name, batch, compiler.FormatBytes(fmaps), fmaps, compiler.FormatBytes(torch.Bytes), torch.Bytes, torch.Tensors)
	if torch.Bytes > 0 {
		t.Logf("ratio tsplit / PyTorch = %.3f", float64(fmaps)/float64(torch.Bytes))
	}
	t.Logf("tsplit also reads for backward: weights %s, constants %s, weight-only values %s; PyTorch's saved parameters and buffers %s",
		compiler.FormatBytes(weights), compiler.FormatBytes(consts), compiler.FormatBytes(derived), compiler.FormatBytes(torch.ExcludedBytes))
	type row struct {
		name  string
		count int
		bytes int64
	}
	var rows []row
	for k, e := range byOp {
		rows = append(rows, row{k, e.count, e.bytes})
	}
	sort.Slice(rows, func(i, j int) bool {
		return rows[i].bytes > rows[j].bytes || rows[i].bytes == rows[j].bytes && rows[i].name < rows[j].name
	})
	for _, r := range rows {
		t.Logf("  tsplit  %-28s %3d values %12d bytes", r.name, r.count, r.bytes)
	}
	rows = rows[:0]
	for k, e := range torch.ByOp {
		rows = append(rows, row{k, e.Count, e.Bytes})
	}
	sort.Slice(rows, func(i, j int) bool {
		return rows[i].bytes > rows[j].bytes || rows[i].bytes == rows[j].bytes && rows[i].name < rows[j].name
	})
	for _, r := range rows {
		t.Logf("  PyTorch %-28s %3d storages %10d bytes", r.name, r.count, r.bytes)
	}
	if torch.GraphBytes != torch.Bytes {
		t.Logf("note: PyTorch's graph walk finds %d bytes, its pack hook %d", torch.GraphBytes, torch.Bytes)
	}

	if fmaps <= 0 || torch.Bytes <= 0 {
		t.Fatalf("saved bytes must be positive: tsplit %d, PyTorch %d", fmaps, torch.Bytes)
	}
	if r := float64(fmaps) / float64(torch.Bytes); r > 2 || r < 0.5 {
		t.Errorf("tsplit saves %.2f× what PyTorch saves (%d vs %d bytes); want within 2×", r, fmaps, torch.Bytes)
	}
}
