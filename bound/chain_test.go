package bound

import (
	"testing"

	"github.com/tsplit/tsplit/ir"
	"github.com/tsplit/tsplit/ir/irtest"
	"github.com/tsplit/tsplit/memory"
	"github.com/tsplit/tsplit/passes"
	"github.com/tsplit/tsplit/profile"
)

// TestChainSwapMovesItsInput: v = Relu(x), x = Exp(in), and v is off at
// the step's one over-budget position. Every column that frees v there
// either clones both Exp and Relu or moves v's bytes to the host before
// that position: a chain that recomputes v from a swapped-in x must
// first have swapped x out (x is dead by then and has no gap of its
// own). Before, that column cost Relu alone and moved nothing to the
// host.
func TestChainSwapMovesItsInput(t *testing.T) {
	const n = 1 << 20 // 4 MiB per tensor
	b := irtest.New(t)
	in := b.Input("in", ir.Float, n)
	in2 := b.Input("in2", ir.Float, n)
	s := b.Input("s", ir.Float, 1)
	x := b.Op("Exp", irtest.V(in))
	v := b.Op("Relu", irtest.V(x))
	a := b.Op("Sin", irtest.V(in2))
	c := b.Op("Cos", irtest.V(a)) // the peak: v, a and c
	for range 40 {                // time for v's restore, on a scalar
		s = b.Op("Sin", irtest.V(s))
	}
	out := b.Op("Add", irtest.V(b.Op("Add", irtest.V(v, c)), s))
	m := b.Return(out)
	prof, err := profile.Lookup("titan-rtx")
	if err != nil {
		t.Fatal(err)
	}
	mem, err := memory.Analyze(m.Graph, memory.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tl := passes.Simulate(m.Graph, mem, prof)
	budget := mem.Peak - int64(n)*4/2 // v must be off at the peak
	md, err := build(m.Graph, mem, tl, prof, budget)
	if err != nil {
		t.Fatal(err)
	}
	rows := md.pickRows(20)
	f := newOptions(md, rows, len(rows), 5, md.gapClasses(rows))
	pos := m.Graph.Position()
	relu, exp := md.dur[pos[v.Def.ID]], md.dur[pos[x.Def.ID]]
	vb := float64(mem.Intervals[mem.ByValue[v.ID]].Bytes)
	peak := -1
	for r, p := range rows {
		if m.Graph.Order()[p] == c.Def {
			peak = r
		}
	}
	if peak < 0 {
		t.Fatalf("no memory row at %s: rows %v", c.Def.Describe(), rows)
	}
	var chains, seen int
	for _, o := range f.options {
		cl := f.classes[o.class]
		if md.gaps[cl.gaps[0]].v != v || o.lo > peak || o.hi < peak || o.saveAt(peak) < vb {
			continue
		}
		seen++
		if o.cost > 0 && o.toDev > 0 {
			chains++
		}
		if o.cost < relu+exp-1e-12 && o.toHost < float64(v.Bytes()) {
			t.Errorf("a column frees v at the peak for %.3g s (Relu %.3g s, Exp %.3g s) moving %.0f bytes to the host (want %d): %+v", o.cost, relu, exp, o.toHost, v.Bytes(), o)
		}
		if o.toHost > 0 && (o.deadline > peak || o.keepTo > peak) {
			t.Errorf("a column frees v at the peak with a swap-out due after it: %+v", o)
		}
	}
	if seen == 0 || chains == 0 {
		t.Fatalf("%d columns free v at the peak, %d of them chains that swap x in", seen, chains)
	}
}
