package policy

import (
	"math"
	"testing"

	"github.com/tsplit/tsplit/ir"
	. "github.com/tsplit/tsplit/ir/irtest"
	"github.com/tsplit/tsplit/memory"
	"github.com/tsplit/tsplit/passes"
	"github.com/tsplit/tsplit/profile"
)

// A round that swapped the graph input at an earlier bottleneck cannot
// recompute, at a later one, an activation whose chain reads that input
// (the rewrite restores the input for its own use only): VGG-16 b320 at
// 60 % of its peak swapped its first ReLU's 3.9 GB output for a 1.65 s
// stall instead of recomputing it for 19 ms. The chain is priced as if
// the swap were not made (deferRatio), so that Run can end the round
// there and leave the choice to the next round, which reads the input
// again.
func TestBlockedChainIsPriced(t *testing.T) {
	b := New(t)
	x := b.Input("x", ir.Float, 64)
	a := b.Op("Exp", V(x))
	v := b.Op("Relu", V(a))
	f := b.Op("Tanh", V(v))
	l := b.Op("Neg", V(f))
	r := b.Op("Concat", V(v, x), Int("axis", 0))
	m := b.Return(l, r)
	l.Def.Phase, r.Def.Phase = ir.Loss, ir.Backward
	p, err := profile.Lookup("titan-rtx")
	if err != nil {
		t.Fatal(err)
	}
	mem, err := memory.Analyze(m.Graph, memory.Options{})
	if err != nil {
		t.Fatal(err)
	}
	pos := m.Graph.Position()
	at, q, i := pos[f.Def.ID], pos[r.Def.ID], pos[l.Def.ID]
	size := mem.Intervals[mem.ByValue[v.ID]].Bytes
	for _, mayDefer := range []bool{false, true} {
		pl := newPlanner(m.Graph, mem, passes.Simulate(m.Graph, mem, p), p, 2*mem.Peak)
		if _, ok := pl.recomputeCandidate(v, size, at, q, i); !ok {
			t.Fatalf("no chain for %s with nothing decided", v.Name)
		}
		pl.decided[x.ID] = true // swapped at an earlier bottleneck
		pl.mayDefer, pl.deferRatio = mayDefer, math.Inf(1)
		if _, ok := pl.recomputeCandidate(v, size, at, q, i); ok {
			t.Fatalf("chain of %s reads the input this round swapped", v.Name)
		}
		if priced := !math.IsInf(pl.deferRatio, 1); priced != mayDefer {
			t.Errorf("mayDefer %v: blocked chain priced %v (ratio %g)", mayDefer, priced, pl.deferRatio)
		}
		if pl.ignoreDecided {
			t.Error("ignoreDecided left set")
		}
	}
}
