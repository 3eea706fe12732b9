package policy

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/tsplit/tsplit/backend"
	"github.com/tsplit/tsplit/internal/oracle"
	"github.com/tsplit/tsplit/internal/plantest"
	"github.com/tsplit/tsplit/ir"
	. "github.com/tsplit/tsplit/ir/irtest"
	"github.com/tsplit/tsplit/memory"
	"github.com/tsplit/tsplit/passes"
	"github.com/tsplit/tsplit/profile"
)

// outputStep is a step whose only tensor that can leave the device at
// its peak is a graph output nothing reads: o = Neg(x), made first (as
// an updated weight is, early in the backward pass), then the peak
// Concat of a = Exp(x), which reads a and so cannot evict it.
func outputStep(t *testing.T) (*ir.Model, *ir.Value) {
	t.Helper()
	b := New(t)
	x := b.Input("x", ir.Float, 1024)
	o := b.Op("Neg", V(x))
	a := b.Op("Exp", V(x))
	c := b.Op("Concat", V(a, a, a, a), Int("axis", 0))
	r := b.Op("ReduceSum", V(c), Int("keepdims", 0))
	return b.Return(r, o), o
}

// With passes.Options.OutputSwaps the planner swaps the output o over
// the rest of the step, restored by its end (Decision.Before = n); the
// rewrite makes the restored copy the graph output under o's name, and
// the planned step fits the budget with the memory model's peak and the
// unplanned step's outputs, bit for bit. Without the option there is
// nothing to evict.
func TestOutputSwappedToTheEnd(t *testing.T) {
	p, err := profile.Lookup("titan-rtx")
	if err != nil {
		t.Fatal(err)
	}
	base, _ := outputStep(t)
	in := plantest.Inputs(t, base)
	want := plantest.RunUnplanned(t, base, in)
	for _, on := range []bool{false, true} {
		m, o := outputStep(t)
		g := m.Graph
		mem, err := memory.Analyze(g, memory.Options{})
		if err != nil {
			t.Fatal(err)
		}
		budget := mem.Peak - 1
		pl := newPlanner(g, mem, passes.Simulate(g, mem, p), p, budget)
		pl.outputSwaps = on
		plan, err := pl.Run()
		if !on {
			if err == nil {
				t.Fatalf("without output swaps: a plan at %d bytes (%d decisions); only o can leave", budget, len(plan.Decisions))
			}
			continue
		}
		if err != nil {
			t.Fatalf("with output swaps: %v", err)
		}
		if len(plan.Decisions) != 1 || plan.Decisions[0].Value != o || plan.Decisions[0].Option != passes.Swap || plan.Decisions[0].Before != len(g.Order()) {
			t.Fatalf("decisions %+v, want one swap of %q to the step's end (%d)", plan.Decisions, o.Name, len(g.Order()))
		}
		name := o.Name
		if err := passes.InsertSwapRecompute(m, plan); err != nil {
			t.Fatal(err)
		}
		if err := ir.Verify(m); err != nil {
			t.Fatal(err)
		}
		out := g.Outputs[1]
		if out.Name != name || out.Def == nil || ir.CopyOf(out.Def) != ir.ToDevice {
			t.Fatalf("graph output %q made by %v, want %q restored by a SwapIn", out.Name, out.Def, name)
		}
		peak := plantest.Peak(t, m)
		if peak > budget {
			t.Errorf("planned peak %d over the budget %d", peak, budget)
		}
		got := plantest.RunUnplanned(t, m, in)
		if got.HighWater != peak {
			t.Errorf("measured high-water %d, memory model %d", got.HighWater, peak)
		}
		for k, v := range want.Outputs {
			if !bytes.Equal(v, got.Outputs[k]) {
				t.Errorf("output %q differs from the unplanned step's", k)
			}
		}
		// ONNX Runtime runs the planned file to the unplanned file's
		// outputs.
		dir := t.TempDir()
		x := g.Inputs[0]
		feeds := map[string]*oracle.Tensor{x.Name: {Type: accTensorTypes[x.DType], Dims: x.Shape.Clone(), Data: in[x.Name]}}
		ort := map[string]map[string]*oracle.Tensor{}
		for name, mm := range map[string]*ir.Model{"base": base, "planned": m} {
			path := filepath.Join(dir, name+".onnx")
			if err := backend.WriteFile(mm, path); err != nil {
				t.Fatal(err)
			}
			ort[name] = oracle.ORTRun(t, path, feeds, true)
		}
		for k, v := range ort["base"] {
			if o := ort["planned"][k]; o == nil || !bytes.Equal(v.Data, o.Data) {
				t.Errorf("ONNX Runtime: output %q of the planned file differs from the unplanned one's", k)
			}
		}
	}
}
