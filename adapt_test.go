package tsplit_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"testing"

	"github.com/tsplit/tsplit"
	"github.com/tsplit/tsplit/compiler"
	"github.com/tsplit/tsplit/internal/oracle"
	"github.com/tsplit/tsplit/internal/plantest"
	"github.com/tsplit/tsplit/ir"
	"github.com/tsplit/tsplit/passes"
	"github.com/tsplit/tsplit/profile"
)

// A run with Adapt moves the triggers of the swap-ins that stalled on a
// slow emulated link: every iteration holds exactly the memory model's
// peak of the order it ran, within the budget; the losses and outputs
// are the unplanned step's; the adapted plan written with Output is a
// plan tsplit runs within its budget and that ONNX Runtime runs with
// the same results.
func TestRunAdapt(t *testing.T) {
	ctx := context.Background()
	const model, batch, iters = "testdata/onnx/resnet18-small.onnx", 16, 4
	p, err := tsplit.PlanFile(ctx, model, tsplit.Options{Batch: batch, Budget: 2 << 20, Policy: "tflms"})
	if err != nil {
		t.Fatal(err)
	}
	m := p.Model
	// A link slow enough that TFLMS's swap-ins, started a few ops
	// before their use, make their readers wait.
	var r passes.Report
	if err := json.Unmarshal([]byte(m.Meta[passes.PlanKey]), &r); err != nil {
		t.Fatal(err)
	}
	r.Link = &profile.Emulation{Of: "test", Ratio: 1, H2D: 50e6, D2H: 50e6}
	js, _ := json.Marshal(r)
	m.Meta[passes.PlanKey] = string(js)
	layout := m.Meta["tsplit.layout"]

	out := filepath.Join(t.TempDir(), "adapted.onnx")
	res, err := tsplit.Run(ctx, m, tsplit.RunOptions{Iters: iters, Adapt: true, Output: out})
	if err != nil {
		t.Fatal(err)
	}
	if m.Meta["tsplit.layout"] != layout {
		t.Error("Run changed the model it was given")
	}
	if len(res.Adapted) != iters {
		t.Fatalf("%d adapted iterations, want %d", len(res.Adapted), iters)
	}
	moved := 0
	for _, it := range res.Adapted {
		if it.Peak != it.ModelPeak || it.Peak > r.Budget || it.Pool > r.Budget || it.Budget != r.Budget {
			t.Errorf("iteration %d: measured peak %d, memory model %d, pool %d, budget %d (plan's %d)", it.Iter, it.Peak, it.ModelPeak, it.Pool, it.Budget, r.Budget)
		}
		moved += it.Moved
	}
	if moved == 0 {
		t.Errorf("no trigger moved on a 50 MB/s link: %+v", res.Adapted)
	}
	if last := res.Adapted[iters-1]; res.Peak != last.Peak || res.Plan.Peak != last.ModelPeak || res.Need != last.Pool {
		t.Errorf("the result's peak %d, planned %d, need %d; the last iteration's %+v", res.Peak, res.Plan.Peak, res.Need, last)
	}

	base, err := tsplit.RunFile(ctx, model, tsplit.RunOptions{Batch: batch, Train: &tsplit.TrainOptions{}, Iters: iters})
	if err != nil {
		t.Fatal(err)
	}
	for i := range base.Losses {
		if res.Losses[i] != base.Losses[i] {
			t.Errorf("loss %d: %v adapted, %v unplanned", i, res.Losses[i], base.Losses[i])
		}
	}
	want := map[string][]byte{}
	for _, o := range base.Outputs {
		want[o.Name] = o.Data
	}
	for _, o := range res.Outputs {
		if err := plantest.SameOutput(m.Graph, o.Name, o.Data, want[o.Name], 0); err != nil {
			t.Error(err)
		}
	}

	// The adapted plan: the order and layout of the last iteration.
	a, err := tsplit.Load(ctx, out, tsplit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if a.Meta["tsplit.layout"] == layout && moved > 0 {
		t.Error("the adapted plan carries the original layout")
	}
	inputs, err := compiler.RandomInputs(a, 7)
	if err != nil {
		t.Fatal(err)
	}
	again, err := tsplit.Run(ctx, a, tsplit.RunOptions{Inputs: inputs})
	if err != nil {
		t.Fatal(err)
	}
	if again.Peak != again.Plan.Peak || again.Peak > r.Budget || again.Plan.Budget != r.Budget {
		t.Errorf("the adapted plan: measured peak %d, planned %d, budget %d", again.Peak, again.Plan.Peak, again.Plan.Budget)
	}
	if !oracle.ORTAvailable() {
		return // the rest needs ONNX Runtime
	}
	feeds := map[string]*oracle.Tensor{}
	for _, v := range a.Graph.Inputs {
		if data, ok := inputs[v.Name]; ok && v.Kind != ir.KindInit {
			feeds[v.Name] = &oracle.Tensor{Type: ortType(t, v.DType), Dims: v.Shape.Clone(), Data: data}
		}
	}
	ort := oracle.ORTRun(t, out, feeds, true)
	for _, o := range again.Outputs {
		x, ok := ort[o.Name]
		if !ok {
			t.Errorf("ONNX Runtime gave no %q", o.Name)
			continue
		}
		if err := plantest.SameOutput(a.Graph, o.Name, o.Data, x.Data, 1e-4); err != nil {
			t.Errorf("ONNX Runtime against tsplit on the adapted plan: %v", err)
		}
	}
}

// ortType names an element type as the oracle's tensor files do.
func ortType(t *testing.T, d ir.DType) string {
	switch d {
	case ir.Float:
		return "float32"
	case ir.Int64:
		return "int64"
	case ir.Int32:
		return "int32"
	}
	t.Fatalf("no oracle type for %v", d)
	return ""
}

// Adapt needs a planned ONNX model.
func TestRunAdaptRefused(t *testing.T) {
	_, err := tsplit.RunFile(context.Background(), "testdata/onnx/resnet18-small.onnx",
		tsplit.RunOptions{Batch: 2, Train: &tsplit.TrainOptions{}, Adapt: true})
	var ue *tsplit.UsageError
	if !errors.As(err, &ue) || ue.Option != "Adapt" {
		t.Errorf("adapting an unplanned model: %v", err)
	}
}
