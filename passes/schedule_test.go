package passes

import (
	"errors"
	"testing"

	"github.com/tsplit/tsplit/ir"
	. "github.com/tsplit/tsplit/ir/irtest"
)

func TestScheduleDepthFirst(t *testing.T) {
	b := New(t)
	x := b.Input("x", ir.Float, 4)
	a := b.Op("Relu", V(x))
	bb := b.Op("Relu", V(a))
	d := b.Op("Tanh", V(a))
	c := b.Op("Relu", V(bb))
	e := b.Op("Tanh", V(d))
	z := b.Op("ConstantOfShape", V(b.Ints("shape", 4)), ir.Attr{Name: "value", Type: ir.AttrTensor, Tensor: ir.TensorFromFloat64s(ir.Float, ir.Shape{1}, []float64{1})})
	f := b.Op("Sum", V(c, e, z))
	m := b.Return(f)
	// Breadth-first input order: a b d c e z f. Depth-first: a b c d e, then z just before f.
	s := NewState(m, nil)
	s.Check = true
	if err := s.Run(Schedule); err != nil {
		t.Fatal(err)
	}
	want := []*ir.Value{a, bb, c, d, e, z, f}
	for i, op := range m.Graph.Order() {
		if op.Output(0) != want[i] {
			t.Fatalf("position %d: %s, want %s", i, op.Describe(), want[i].Def.Describe())
		}
	}
}

// ALAPOrder sinks a hoisted backward op (one that reads only forward
// values, like a ReLU mask) from its depth-first place next to its input
// to just before its consumer; the other ops keep their depth-first
// order, and each of the orders is topological.
func TestALAPSinksHoistedBackwardOps(t *testing.T) {
	b := New(t)
	x := b.Input("x", ir.Float, 4)
	a := b.Op("Relu", V(x))
	mask := b.Op("Sigmoid", V(a)) // built next to a: depth-first keeps it there
	h := b.Op("Relu", V(a))
	y := b.Op("Tanh", V(h))
	g1 := b.Op("Neg", V(y))
	g2 := b.Op("Mul", V(g1, mask))
	m := b.Return(g2)
	for _, v := range []*ir.Value{mask, g1, g2} {
		v.Def.Phase = ir.Backward
	}
	name := func(ops []*ir.Op) []*ir.Value {
		var out []*ir.Value
		for _, op := range ops {
			out = append(out, op.Output(0))
		}
		return out
	}
	for _, c := range []struct {
		o    OpOrder
		want []*ir.Value
	}{
		{OrderDFS, []*ir.Value{a, mask, h, y, g1, g2}},
		{OrderALAP, []*ir.Value{a, h, y, g1, mask, g2}},
		{OrderAsBuilt, []*ir.Value{a, mask, h, y, g1, g2}},
	} {
		order, err := OrderOf(m.Graph, c.o)
		if err != nil {
			t.Fatalf("%s: %v", c.o, err)
		}
		if err := checkTopological(m.Graph, order); err != nil {
			t.Errorf("%s: %v", c.o, err)
		}
		got := name(order)
		for i := range c.want {
			if got[i] != c.want[i] {
				t.Errorf("%s: position %d is %s, want %s", c.o, i, got[i].Name, c.want[i].Name)
			}
		}
	}
	if _, err := ParseOrder("bfs"); err == nil {
		t.Error("ParseOrder accepted an unknown order")
	}
}

// lossStep starts a tiny training step: x → Relu a → Tanh y → the loss
// l (Neg) → its gradient dy (Sigmoid, backward).
func lossStep(t *testing.T) (b *B, x, a, y, l, dy *ir.Value) {
	b = New(t)
	x = b.Input("x", ir.Float, 4)
	a = b.Op("Relu", V(x))
	y = b.Op("Tanh", V(a))
	l = b.Op("Neg", V(y))
	dy = b.Op("Sigmoid", V(l))
	l.Def.Phase, dy.Def.Phase = ir.Loss, ir.Backward
	return b, x, a, y, l, dy
}

// GradFirstOrder walks an output gradient's shortest branch first (the
// weight gradient w1 before the data gradient da) and runs the first
// layer's weight gradient wx, which reads a root of the walk (xt, from
// the graph input only), right after the gradient dx it also reads,
// which it frees; ALAPOrder keeps the order the step was built in
// there and runs wx last.
func TestGradFirstOrder(t *testing.T) {
	b, x, a, y, l, dy := lossStep(t)
	da := b.Op("Mul", V(dy, dy))
	dx := b.Op("Neg", V(da))
	dx2 := b.Op("Abs", V(da))
	dx3 := b.Op("Neg", V(dx2))
	w1 := b.Op("Exp", V(dy))
	xt := b.Op("Abs", V(x))
	wx := b.Op("Mul", V(xt, dx))
	m := b.Return(dx3, w1, wx)
	for _, v := range []*ir.Value{da, dx, dx2, dx3, w1, xt, wx} {
		v.Def.Phase = ir.Backward
	}
	for _, c := range []struct {
		o    OpOrder
		want []*ir.Value
	}{
		{OrderALAP, []*ir.Value{a, y, l, dy, da, dx, dx2, dx3, w1, xt, wx}},
		{OrderGradFirst, []*ir.Value{a, y, l, dy, w1, da, dx, xt, wx, dx2, dx3}},
	} {
		order, err := OrderOf(m.Graph, c.o)
		if err != nil {
			t.Fatalf("%s: %v", c.o, err)
		}
		if err := checkTopological(m.Graph, order); err != nil {
			t.Errorf("%s: %v", c.o, err)
		}
		if len(order) != len(c.want) {
			t.Fatalf("%s: %d ops, want %d", c.o, len(order), len(c.want))
		}
		for i, op := range order {
			if op.Output(0) != c.want[i] {
				t.Errorf("%s: position %d is %s, want %s", c.o, i, op.Output(0).Name, c.want[i].Name)
			}
		}
	}
	if o, err := ParseOrder("grad-first"); err != nil || o != OrderGradFirst {
		t.Errorf("ParseOrder(grad-first) = %q, %v", o, err)
	}
}

// ShrinkEarlyOrder raises a hoisted op that makes less than it frees (a
// ReLU's one-byte mask of a four-byte activation a, which the forward
// pass reads only in p) to just after p, so that a is freed there and
// the mask is live instead until its consumer; a hoisted op whose
// output is as large as what it reads (pt, of p) stays sunk before its
// consumer, as in grad-first, and so does everything else.
func TestShrinkEarlyOrder(t *testing.T) {
	b, zero, a, p, y, l, dy := shrinkStep(t, 4)
	pt := b.Op("Abs", V(p))
	g1 := b.Op("Mul", V(dy, pt))
	mask := b.Op("Greater", V(a, zero))
	g2 := b.Op("Where", V(mask, g1, zero))
	m := b.Return(g2)
	l.Def.Phase = ir.Loss
	for _, v := range []*ir.Value{dy, pt, g1, mask, g2} {
		v.Def.Phase = ir.Backward
	}
	outputs := func(ops []*ir.Op) []*ir.Value {
		var out []*ir.Value
		for _, op := range ops {
			if len(op.Inputs()) > 0 {
				out = append(out, op.Output(0))
			}
		}
		return out
	}
	gf, err := OrderOf(m.Graph, OrderGradFirst)
	if err != nil {
		t.Fatal(err)
	}
	order, moved, err := ShrinkEarlyOrder(m.Graph)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkTopological(m.Graph, order); err != nil {
		t.Error(err)
	}
	for _, c := range []struct {
		o    OpOrder
		got  []*ir.Value
		want []*ir.Value
	}{
		{OrderGradFirst, outputs(gf), []*ir.Value{a, p, y, l, dy, pt, g1, mask, g2}},
		{OrderShrinkEarly, outputs(order), []*ir.Value{a, p, mask, y, l, dy, pt, g1, g2}},
	} {
		if len(c.got) != len(c.want) {
			t.Fatalf("%s: %d ops, want %d", c.o, len(c.got), len(c.want))
		}
		for i := range c.want {
			if c.got[i] != c.want[i] {
				t.Errorf("%s: position %d is %s, want %s", c.o, i, c.got[i].Name, c.want[i].Name)
			}
		}
	}
	if !moved {
		t.Error("ShrinkEarlyOrder moved nothing")
	}
	// Without the mask there is nothing to raise: the same order as
	// grad-first, which Reorder reports.
	if _, moved, err := ShrinkEarlyOrder(lossStepGraph(t)); err != nil || moved {
		t.Errorf("ShrinkEarlyOrder of a step without a shrinking op: moved %v, %v", moved, err)
	}
}

// Where the last other reader of what a shrinking op frees is a hoisted
// op sunk behind a producer only their consumer reads, raiseShrinking
// runs that hoisted op first and the shrinking op right after it: the
// first layer of VGG in grad-first's order, where the weight gradient
// wg reads the Transpose t1 of the output gradient dy and the
// Transpose t2 of the activation a, whose mask the data gradient's ReLU
// step g reads. Raised behind t1, the mask would run where a, dy, t1
// and t2 are all live, more than anywhere before it; behind t2 run
// first, a is freed before t1 is made.
func TestShrinkEarlyRunsTheOtherReaderFirst(t *testing.T) {
	b, zero, a, p, y, l, dy := shrinkStep(t, 2, 16)
	t1 := b.Op("Transpose", V(dy))
	t2 := b.Op("Neg", V(a))
	wg := b.Op("MatMul", V(t2, t1))
	dx := b.Op("Exp", V(dy))
	mask := b.Op("Greater", V(a, zero))
	g := b.Op("Where", V(mask, dx, zero))
	m := b.Return(wg, g)
	l.Def.Phase = ir.Loss
	for _, v := range []*ir.Value{dy, t1, t2, wg, dx, mask, g} {
		v.Def.Phase = ir.Backward
	}
	n := m.Graph.NumOpIDs()
	hoisted := make([]bool, n)
	hoisted[t2.Def.ID], hoisted[mask.Def.ID] = true, true
	var order []*ir.Op
	for _, v := range []*ir.Value{a, p, y, l, dy, t1, t2, wg, dx, mask, g} {
		order = append(order, v.Def)
	}
	got, moved := raiseShrinking(order, hoisted, n)
	if err := checkTopological(m.Graph, got); err != nil {
		t.Fatal(err)
	}
	want := []*ir.Value{a, p, y, l, dy, t2, mask, t1, wg, dx, g}
	for i := range want {
		if got[i].Output(0) != want[i] {
			t.Errorf("position %d is %s, want %s", i, got[i].Output(0).Name, want[i].Name)
		}
	}
	if !moved {
		t.Error("raiseShrinking moved nothing")
	}
}

// shrinkStep is the forward chain a → p → y, the loss l and its
// gradient dy (phases not set) over an input of dims, with a zero
// constant for masks: the shrink-early tests' common start.
func shrinkStep(t *testing.T, dims ...int64) (b *B, zero, a, p, y, l, dy *ir.Value) {
	b = New(t)
	x := b.Input("x", ir.Float, dims...)
	zero = b.Init("zero", ir.TensorFromFloat64s(ir.Float, ir.Shape{1}, []float64{0}))
	a = b.Op("Relu", V(x))
	p = b.Op("Tanh", V(a))
	y = b.Op("Sigmoid", V(p))
	l = b.Op("Neg", V(y))
	dy = b.Op("Sigmoid", V(l))
	return b, zero, a, p, y, l, dy
}

// lossStepGraph is lossStep's step, returned as it is.
func lossStepGraph(t *testing.T) *ir.Graph {
	b, _, _, _, _, dy := lossStep(t)
	return b.Return(dy).Graph
}

// Reorder computes an order from the step as built once: a second copy
// reordered takes the first one's result, which is the order computed
// afresh on it, and each copy stays a permutation of its own ops.
func TestReorderKeepsComputedOrders(t *testing.T) {
	b, _, a, _, _, dy := lossStep(t)
	mask := b.Op("Abs", V(a))
	da := b.Op("Mul", V(dy, mask))
	dx := b.Op("Neg", V(da))
	m := b.Return(dx)
	for _, v := range []*ir.Value{mask, da, dx} {
		v.Def.Phase = ir.Backward
	}
	s := NewState(m, nil)
	if err := s.Run(Schedule); err != nil {
		t.Fatal(err)
	}
	for _, o := range Orders {
		// The order computed afresh, on a copy in the as-built order
		// (Schedule left s's graph depth-first).
		c := s.Model.Clone()
		if err := s.Fork(c, nil, "probe").Reorder(OrderAsBuilt); err != nil {
			t.Fatal(err)
		}
		fresh, err := OrderOf(c.Graph, o)
		if err != nil {
			t.Fatal(err)
		}
		if o == OrderShrinkEarly {
			// Nothing shrinks here: shrink-early is grad-first, which
			// Reorder says, every time, instead of computing it again.
			gf, err := OrderOf(c.Graph, OrderGradFirst)
			if err != nil {
				t.Fatal(err)
			}
			for i := range fresh {
				if fresh[i] != gf[i] {
					t.Fatalf("shrink-early: position %d is %s, grad-first's %s", i, fresh[i].Describe(), gf[i].Describe())
				}
			}
			for n := 0; n < 2; n++ {
				if err := s.Fork(s.Model.Clone(), nil, "copy").Reorder(o); !errors.Is(err, ErrSameOrder) {
					t.Errorf("shrink-early, copy %d: Reorder = %v, want ErrSameOrder", n, err)
				}
			}
			continue
		}
		for n := 0; n < 2; n++ {
			f := s.Fork(s.Model.Clone(), nil, "copy")
			if err := f.Reorder(o); err != nil {
				t.Fatalf("%s, copy %d: %v", o, n, err)
			}
			got := f.Model.Graph.Order()
			if len(got) != len(fresh) {
				t.Fatalf("%s, copy %d: %d ops, want %d", o, n, len(got), len(fresh))
			}
			for i := range got {
				if got[i].ID != fresh[i].ID || got[i].Graph() != f.Model.Graph {
					t.Errorf("%s, copy %d: position %d is %s, want %s", o, n, i, got[i].Describe(), fresh[i].Describe())
				}
			}
		}
		s.asBuilt.mu.Lock()
		_, kept := s.asBuilt.orders[o]
		s.asBuilt.mu.Unlock()
		if !kept {
			t.Errorf("%s: not kept after Reorder", o)
		}
	}
}
