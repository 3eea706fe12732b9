package autodiff

import (
	"math"
	"testing"

	"github.com/tsplit/tsplit/ir"
	"github.com/tsplit/tsplit/ir/irtest"
	"github.com/tsplit/tsplit/kernels"
)

func scalarInit(b *irtest.B, name string, v float64) *ir.Value {
	return b.Init(name, constF64(ir.Shape{}, []float64{v}))
}

func TestCastClipGradients(t *testing.T) {
	runGradChecks(t, []gradCase{
		{name: "Cast/float", tol: 5e-2, build: func(b *irtest.B) ([]*ir.Value, []*ir.Value) {
			// Through float32 and back: the finite difference sees
			// float32 rounding, hence the tolerance.
			x := b.Input("x", ir.Double, 3, 4)
			f := b.Op("Cast", irtest.V(x), irtest.Int("to", int64(ir.Float)))
			return irtest.V(x), irtest.V(b.Op("Cast", irtest.V(f), irtest.Int("to", int64(ir.Double))))
		}},
		{name: "CastLike/float", tol: 5e-2, build: func(b *irtest.B) ([]*ir.Value, []*ir.Value) {
			x := b.Input("x", ir.Double, 2, 3)
			like := b.Init("like", ir.TensorFromFloat64s(ir.Float, ir.Shape{1}, []float64{0}))
			f := b.Op("CastLike", irtest.V(x, like))
			return irtest.V(x), irtest.V(b.Op("Cast", irtest.V(f), irtest.Int("to", int64(ir.Double))))
		}},
		{name: "Cast/int_path", lo: 0.1, hi: 0.9, build: func(b *irtest.B) ([]*ir.Value, []*ir.Value) {
			// The integer path carries no gradient; the direct one does.
			x := b.Input("x", ir.Double, 5)
			i := b.Op("Cast", irtest.V(x), irtest.Int("to", int64(ir.Int64)))
			d := b.Op("Cast", irtest.V(i), irtest.Int("to", int64(ir.Double)))
			return irtest.V(x), irtest.V(b.Op("Add", irtest.V(x, d)))
		}},
		{name: "Clip/both", build: func(b *irtest.B) ([]*ir.Value, []*ir.Value) {
			x := b.Input("x", ir.Double, 4, 5)
			return irtest.V(x), irtest.V(b.Op("Clip", irtest.V(x, scalarInit(b, "lo", -0.4), scalarInit(b, "hi", 0.3))))
		}},
		{name: "Clip/max_only", build: func(b *irtest.B) ([]*ir.Value, []*ir.Value) {
			x := b.Input("x", ir.Double, 4, 5)
			return irtest.V(x), irtest.V(b.Op("Clip", irtest.V(x, nil, scalarInit(b, "hi", 0.1))))
		}},
		{name: "Clip/min_only", build: func(b *irtest.B) ([]*ir.Value, []*ir.Value) {
			x := b.Input("x", ir.Double, 4, 5)
			return irtest.V(x), irtest.V(b.Op("Clip", irtest.V(x, scalarInit(b, "lo", 0.2))))
		}},
		{name: "Clip/none", build: func(b *irtest.B) ([]*ir.Value, []*ir.Value) {
			x := b.Input("x", ir.Double, 3)
			return irtest.V(x), irtest.V(b.Op("Clip", irtest.V(x)))
		}},
		{name: "Clip/opset11", build: atOpset(11, func(b *irtest.B) ([]*ir.Value, []*ir.Value) {
			x := b.Input("x", ir.Double, 4, 5)
			return irtest.V(x), irtest.V(b.Op("Clip", irtest.V(x, scalarInit(b, "lo", -0.4), scalarInit(b, "hi", 0.3))))
		})},
	})
}

func TestVariadicGradients(t *testing.T) {
	s3 := shapes(ir.Shape{2, 3, 4}, ir.Shape{3, 1}, ir.Shape{4})
	var cases []gradCase
	for _, op := range []string{"Sum", "Mean", "Max", "Min"} {
		cases = append(cases,
			oneOp(op+"/broadcast3", op, s3, nil),
			oneOp(op+"/same2", op, shapes(ir.Shape{3, 2}, ir.Shape{3, 2}), nil),
			oneOp(op+"/single", op, shapes(ir.Shape{3, 2}), nil),
			gradCase{name: op + "/some", build: func(b *irtest.B) ([]*ir.Value, []*ir.Value) {
				// The constant in the middle needs no gradient but
				// still wins some elements of Max/Min.
				x := b.Input("x", ir.Double, 2, 3)
				c := b.Init("c", constF64(ir.Shape{3}, []float64{-0.5, 0.1, 0.6}))
				y := b.Input("y", ir.Double, 2, 1)
				return irtest.V(x, y), irtest.V(b.Op(op, irtest.V(x, c, y)))
			}},
		)
	}
	runGradChecks(t, cases)
}

func TestUnaryMiscGradients(t *testing.T) {
	runGradChecks(t, []gradCase{
		unaryCase("Abs", -1, 1),
		unaryCase("Softplus", -3, 3),
		unaryCase("HardSigmoid", -4, 4),
		unaryCase("HardSigmoid", -1, 1, irtest.Float("alpha", 0.7), irtest.Float("beta", 0.4)),
		unaryCase("HardSwish", -5, 5),
	})
}

func reduceCase(name, op string, opset int64, shape ir.Shape, axes []int64, asInput bool, kd int64, lo, hi float64, extra ...ir.Attr) gradCase {
	return gradCase{name: name, lo: lo, hi: hi, build: func(b *irtest.B) ([]*ir.Value, []*ir.Value) {
		b.M.Opsets[""] = opset
		x := b.Input("x", ir.Double, shape...)
		ins := irtest.V(x)
		attrs := append([]ir.Attr{irtest.Int("keepdims", kd)}, extra...)
		switch {
		case asInput:
			ins = append(ins, b.Ints("axes", axes...))
		case axes != nil:
			attrs = append(attrs, irtest.Ints("axes", axes...))
		}
		return irtest.V(x), irtest.V(b.Op(op, ins, attrs...))
	}}
}

func TestNonlinearReduceGradients(t *testing.T) {
	var cases []gradCase
	for _, op := range []string{"ReduceMax", "ReduceMin", "ReduceL2", "ReduceSumSquare", "ReduceProd"} {
		lo, hi := -1.0, 1.0
		if op == "ReduceProd" {
			lo, hi = 0.5, 1.5 // x ≠ 0
		}
		shape := ir.Shape{3, 4, 2}
		cases = append(cases,
			reduceCase(op+"/attr_kd0", op, 17, shape, []int64{-1, 0}, false, 0, lo, hi),
			reduceCase(op+"/attr_kd1", op, 17, shape, []int64{1}, false, 1, lo, hi),
			reduceCase(op+"/all", op, 17, shape, nil, false, 0, lo, hi),
			reduceCase(op+"/input18", op, 18, shape, []int64{-2}, true, 0, lo, hi),
			reduceCase(op+"/noop18", op, 18, shape, nil, false, 1, lo, hi, irtest.Int("noop_with_empty_axes", 1)),
		)
	}
	runGradChecks(t, cases)
}

// gradsAt differentiates loss = Σ outputs (so dy = 1) at the given
// input values and returns the gradient of each wrt input.
func gradsAt(t *testing.T, build func(b *irtest.B) (wrt []*ir.Value, out *ir.Value), feeds map[string]*kernels.Tensor) [][]float64 {
	t.Helper()
	b := irtest.New(t)
	wrt, out := build(b)
	loss := b.Op("ReduceSum", irtest.V(out), irtest.Int("keepdims", 0))
	m := b.Return(loss)
	grads, err := Grad(m, loss, wrt)
	if err != nil {
		t.Fatal(err)
	}
	vals, err := kernels.Interpret(m, feeds, 0)
	if err != nil {
		t.Fatal(err)
	}
	res := make([][]float64, len(grads))
	for i, g := range grads {
		res[i] = append([]float64(nil), vals[g.ID].F64()...)
	}
	return res
}

func wantVals(t *testing.T, what string, got, want []float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	for i := range got {
		if math.Abs(got[i]-want[i]) > 1e-12 || math.IsNaN(got[i]) {
			t.Fatalf("%s = %v, want %v", what, got, want)
		}
	}
}

// Ties, where the finite difference does not apply: Max/Min give the
// gradient to the first input that wins, ReduceMax/ReduceMin split it
// evenly between the tied elements; ReduceL2 of zeros has gradient 0.
func TestTieGradients(t *testing.T) {
	feeds := map[string]*kernels.Tensor{
		"x": f64Tensor(ir.Shape{2, 3}, []float64{1, 3, 3, 2, 2, 2}),
		"y": f64Tensor(ir.Shape{2, 3}, []float64{1, 0, 3, 5, 2, 1}),
	}
	for _, op := range []string{"Max", "Min"} {
		g := gradsAt(t, func(b *irtest.B) ([]*ir.Value, *ir.Value) {
			x, y := b.Input("x", ir.Double, 2, 3), b.Input("y", ir.Double, 2, 3)
			return irtest.V(x, y), b.Op(op, irtest.V(x, y, x))
		}, feeds)
		if op == "Max" {
			wantVals(t, "Max dx", g[0], []float64{1, 1, 1, 0, 1, 1})
			wantVals(t, "Max dy", g[1], []float64{0, 0, 0, 1, 0, 0})
		} else {
			wantVals(t, "Min dx", g[0], []float64{1, 0, 1, 1, 1, 0})
			wantVals(t, "Min dy", g[1], []float64{0, 1, 0, 0, 0, 1})
		}
	}
	g := gradsAt(t, func(b *irtest.B) ([]*ir.Value, *ir.Value) {
		x := b.Input("x", ir.Double, 2, 3)
		return irtest.V(x), b.Op("ReduceMax", irtest.V(x), irtest.Ints("axes", 1), irtest.Int("keepdims", 0))
	}, feeds)
	wantVals(t, "ReduceMax dx", g[0], []float64{0, 0.5, 0.5, 1.0 / 3, 1.0 / 3, 1.0 / 3})
	g = gradsAt(t, func(b *irtest.B) ([]*ir.Value, *ir.Value) {
		x := b.Input("x", ir.Double, 2, 3)
		return irtest.V(x), b.Op("ReduceMin", irtest.V(x), irtest.Ints("axes", 0), irtest.Int("keepdims", 1))
	}, feeds)
	wantVals(t, "ReduceMin dx", g[0], []float64{1, 0, 0, 0, 1, 1})
	g = gradsAt(t, func(b *irtest.B) ([]*ir.Value, *ir.Value) {
		x := b.Input("x", ir.Double, 2, 3)
		return irtest.V(x), b.Op("ReduceL2", irtest.V(x), irtest.Ints("axes", 1), irtest.Int("keepdims", 0))
	}, map[string]*kernels.Tensor{"x": f64Tensor(ir.Shape{2, 3}, []float64{0, 0, 0, 3, 0, 4})})
	wantVals(t, "ReduceL2 dx", g[0], []float64{0, 0, 0, 0.6, 0, 0.8})
}

// The ops without a gradient have a rule that returns none.
func TestNoGradientRules(t *testing.T) {
	b := irtest.New(t)
	x := b.Input("x", ir.Double, 2, 3)
	y := b.Input("y", ir.Double, 2, 3)
	gb := NewBuilder(b.M, ir.Backward, "g/")
	check := func(v *ir.Value) {
		t.Helper()
		op := v.Def
		r, ok := rules.Of(op)
		if !ok {
			t.Fatalf("%s has no rule", op.Type)
		}
		need := make([]bool, len(op.Inputs()))
		for i := range need {
			need[i] = true
		}
		for _, g := range r(gb, op, []*ir.Value{x}, need) {
			if g != nil {
				t.Errorf("%s gives a gradient", op.Type)
			}
		}
	}
	lt := b.Op("Less", irtest.V(x, y))
	for _, typ := range []string{"Equal", "Greater", "LessOrEqual", "GreaterOrEqual"} {
		check(b.Op(typ, irtest.V(x, y)))
	}
	for _, typ := range []string{"And", "Or", "Xor"} {
		check(b.Op(typ, irtest.V(lt, lt)))
	}
	check(lt)
	check(b.Op("Not", irtest.V(lt)))
	check(b.Op("IsNaN", irtest.V(x)))
	check(b.Op("IsInf", irtest.V(x)))
	check(b.Op("ArgMax", irtest.V(x)))
	check(b.Op("ArgMin", irtest.V(x)))
	check(b.Op("Shape", irtest.V(x)))
	check(b.Op("Size", irtest.V(x)))
	check(b.Op("ConstantOfShape", irtest.V(b.Ints("s", 2, 2))))
	check(b.Op("Constant", nil, ir.Attr{Name: "value_float", Type: ir.AttrFloat, Float: 1}))
	check(b.Op("Range", irtest.V(scalarInit(b, "r0", 0), scalarInit(b, "r1", 4), scalarInit(b, "r2", 1))))
	if err := gb.Err(); err != nil {
		t.Fatal(err)
	}
}
