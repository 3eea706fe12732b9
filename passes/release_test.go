package passes

import (
	"testing"

	"github.com/tsplit/tsplit/internal/plantest"
	"github.com/tsplit/tsplit/ir"
	. "github.com/tsplit/tsplit/ir/irtest"
)

// TestReleaseCountsToThePlannedOp: a swap's release window counts ops of
// the order it was planned on. A second swap whose SwapOut lands inside
// that window must not shorten it: the first copy is freed after the
// same op as planned, so its count grows by the ops inserted there.
// With Plan.ShortReleases the count is written as planned.
func TestReleaseCountsToThePlannedOp(t *testing.T) {
	build := func() (*ir.Model, *Plan) {
		b := New(t)
		x := b.Input("x", ir.Float, 64, 64)
		a := b.Op("Relu", V(x))                                    // 0
		c := b.Op("Sigmoid", V(a))                                 // 1: a's last use before the gap
		d := b.Op("Tanh", V(c))                                    // 2: c's last use before the gap
		e := b.Op("MatMul", V(d, plantest.Weight(b, "w", 64, 64))) // 3
		f := b.Op("Exp", V(e))                                     // 4
		g := b.Op("Neg", V(f))                                     // 5
		h := b.Op("Add", V(g, c))                                  // 6
		m := b.Return(b.Op("Add", V(h, a)))                        // 7
		plan := &Plan{Decisions: []*Decision{
			// a: SwapOut after op 1, freed after op 1+4 = 5 (Neg)
			{Value: a, Option: Swap, After: 1, Before: 7, Trigger: 6, Release: 4, At: 4, DeltaM: a.Bytes()},
			// c: SwapOut after op 2, inside a's window
			{Value: c, Option: Swap, After: 2, Before: 6, Trigger: 5, Release: 1, At: 4, DeltaM: c.Bytes()},
		}}
		return m, plan
	}
	for _, short := range []bool{false, true} {
		m, plan := build()
		plan.ShortReleases = short
		if err := InsertSwapRecompute(m, plan); err != nil {
			t.Fatal(err)
		}
		if err := ir.Verify(m); err != nil {
			t.Fatal(err)
		}
		order := m.Graph.Order()
		var so *ir.Op
		at := -1
		for i, op := range order {
			if op.Type == "SwapOut" && op.Input(0).Def != nil && op.Input(0).Def.Type == "Relu" {
				so, at = op, i
			}
		}
		if so == nil {
			t.Fatal("no SwapOut of the Relu's output")
		}
		rel := ir.SwapOutRelease(so)
		freed := order[at+rel]
		if short {
			// the count as planned: c's SwapOut inside the window takes
			// one of its four ops, so the copy goes one op early
			if rel != 4 || freed.Type != "Exp" {
				t.Errorf("short releases: release %d, freed after %s, want 4 and after Exp", rel, freed.Type)
			}
			continue
		}
		if freed.Type != "Neg" {
			t.Errorf("the copy is freed after %s %q (release %d), want after Neg, the op the planner counted to", freed.Type, freed.Name, rel)
		}
	}
}
