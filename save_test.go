package tsplit_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/tsplit/tsplit"
	"github.com/tsplit/tsplit/compiler"
	"github.com/tsplit/tsplit/internal/oracle"
	"github.com/tsplit/tsplit/internal/tensorfile"
	"github.com/tsplit/tsplit/ir"
)

const resnet18 = "testdata/onnx/resnet18-small.onnx"

// seed seeds the random inputs of every run here and of ONNX Runtime's.
const seed = 1

// trainTwice trains resnet18-small for two iterations with Adam (so
// there is optimizer state to save), writing the trained model and the
// outputs into a temporary folder.
func trainTwice(t *testing.T) (res *tsplit.RunResult, trained, saved string) {
	t.Helper()
	dir := t.TempDir()
	trained, saved = filepath.Join(dir, "trained.onnx"), filepath.Join(dir, "outputs")
	res, err := tsplit.RunFile(context.Background(), resnet18, tsplit.RunOptions{Batch: 2, Iters: 2, Seed: seed,
		Train: &tsplit.TrainOptions{Optimizer: "adam"}, Output: trained, SaveOutputs: saved})
	if err != nil {
		t.Fatal(err)
	}
	if res.Trained != trained || len(res.Saved) != len(res.Outputs) {
		t.Fatalf("trained %q, %d saved of %d outputs", res.Trained, len(res.Saved), len(res.Outputs))
	}
	return res, trained, saved
}

func outputData(res *tsplit.RunResult, name string) []byte {
	for _, o := range res.Outputs {
		if o.Name == name {
			return o.Data
		}
	}
	return nil
}

// The trained model holds what the last iteration computed (weights,
// Adam's moments, BN running statistics), differs from the initial
// weights, and training on from it is training one iteration more.
func TestRunWritesTrainedModel(t *testing.T) {
	ctx := context.Background()
	res, trained, _ := trainTwice(t)
	ti := res.Training
	m, err := tsplit.Load(ctx, trained, tsplit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	initial, err := tsplit.Load(ctx, resnet18, tsplit.Options{Batch: 2})
	if err != nil {
		t.Fatal(err)
	}
	data := func(m *ir.Model, name string) []byte {
		v := m.Graph.Lookup(name)
		if v == nil || v.Kind != ir.KindInit {
			t.Fatalf("%s: %q is not an initializer", m.Path, name)
		}
		d, err := v.Data()
		if err != nil || d == nil {
			t.Fatalf("%s: %q has no data (%v)", m.Path, name, err)
		}
		return d.Raw
	}
	if len(ti.Feedback) <= len(ti.Params) {
		t.Fatalf("%d fed-back values for %d parameters: no optimizer state", len(ti.Feedback), len(ti.Params))
	}
	for _, fb := range ti.Feedback {
		if got, want := data(m, fb[1]), outputData(res, fb[0]); !bytes.Equal(got, want) {
			t.Errorf("trained %q is not the last iteration's %q", fb[1], fb[0])
		}
	}
	for _, p := range ti.Params {
		if bytes.Equal(data(m, p), data(initial, p)) {
			t.Errorf("parameter %q did not change in training", p)
		}
	}
	// Iteration 3 of one run is iteration 1 from the trained model (the
	// seeded inputs are the same: the weights are initializers in both).
	three, err := tsplit.RunFile(ctx, resnet18, tsplit.RunOptions{Batch: 2, Iters: 3, Seed: seed, Train: &tsplit.TrainOptions{Optimizer: "adam"}})
	if err != nil {
		t.Fatal(err)
	}
	on, err := tsplit.RunFile(ctx, trained, tsplit.RunOptions{Seed: seed})
	if err != nil {
		t.Fatal(err)
	}
	if on.Losses[0] != three.Losses[2] {
		t.Errorf("loss from the trained model %v, the third iteration's %v", on.Losses[0], three.Losses[2])
	}
	// ONNX Runtime loads it and computes the same loss.
	if !oracle.ORTAvailable() {
		t.Log("ONNX Runtime oracle unavailable: the trained model is not checked with it")
		return
	}
	ortLoss(t, m, trained, on.Losses[0])
}

// ortLoss runs the training step in file (m, as loaded) with ONNX
// Runtime on the seeded inputs tsplit runs it with and compares the
// loss with tsplit's.
func ortLoss(t *testing.T, m *ir.Model, file string, want float64) {
	t.Helper()
	raw, err := compiler.RandomInputs(m, seed)
	if err != nil {
		t.Fatal(err)
	}
	in := map[string]*tensorfile.Tensor{}
	for name, b := range raw {
		v := m.Graph.Lookup(name)
		typ := map[ir.DType]string{ir.Float: "float32", ir.Int64: "int64"}[v.DType]
		in[name] = &tensorfile.Tensor{Type: typ, Dims: v.Shape, Data: b}
	}
	ti, err := compiler.ReadTrainingInfo(m)
	if err != nil || ti == nil {
		t.Fatalf("%s: not a training step (%v)", file, err)
	}
	loss := oracle.ORTRun(t, file, in, true)[ti.Loss]
	if loss == nil {
		t.Fatalf("ONNX Runtime gave no %q", ti.Loss)
	}
	if got := float64(loss.Float32s()[0]); math.Abs(got-want) > 1e-4*math.Abs(want) {
		t.Errorf("ONNX Runtime's loss on %s %v, tsplit's %v", file, got, want)
	}
}

// --save-outputs writes one .npy per output that tensorfile and numpy
// read back as the run's outputs, and index.json names them.
func TestRunSavesOutputs(t *testing.T) {
	res, _, dir := trainTwice(t)
	var index map[string]string
	b, err := os.ReadFile(filepath.Join(dir, "index.json"))
	if err == nil {
		err = json.Unmarshal(b, &index)
	}
	if err != nil || len(index) != len(res.Outputs) {
		t.Fatalf("index.json: %v, %d entries for %d outputs", err, len(index), len(res.Outputs))
	}
	sums := map[string]float64{}
	for i, s := range res.Saved {
		o := res.Outputs[i]
		if s.Name != o.Name || filepath.Join(dir, index[o.Name]) != s.File {
			t.Fatalf("saved %+v for output %q (index: %q)", s, o.Name, index[o.Name])
		}
		got, err := tensorfile.ReadNPY(s.File)
		if err != nil {
			t.Fatal(err)
		}
		if got.Type != "float32" || !ir.Shape(got.Dims).Equal(o.Shape) || !bytes.Equal(got.Data, o.Data) {
			t.Errorf("%s: %v, want float32%v and the run's data", s.File, got, o.Shape)
		}
		for _, x := range o.Values(-1) {
			sums[o.Name] += x
		}
	}
	py := oracle.PythonNumpy(t)
	script := `import json, sys, numpy as np
d = sys.argv[1]
out = {}
for name, f in json.load(open(d + "/index.json")).items():
    a = np.load(d + "/" + f)
    out[name] = [str(a.dtype), list(a.shape), float(a.astype(np.float64).sum())]
print(json.dumps(out))`
	outb, err := exec.Command(py, "-c", script, dir).Output()
	if err != nil {
		t.Fatalf("numpy: %v", err)
	}
	var np map[string][]any
	if err := json.Unmarshal(outb, &np); err != nil {
		t.Fatal(err)
	}
	for _, o := range res.Outputs {
		got := np[o.Name]
		if len(got) != 3 || got[0] != "float32" {
			t.Errorf("numpy read %q as %v", o.Name, got)
			continue
		}
		shape, _ := json.Marshal(got[1])
		want, _ := json.Marshal(o.Shape)
		if o.Shape == nil {
			want = []byte("[]")
		}
		if !bytes.Equal(shape, want) {
			t.Errorf("numpy: %q has shape %s, want %s", o.Name, shape, want)
		}
		if s := got[2].(float64); math.Abs(s-sums[o.Name]) > 1e-9*math.Max(1, math.Abs(s)) {
			t.Errorf("numpy: %q sums to %v, want %v", o.Name, s, sums[o.Name])
		}
	}
}

// What -o and --save-outputs refuse, before running.
func TestRunOutputRefusals(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		what   string
		opts   tsplit.RunOptions
		option string
	}{
		{"a forward model has no trained model", tsplit.RunOptions{Batch: 2, Output: filepath.Join(dir, "t.onnx")}, "Output"},
		{"the input itself", tsplit.RunOptions{Batch: 2, Train: &tsplit.TrainOptions{}, Output: resnet18}, "Output"},
		{"a device", tsplit.RunOptions{Batch: 2, Train: &tsplit.TrainOptions{}, Output: "/dev/null"}, "Output"},
		{"a folder", tsplit.RunOptions{Batch: 2, Train: &tsplit.TrainOptions{}, Output: dir}, "Output"},
		{"outputs into a file", tsplit.RunOptions{Batch: 2, SaveOutputs: file}, "SaveOutputs"},
	} {
		_, err := tsplit.RunFile(ctx, resnet18, c.opts)
		var ue *tsplit.UsageError
		if !errors.As(err, &ue) || ue.Option != c.option {
			t.Errorf("%s: %v, want a usage error of %s", c.what, err, c.option)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("the refusals left files: %v", ents)
	}
}

// A model whose weights are graph inputs (vgg16-small) gets them back
// as initializers that stay graph inputs (an input with a default, in
// ONNX terms): tsplit feeds them no random data any more, and ONNX
// Runtime, fed only the data and the labels, computes tsplit's loss.
func TestTrainedModelOfWeightInputs(t *testing.T) {
	ctx := context.Background()
	trained := filepath.Join(t.TempDir(), "trained.onnx")
	res, err := tsplit.RunFile(ctx, vgg16, tsplit.RunOptions{Batch: 2, Seed: seed, Train: &tsplit.TrainOptions{}, Output: trained})
	if err != nil {
		t.Fatal(err)
	}
	m, err := tsplit.Load(ctx, trained, tsplit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	inputs := map[string]bool{}
	for _, v := range m.Graph.Inputs {
		inputs[v.Name] = true
	}
	for _, fb := range res.Training.Feedback {
		v := m.Graph.Lookup(fb[1])
		if v == nil || v.Kind != ir.KindInit || !inputs[fb[1]] {
			t.Fatalf("%q is not an initializer that is a graph input", fb[1])
		}
		if d, err := v.Data(); err != nil || !bytes.Equal(d.Raw, outputData(res, fb[0])) {
			t.Errorf("trained %q is not the run's %q (%v)", fb[1], fb[0], err)
		}
	}
	on, err := tsplit.RunFile(ctx, trained, tsplit.RunOptions{Seed: seed})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := compiler.RandomInputs(m, seed)
	if err != nil {
		t.Fatal(err)
	}
	if len(raw) != 2 {
		t.Fatalf("random data for %d inputs, want the data and the labels only", len(raw))
	}
	if !oracle.ORTAvailable() {
		t.Log("ONNX Runtime oracle unavailable: the trained model is not checked with it")
		return
	}
	ortLoss(t, m, trained, on.Losses[0])
}

// A planned step's trained model is still the plan: it runs in the
// same pool with the same measured peak, and trains on as the unplanned
// step does.
func TestTrainedPlannedModel(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	planned, trained := filepath.Join(dir, "planned.onnx"), filepath.Join(dir, "trained.onnx")
	plan, err := tsplit.PlanFile(ctx, resnet18, tsplit.Options{Batch: 4, Budget: 1200 << 10, Output: planned})
	if err != nil {
		t.Fatal(err)
	}
	if plan.Peak >= plan.BasePeak {
		t.Fatalf("the plan does nothing (peak %d, base %d)", plan.Peak, plan.BasePeak)
	}
	first, err := tsplit.RunFile(ctx, planned, tsplit.RunOptions{Iters: 2, Seed: seed, Output: trained})
	if err != nil {
		t.Fatal(err)
	}
	on, err := tsplit.RunFile(ctx, trained, tsplit.RunOptions{Seed: seed})
	if err != nil {
		t.Fatal(err)
	}
	if on.Pool != first.Pool || on.Peak != first.Peak || on.Peak != plan.Peak {
		t.Errorf("trained model: pool %d, peak %d; the plan's run: pool %d, peak %d; planned peak %d", on.Pool, on.Peak, first.Pool, first.Peak, plan.Peak)
	}
	three, err := tsplit.RunFile(ctx, resnet18, tsplit.RunOptions{Batch: 4, Iters: 3, Seed: seed, Train: &tsplit.TrainOptions{}})
	if err != nil {
		t.Fatal(err)
	}
	// A plan that splits sums partial results in another order: close,
	// not always bit-equal.
	if math.Abs(on.Losses[0]-three.Losses[2]) > 1e-5*math.Abs(three.Losses[2]) {
		t.Errorf("loss from the trained planned model %v, the unplanned step's third %v", on.Losses[0], three.Losses[2])
	}
}
