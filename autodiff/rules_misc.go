package autodiff

import (
	"math"

	"github.com/tsplit/tsplit/ir"
)

// Gradient rules of the remaining ops: casts, clipping, the variadic
// elementwise ops (Sum, Mean, Max, Min), a few unary activations, the
// non-linear reductions, and the ops that have no gradient at all.

func init() {
	// Ops without a gradient: their outputs are constants, shapes,
	// integers or booleans, so no gradient ever reaches them (the sweep
	// only propagates through float values); they are registered so
	// that HasRule covers them and the sweep never stops on them.
	for _, t := range []string{
		"Constant", "ConstantOfShape", "Shape", "Size", "Range",
		"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual",
		"Not", "And", "Or", "Xor", "IsInf", "IsNaN", "ArgMax", "ArgMin",
	} {
		Register("", t, func(*Builder, *ir.Op, []*ir.Value, []bool) []*ir.Value { return nil })
	}
	Register("", "Cast", castGrad)
	Register("", "CastLike", castGrad)
	Register("", "Clip", clipGrad)
	Register("", "Sum", func(b *Builder, op *ir.Op, dy []*ir.Value, need []bool) []*ir.Value {
		return variadicSpread(b, op, dy[0], need, 1)
	})
	Register("", "Mean", func(b *Builder, op *ir.Op, dy []*ir.Value, need []bool) []*ir.Value {
		return variadicSpread(b, op, dy[0], need, 1/float64(len(op.Inputs())))
	})
	Register("", "Max", extremumGrad)
	Register("", "Min", extremumGrad)
	Register("", "Abs", func(b *Builder, op *ir.Op, dy []*ir.Value, need []bool) []*ir.Value {
		// sign(x), 0 at x = 0
		return []*ir.Value{b.Mul(dy[0], b.Op("Sign", []*ir.Value{op.Input(0)}))}
	})
	Register("", "Softplus", func(b *Builder, op *ir.Op, dy []*ir.Value, need []bool) []*ir.Value {
		// d/dx ln(1 + eˣ) = σ(x)
		return []*ir.Value{b.Mul(dy[0], b.Op("Sigmoid", []*ir.Value{op.Input(0)}))}
	})
	Register("", "HardSigmoid", func(b *Builder, op *ir.Op, dy []*ir.Value, need []bool) []*ir.Value {
		// y = max(0, min(1, αx + β)): slope α where 0 < y < 1. Reads the
		// output, so the input can be freed after the forward op.
		y := op.Output(0)
		alpha := float64(op.AttrFloat("alpha", 0.2))
		inside := b.Op("And", []*ir.Value{
			b.Op("Greater", []*ir.Value{y, b.Scalar(y.DType, 0)}),
			b.Op("Less", []*ir.Value{y, b.Scalar(y.DType, 1)}),
		})
		return []*ir.Value{b.Op("Where", []*ir.Value{inside, b.Mul(dy[0], b.Scalar(y.DType, alpha)), b.Scalar(y.DType, 0)})}
	})
	Register("", "HardSwish", func(b *Builder, op *ir.Op, dy []*ir.Value, need []bool) []*ir.Value {
		// y = x·max(0, min(1, x/6 + 1/2)): 0 below −3, x/3 + 1/2 on
		// [−3, 3], 1 above — PyTorch's hardswish_backward, whose middle
		// piece includes both ends (MobileNetV3's activation).
		x := op.Input(0)
		scalar := func(v float64) *ir.Value { return b.Scalar(x.DType, v) }
		slope := b.Add(b.Mul(x, scalar(1.0/3)), scalar(0.5))
		middle := b.Op("Where", []*ir.Value{b.Op("LessOrEqual", []*ir.Value{x, scalar(3)}), b.Mul(dy[0], slope), dy[0]})
		return []*ir.Value{b.Op("Where", []*ir.Value{b.Op("Less", []*ir.Value{x, scalar(-3)}), scalar(0), middle})}
	})
	Register("", "ReduceMax", reduceExtremumGrad)
	Register("", "ReduceMin", reduceExtremumGrad)
	Register("", "ReduceSumSquare", func(b *Builder, op *ir.Op, dy []*ir.Value, need []bool) []*ir.Value {
		// 2·x·dy
		x := op.Input(0)
		return reduceGrad(b, op, dy[0], func(dyk, _ *ir.Value) *ir.Value {
			return b.Mul(x, b.Mul(dyk, b.Scalar(x.DType, 2)))
		})
	})
	Register("", "ReduceL2", func(b *Builder, op *ir.Op, dy []*ir.Value, need []bool) []*ir.Value {
		// x·dy/y, and 0 where y = 0 (the subgradient of the norm at 0
		// that frameworks use; x is 0 there).
		x := op.Input(0)
		return reduceGrad(b, op, dy[0], func(dyk, yk *ir.Value) *ir.Value {
			zero := b.Scalar(x.DType, 0)
			scale := b.Op("Where", []*ir.Value{b.Op("Equal", []*ir.Value{yk, zero}), zero, b.Div(dyk, yk)})
			return b.Mul(x, scale)
		})
	})
	Register("", "ReduceProd", func(b *Builder, op *ir.Op, dy []*ir.Value, need []bool) []*ir.Value {
		// dy·y/x: the product of the other elements, exact for x ≠ 0
		// (where an element is 0 this gives NaN or Inf).
		x := op.Input(0)
		return reduceGrad(b, op, dy[0], func(dyk, yk *ir.Value) *ir.Value {
			return b.Div(b.Mul(dyk, yk), x)
		})
	})
}

// castGrad casts the gradient back to the input's type; an input that
// cannot carry a gradient (integer, bool) gets none. CastLike's target
// (input 1) gets none either.
func castGrad(b *Builder, op *ir.Op, dy []*ir.Value, need []bool) []*ir.Value {
	x := op.Input(0)
	out := make([]*ir.Value, len(op.Inputs()))
	if !need[0] || !Differentiable(x.DType) {
		return out
	}
	if dy[0].DType == x.DType {
		out[0] = dy[0]
	} else {
		out[0] = b.Op("Cast", []*ir.Value{dy[0]}, intAttr("to", int64(x.DType)))
	}
	return out
}

// clipGrad passes dy where min ≤ x ≤ max (the bounds are inputs 1 and 2
// since opset 11, the attributes min and max before); the bounds get
// none.
func clipGrad(b *Builder, op *ir.Op, dy []*ir.Value, need []bool) []*ir.Value {
	x := op.Input(0)
	out := make([]*ir.Value, len(op.Inputs()))
	var lo, hi *ir.Value
	if b.M.Opset("") >= 11 {
		lo, hi = op.Input(1), op.Input(2)
	} else {
		if a := op.Attr("min"); a != nil && !math.IsInf(float64(a.Float), -1) {
			lo = b.Scalar(x.DType, float64(a.Float))
		}
		if a := op.Attr("max"); a != nil && !math.IsInf(float64(a.Float), 1) {
			hi = b.Scalar(x.DType, float64(a.Float))
		}
	}
	var mask *ir.Value
	if lo != nil {
		mask = cmpOrEqual(b, "Less", x, lo) // x >= lo
	}
	if hi != nil {
		m := cmpOrEqual(b, "Greater", x, hi) // x <= hi
		if mask == nil {
			mask = m
		} else {
			mask = b.Op("And", []*ir.Value{mask, m})
		}
	}
	if mask == nil {
		out[0] = dy[0]
	} else {
		out[0] = b.Op("Where", []*ir.Value{mask, dy[0], b.Scalar(dy[0].DType, 0)})
	}
	return out
}

// cmpOrEqual is x >= y for strict "Less" (x not less than y) and x <= y
// for strict "Greater": GreaterOrEqual and LessOrEqual since opset 12,
// the negated strict comparison before.
func cmpOrEqual(b *Builder, strict string, x, y *ir.Value) *ir.Value {
	if b.M.Opset("") >= 12 {
		typ := "GreaterOrEqual"
		if strict == "Greater" {
			typ = "LessOrEqual"
		}
		return b.Op(typ, []*ir.Value{x, y})
	}
	return b.Op("Not", []*ir.Value{b.Op(strict, []*ir.Value{x, y})})
}

// variadicSpread is the gradient of Sum (scale 1) and Mean (scale 1/n):
// dy, scaled, summed back to each input's broadcast shape.
func variadicSpread(b *Builder, op *ir.Op, dy *ir.Value, need []bool, scale float64) []*ir.Value {
	out := make([]*ir.Value, len(op.Inputs()))
	g := dy
	if scale != 1 {
		g = b.Mul(dy, b.Scalar(dy.DType, scale))
	}
	for i, in := range op.Inputs() {
		if need[i] {
			out[i] = b.SumTo(g, in.Shape)
		}
	}
	return out
}

// extremumGrad routes the gradient of a variadic Max or Min to the
// input that supplied each output element; where several inputs tie the
// first one gets it all, so the gradients still sum to dy.
func extremumGrad(b *Builder, op *ir.Op, dy []*ir.Value, need []bool) []*ir.Value {
	ins := op.Inputs()
	out := make([]*ir.Value, len(ins))
	if len(ins) == 1 {
		out[0] = dy[0]
		return out
	}
	last := -1
	for i := range ins {
		if need[i] {
			last = i
		}
	}
	y := op.Output(0)
	zero := b.Scalar(dy[0].DType, 0)
	var taken *ir.Value // some earlier input equals y
	for i := 0; i <= last; i++ {
		eq := b.Op("Equal", []*ir.Value{ins[i], y})
		mask := eq
		if taken != nil {
			mask = b.Op("And", []*ir.Value{eq, b.Op("Not", []*ir.Value{taken})})
		}
		if need[i] {
			out[i] = b.SumTo(b.Op("Where", []*ir.Value{mask, dy[0], zero}), ins[i].Shape)
		}
		if i < last {
			if taken == nil {
				taken = eq
			} else {
				taken = b.Op("Or", []*ir.Value{taken, eq})
			}
		}
	}
	return out
}

// reduceGrad serves reductions whose input gradient is an elementwise
// formula f(dyk, yk) of the output and its gradient, both reshaped to
// the keepdims shape so that they broadcast against the input. The
// identity case (empty axes with noop_with_empty_axes) passes dy on.
func reduceGrad(b *Builder, op *ir.Op, dy *ir.Value, f func(dyk, yk *ir.Value) *ir.Value) []*ir.Value {
	x, y := op.Input(0), op.Output(0)
	red, noop, err := ir.ReduceAxes(op)
	if err != nil {
		b.Fail("%v", err)
		return nil
	}
	if noop {
		return []*ir.Value{dy}
	}
	kept := x.Shape.Clone()
	for i, r := range red {
		if r {
			kept[i] = 1
		}
	}
	// f's formula involves x, so its result has x's shape.
	return []*ir.Value{f(reshapeTo(b, dy, kept), reshapeTo(b, y, kept))}
}

// reduceExtremumGrad is the gradient of ReduceMax and ReduceMin: dy goes
// to the elements equal to the result. Ties split it evenly (each of k
// tied elements gets dy/k, the average of the subgradients, as PyTorch's
// amax/amin do), so the gradients still sum to dy.
func reduceExtremumGrad(b *Builder, op *ir.Op, dy []*ir.Value, need []bool) []*ir.Value {
	x := op.Input(0)
	red, _, err := ir.ReduceAxes(op)
	if err != nil {
		b.Fail("%v", err)
		return nil
	}
	var axes []int64
	for i, r := range red {
		if r {
			axes = append(axes, int64(i))
		}
	}
	return reduceGrad(b, op, dy[0], func(dyk, yk *ir.Value) *ir.Value {
		hit := b.Op("Cast", []*ir.Value{b.Op("Equal", []*ir.Value{x, yk})}, intAttr("to", int64(x.DType)))
		count := reduceSum(b, hit, axes, true)
		return b.Mul(hit, b.Div(dyk, count))
	})
}
