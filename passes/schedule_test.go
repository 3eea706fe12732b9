package passes

import (
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
