package policy

import (
	"testing"

	"github.com/tsplit/tsplit/ir"
	. "github.com/tsplit/tsplit/ir/irtest"
	"github.com/tsplit/tsplit/memory"
	"github.com/tsplit/tsplit/passes"
	"github.com/tsplit/tsplit/profile"
)

// A recompute chain's clones run before their reader, so with
// passes.Options.ChainFit (chainFit) the planner fits them against what
// is live before the reader allocates its output; without, against
// everything live while the reader runs, its output included (the
// weight gradient's Transpose of VGG's first activation, 4 GB, at
// 60 % of VGG-19 b301's peak). At a budget between the two the chain
// of b (Exp then Relu, recomputed from the input for the reader r,
// whose output is four times b) fits only with chainFit.
func TestChainFitBeforeReader(t *testing.T) {
	b := New(t)
	x := b.Input("x", ir.Float, 64)
	a := b.Op("Exp", V(x))
	v := b.Op("Relu", V(a))
	f := b.Op("Tanh", V(v))
	l := b.Op("Neg", V(f))
	r := b.Op("Concat", V(v, v, v, x), Int("axis", 0)) // reads x: the chain keeps nothing extra
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
	if !(at < i && i < q) {
		t.Fatalf("positions: last forward use %d, bottleneck %d, reader %d", at, i, q)
	}
	size := mem.Intervals[mem.ByValue[v.ID]].Bytes
	made := mem.Intervals[mem.ByValue[r.ID]].Bytes
	for _, fit := range []bool{false, true} {
		pl := newPlanner(m.Graph, mem, passes.Simulate(m.Graph, mem, p), p, 0)
		pl.chainFit = fit
		ch, ok := pl.recomputeChain(v, q)
		if !ok || len(ch.ops) != 2 || ch.extra <= 0 {
			t.Fatalf("chain of %s: %d ops, transient %d bytes, ok %v; want Exp and Relu with a transient", v.Name, len(ch.ops), ch.extra, ok)
		}
		// What is live with the clones, with and without the reader's
		// output: the budget lies between.
		pl.Budget = mem.Live[q] + ch.extra - made
		if pl.Budget >= mem.Live[q]+ch.extra {
			t.Fatal("the reader makes nothing")
		}
		dm, ok := pl.chainSaving(&ch, size, at, q, i)
		if ok != fit || ok && dm != size {
			t.Errorf("chainFit %v: chain fits %v (saving %d of %d bytes), want %v", fit, ok, dm, size, fit)
		}
	}
}
