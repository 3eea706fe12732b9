package policy

import (
	"testing"

	"github.com/tsplit/tsplit/ir"
	. "github.com/tsplit/tsplit/ir/irtest"
	"github.com/tsplit/tsplit/memory"
	"github.com/tsplit/tsplit/passes"
	"github.com/tsplit/tsplit/profile"
)

// chainStep is the step the chain tests plan: v = Relu(Exp(x)), read
// by the forward Tanh f and, after the loss l, by the backward Concat
// r, which also reads x (the chain of v keeps nothing extra) and makes
// four times v. at is f's position (v's last forward use), i the
// bottleneck l, q the reader r.
type chainStep struct {
	m        *ir.Model
	x, v, r  *ir.Value
	p        *profile.Profile
	mem      *memory.Model
	at, q, i int
}

func newChainStep(t *testing.T) chainStep {
	t.Helper()
	b := New(t)
	x := b.Input("x", ir.Float, 64)
	a := b.Op("Exp", V(x))
	v := b.Op("Relu", V(a))
	f := b.Op("Tanh", V(v))
	l := b.Op("Neg", V(f))
	r := b.Op("Concat", V(v, v, v, x), Int("axis", 0))
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
	s := chainStep{m: m, x: x, v: v, r: r, p: p, mem: mem, at: pos[f.Def.ID], q: pos[r.Def.ID], i: pos[l.Def.ID]}
	if !(s.at < s.i && s.i < s.q) {
		t.Fatalf("positions: last forward use %d, bottleneck %d, reader %d", s.at, s.i, s.q)
	}
	return s
}

// planner is a planner of the step at budget.
func (s *chainStep) planner(budget int64) *planner {
	return newPlanner(s.m.Graph, s.mem, passes.Simulate(s.m.Graph, s.mem, s.p), s.p, budget)
}

// A recompute chain's clones run before their reader, so with
// passes.Options.ChainFit (chainFit) the planner fits them against what
// is live before the reader allocates its output; without, against
// everything live while the reader runs, its output included (the
// weight gradient's Transpose of VGG's first activation, 4 GB, at
// 60 % of VGG-19 b301's peak). At a budget between the two the chain
// of v (Exp then Relu, recomputed from the input for the reader r,
// whose output is four times v) fits only with chainFit.
func TestChainFitBeforeReader(t *testing.T) {
	s := newChainStep(t)
	v, mem, q := s.v, s.mem, s.q
	size := mem.Intervals[mem.ByValue[v.ID]].Bytes
	made := mem.Intervals[mem.ByValue[s.r.ID]].Bytes
	for _, fit := range []bool{false, true} {
		pl := s.planner(0)
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
		dm, ok := pl.chainSaving(&ch, size, s.at, q, s.i)
		if ok != fit || ok && dm != size {
			t.Errorf("chainFit %v: chain fits %v (saving %d of %d bytes), want %v", fit, ok, dm, size, fit)
		}
	}
}
