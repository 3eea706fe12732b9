package autodiff

import (
	"math"

	"github.com/tsplit/tsplit/ir"
)

// Gradient rules of elementwise ops. Broadcasting binary ops reduce the
// gradient back to each input's shape with Builder.SumTo.

func init() {
	Register("", "Identity", func(b *Builder, op *ir.Op, dy []*ir.Value, need []bool) []*ir.Value {
		return []*ir.Value{dy[0]}
	})
	Register("", "Neg", func(b *Builder, op *ir.Op, dy []*ir.Value, need []bool) []*ir.Value {
		return []*ir.Value{b.Neg(dy[0])}
	})
	Register("", "Add", func(b *Builder, op *ir.Op, dy []*ir.Value, need []bool) []*ir.Value {
		return broadcastRule(b, op, need, func() *ir.Value { return dy[0] }, func() *ir.Value { return dy[0] })
	})
	Register("", "Sub", func(b *Builder, op *ir.Op, dy []*ir.Value, need []bool) []*ir.Value {
		return broadcastRule(b, op, need, func() *ir.Value { return dy[0] }, func() *ir.Value { return b.Neg(dy[0]) })
	})
	Register("", "Mul", func(b *Builder, op *ir.Op, dy []*ir.Value, need []bool) []*ir.Value {
		x, y := op.Input(0), op.Input(1)
		return broadcastRule(b, op, need, func() *ir.Value { return b.Mul(dy[0], y) }, func() *ir.Value { return b.Mul(dy[0], x) })
	})
	Register("", "Div", func(b *Builder, op *ir.Op, dy []*ir.Value, need []bool) []*ir.Value {
		y := op.Input(1)
		// d/dx = dy / y; d/dy = −dy · x / y² = −dy · z / y with z = x / y.
		return broadcastRule(b, op, need,
			func() *ir.Value { return b.Div(dy[0], y) },
			func() *ir.Value { return b.Neg(b.Div(b.Mul(dy[0], op.Output(0)), y)) })
	})
	Register("", "Pow", func(b *Builder, op *ir.Op, dy []*ir.Value, need []bool) []*ir.Value {
		x, p := op.Input(0), op.Input(1)
		z := op.Output(0)
		return broadcastRule(b, op, need,
			func() *ir.Value {
				// p · x^(p−1)
				pc := p
				if p.DType != x.DType {
					pc = b.Op("Cast", []*ir.Value{p}, ir.Attr{Name: "to", Type: ir.AttrInt, Int: int64(x.DType)})
				}
				pm1 := b.Sub(pc, b.Scalar(x.DType, 1))
				return b.Mul(dy[0], b.Mul(pc, b.Op("Pow", []*ir.Value{x, pm1})))
			},
			func() *ir.Value {
				// z · ln x (exponent gradient; x > 0 where it matters)
				if !Differentiable(p.DType) {
					b.Fail("Pow exponent of type %v has no gradient", p.DType)
					return nil
				}
				return b.Mul(dy[0], b.Mul(z, b.Op("Log", []*ir.Value{x})))
			})
	})
	Register("", "Sqrt", func(b *Builder, op *ir.Op, dy []*ir.Value, need []bool) []*ir.Value {
		y := op.Output(0)
		return []*ir.Value{b.Div(dy[0], b.Mul(b.Scalar(y.DType, 2), y))}
	})
	Register("", "Exp", func(b *Builder, op *ir.Op, dy []*ir.Value, need []bool) []*ir.Value {
		return []*ir.Value{b.Mul(dy[0], op.Output(0))}
	})
	Register("", "Log", func(b *Builder, op *ir.Op, dy []*ir.Value, need []bool) []*ir.Value {
		return []*ir.Value{b.Div(dy[0], op.Input(0))}
	})
	Register("", "Reciprocal", func(b *Builder, op *ir.Op, dy []*ir.Value, need []bool) []*ir.Value {
		y := op.Output(0)
		return []*ir.Value{b.Neg(b.Mul(dy[0], b.Mul(y, y)))}
	})
	Register("", "Relu", func(b *Builder, op *ir.Op, dy []*ir.Value, need []bool) []*ir.Value {
		// Where(y > 0, dy, 0): reads the output, as frameworks do, so the
		// input can be freed after the forward op.
		y := op.Output(0)
		return []*ir.Value{b.Op("Where", []*ir.Value{b.Op("Greater", []*ir.Value{y, b.Scalar(y.DType, 0)}), dy[0], b.Scalar(y.DType, 0)})}
	})
	Register("", "LeakyRelu", func(b *Builder, op *ir.Op, dy []*ir.Value, need []bool) []*ir.Value {
		x := op.Input(0)
		alpha := float64(op.AttrFloat("alpha", 0.01))
		pos := b.Op("Greater", []*ir.Value{x, b.Scalar(x.DType, 0)})
		return []*ir.Value{b.Op("Where", []*ir.Value{pos, dy[0], b.Mul(dy[0], b.Scalar(x.DType, alpha))})}
	})
	Register("", "Shrink", func(b *Builder, op *ir.Op, dy []*ir.Value, need []bool) []*ir.Value {
		// y = x ∓ bias outside [−λ, λ], 0 inside: slope 1 where |x| > λ.
		x := op.Input(0)
		lambd := float64(op.AttrFloat("lambd", 0.5))
		out := b.Op("Greater", []*ir.Value{b.Op("Abs", []*ir.Value{x}), b.Scalar(x.DType, lambd)})
		return []*ir.Value{b.Op("Where", []*ir.Value{out, dy[0], b.Scalar(x.DType, 0)})}
	})
	Register("", "Sigmoid", func(b *Builder, op *ir.Op, dy []*ir.Value, need []bool) []*ir.Value {
		y := op.Output(0)
		return []*ir.Value{b.Mul(dy[0], b.Mul(y, b.Sub(b.Scalar(y.DType, 1), y)))}
	})
	Register("", "Tanh", func(b *Builder, op *ir.Op, dy []*ir.Value, need []bool) []*ir.Value {
		y := op.Output(0)
		return []*ir.Value{b.Mul(dy[0], b.Sub(b.Scalar(y.DType, 1), b.Mul(y, y)))}
	})
	Register("", "Erf", func(b *Builder, op *ir.Op, dy []*ir.Value, need []bool) []*ir.Value {
		// 2/√π · exp(−x²)
		x := op.Input(0)
		e := b.Op("Exp", []*ir.Value{b.Neg(b.Mul(x, x))})
		return []*ir.Value{b.Mul(dy[0], b.Mul(e, b.Scalar(x.DType, 2/math.Sqrt(math.Pi))))}
	})
}

// broadcastRule applies the rule of a broadcasting binary op: each needed
// input's gradient is computed and summed back to the input's shape.
func broadcastRule(b *Builder, op *ir.Op, need []bool, dx0, dx1 func() *ir.Value) []*ir.Value {
	out := make([]*ir.Value, 2)
	if need[0] {
		out[0] = b.SumTo(dx0(), op.Input(0).Shape)
	}
	if need[1] {
		out[1] = b.SumTo(dx1(), op.Input(1).Shape)
	}
	return out
}
