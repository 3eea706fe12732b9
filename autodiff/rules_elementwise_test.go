package autodiff

import (
	"testing"

	"github.com/tsplit/tsplit/ir"
	"github.com/tsplit/tsplit/ir/irtest"
)

func unaryCase(op string, lo, hi float64, attrs ...ir.Attr) gradCase {
	return gradCase{name: op, lo: lo, hi: hi, build: func(b *irtest.B) ([]*ir.Value, []*ir.Value) {
		x := b.Input("x", ir.Double, 3, 4)
		return irtest.V(x), irtest.V(b.Op(op, irtest.V(x), attrs...))
	}}
}

func binaryCase(op string, sa, sb ir.Shape, lo, hi float64) gradCase {
	return gradCase{name: op + sa.String() + sb.String(), lo: lo, hi: hi, build: func(b *irtest.B) ([]*ir.Value, []*ir.Value) {
		x := b.Input("x", ir.Double, sa...)
		y := b.Input("y", ir.Double, sb...)
		return irtest.V(x, y), irtest.V(b.Op(op, irtest.V(x, y)))
	}}
}

func TestElementwiseGradients(t *testing.T) {
	cases := []gradCase{
		unaryCase("Identity", -1, 1),
		unaryCase("Neg", -1, 1),
		unaryCase("Sqrt", 0.5, 2),
		unaryCase("Exp", -1, 1),
		unaryCase("Log", 0.5, 2),
		unaryCase("Reciprocal", 0.5, 2),
		unaryCase("Relu", -1, 1),
		unaryCase("LeakyRelu", -1, 1, irtest.Float("alpha", 0.2)),
		unaryCase("Shrink", -2, 2),
		unaryCase("Shrink", -2, 2, irtest.Float("lambd", 1), irtest.Float("bias", 0.3)),
		unaryCase("Sigmoid", -2, 2),
		unaryCase("Tanh", -2, 2),
		unaryCase("Erf", -2, 2),
	}
	for _, op := range []string{"Add", "Sub", "Mul", "Div"} {
		cases = append(cases,
			binaryCase(op, ir.Shape{3, 4}, ir.Shape{3, 4}, 0.5, 2),
			binaryCase(op, ir.Shape{2, 3, 4}, ir.Shape{4}, 0.5, 2),
			binaryCase(op, ir.Shape{2, 1, 4}, ir.Shape{3, 1}, 0.5, 2))
	}
	cases = append(cases, binaryCase("Pow", ir.Shape{3, 4}, ir.Shape{4}, 0.5, 2))
	runGradChecks(t, cases)
}

// A value read twice gets the sum of both contributions.
func TestGradientAccumulates(t *testing.T) {
	runGradCheck(t, gradCase{name: "x*x+x", build: func(b *irtest.B) ([]*ir.Value, []*ir.Value) {
		x := b.Input("x", ir.Double, 5)
		return irtest.V(x), irtest.V(b.Op("Add", irtest.V(b.Op("Mul", irtest.V(x, x)), x)))
	}})
}

func TestReduceGradients(t *testing.T) {
	var cases []gradCase
	for _, op := range []string{"ReduceSum", "ReduceMean"} {
		for _, kd := range []int64{0, 1} {
			cases = append(cases, gradCase{name: op + "/attr", build: func(b *irtest.B) ([]*ir.Value, []*ir.Value) {
				x := b.Input("x", ir.Double, 3, 3, 2)
				b.M.Opsets[""] = 13
				if op == "ReduceSum" {
					return irtest.V(x), irtest.V(b.Op(op, irtest.V(x, b.Ints("axes", 0, -1)), irtest.Int("keepdims", kd)))
				}
				return irtest.V(x), irtest.V(b.Op(op, irtest.V(x), irtest.Ints("axes", 0, -1), irtest.Int("keepdims", kd)))
			}}, gradCase{name: op + "/all", build: func(b *irtest.B) ([]*ir.Value, []*ir.Value) {
				x := b.Input("x", ir.Double, 3, 3, 2)
				return irtest.V(x), irtest.V(b.Op(op, irtest.V(x), irtest.Int("keepdims", kd)))
			}})
		}
	}
	runGradChecks(t, cases)
}
