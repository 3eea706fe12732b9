package passes

import (
	"bytes"
	"path/filepath"
	"slices"
	"testing"

	"github.com/tsplit/tsplit/backend"
	"github.com/tsplit/tsplit/internal/oracle"
	"github.com/tsplit/tsplit/internal/plantest"
	"github.com/tsplit/tsplit/ir"
	. "github.com/tsplit/tsplit/ir/irtest"
)

// bnStep is the SGD training step of Conv → BatchNormalization (training
// mode) → y·y, whose backward pass reads the normalised y: the tensor a
// policy recomputes. It returns the step and the decision recomputing y
// just before its first backward reader.
func bnStep(t *testing.T) (*ir.Model, *Plan) {
	b := New(t)
	x := b.Input("x", ir.Float, 4, 3, 6, 6)
	c := b.Op("Conv", V(x, plantest.Weight(b, "w", 5, 3, 3, 3)), Ints("pads", 1, 1, 1, 1))
	stat := func(name string, v float64) *ir.Value {
		vals := make([]float64, 5)
		for i := range vals {
			vals[i] = v + float64(i)/10
		}
		return b.Init(name, ir.TensorFromFloat64s(ir.Float, ir.Shape{5}, vals))
	}
	outs := b.OpN("BatchNormalization", 3, V(c, stat("scale", 1), stat("bias", 0), stat("running_mean", 0.5), stat("running_var", 2)),
		Int("training_mode", 1), Float("momentum", 0.8))
	y := outs[0]
	sq := b.Op("Mul", V(y, y))
	m := b.Return(b.Op("ReduceMean", V(sq), Int("keepdims", 0)), outs[1], outs[2])
	m = plantest.Train(t, m)
	pos := m.Graph.Position()
	a, q := -1, -1
	for _, u := range y.Uses() {
		p := pos[u.Op.ID]
		if u.Op.Phase == ir.Forward {
			a = max(a, p)
		} else if q < 0 || p < q {
			q = p
		}
	}
	if a < 0 || q < 0 {
		t.Fatalf("y has forward readers up to %d and backward readers from %d", a, q)
	}
	return m, &Plan{Decisions: []*Decision{{Value: y, Option: Recompute, After: a, Before: q, At: q - 1, DeltaM: y.Bytes()}}}
}

// TestRecomputedBatchNormUpdatesOnce recomputes a training-mode
// BatchNormalization and checks that the planned step means what the
// unplanned one means, on tsplit's runtime and in ONNX Runtime: the
// running statistics are updated once. The clone keeps the outputs
// training mode requires, with momentum 1 (cloneAttrs): ONNX Runtime
// writes them into the buffers of the statistics it reads, which the
// original node has already updated, and with the model's momentum the
// update was applied twice (issue 12 item 2).
func TestRecomputedBatchNormUpdatesOnce(t *testing.T) {
	base, _ := bnStep(t)
	m, plan := bnStep(t)
	if err := InsertSwapRecompute(m, plan); err != nil {
		t.Fatal(err)
	}
	if err := ir.Verify(m); err != nil {
		t.Fatal(err)
	}
	var clone, orig *ir.Op
	for _, op := range m.Graph.Order() {
		if op.Type == "BatchNormalization" {
			if op.Origin == "recompute" {
				clone = op
			} else {
				orig = op
			}
		}
	}
	if clone == nil || orig == nil {
		t.Fatal("the plan did not recompute the BatchNormalization")
	}
	if got := clone.AttrFloat("momentum", 0); got != 1 {
		t.Errorf("the clone's momentum is %v, want 1", got)
	}
	if got := orig.AttrFloat("momentum", 0); got != 0.8 {
		t.Errorf("the original's momentum is %v, want the model's 0.8", got)
	}
	for i, v := range clone.Outputs()[1:] {
		if v == nil || v.NumUses() > 0 || slices.Contains(m.Graph.Outputs, v) {
			t.Errorf("the clone's running statistic %d is absent or read", i+1)
		}
	}

	in := plantest.Inputs(t, base)
	want := plantest.RunUnplanned(t, base, in)
	got := plantest.RunUnplanned(t, m, in)
	for name, w := range want.Outputs {
		if !bytes.Equal(got.Outputs[name], w) {
			t.Errorf("tsplit's runtime: output %q differs between the planned and the unplanned step", name)
		}
	}

	dir := t.TempDir()
	basePath, planPath := filepath.Join(dir, "train.onnx"), filepath.Join(dir, "planned.onnx")
	if err := backend.WriteFile(base, basePath); err != nil {
		t.Fatal(err)
	}
	if err := backend.WriteFile(m, planPath); err != nil {
		t.Fatal(err)
	}
	feeds := map[string]*oracle.Tensor{}
	for _, v := range base.Graph.Inputs {
		if data, ok := in[v.Name]; ok {
			feeds[v.Name] = &oracle.Tensor{Type: "float32", Dims: v.Shape.Clone(), Data: data}
		}
	}
	ortWant := oracle.ORTRun(t, basePath, feeds, true)
	ortGot := oracle.ORTRun(t, planPath, feeds, true)
	for _, v := range base.Graph.Outputs {
		w, g := ortWant[v.Name], ortGot[v.Name]
		if w == nil || g == nil {
			t.Errorf("ONNX Runtime: output %q missing", v.Name)
			continue
		}
		if !bytes.Equal(w.Data, g.Data) {
			t.Errorf("ONNX Runtime: output %q differs between the planned and the unplanned step", v.Name)
		}
	}
}
