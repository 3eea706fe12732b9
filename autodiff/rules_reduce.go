package autodiff

import "github.com/tsplit/tsplit/ir"

// Gradient rules of reductions: the output gradient is broadcast back
// over the reduced axes (scaled by 1/count for a mean).

func init() {
	Register("", "ReduceSum", func(b *Builder, op *ir.Op, dy []*ir.Value, need []bool) []*ir.Value {
		return []*ir.Value{spreadReduced(b, op, dy[0], 1)}
	})
	Register("", "ReduceMean", func(b *Builder, op *ir.Op, dy []*ir.Value, need []bool) []*ir.Value {
		x := op.Input(0)
		red, noop, err := ir.ReduceAxes(op)
		if err != nil {
			b.Fail("%v", err)
			return nil
		}
		count := int64(1)
		if !noop {
			for i, r := range red {
				if r {
					count *= x.Shape[i]
				}
			}
		}
		return []*ir.Value{spreadReduced(b, op, dy[0], 1/float64(count))}
	})
}

// spreadReduced reshapes the gradient of a reduction to the keepdims
// shape, scales it, and expands it to the input's shape.
func spreadReduced(b *Builder, op *ir.Op, dy *ir.Value, scale float64) *ir.Value {
	x := op.Input(0)
	red, noop, err := ir.ReduceAxes(op)
	if err != nil {
		b.Fail("%v", err)
		return nil
	}
	g := dy
	if scale != 1 {
		g = b.Mul(g, b.Scalar(dy.DType, scale))
	}
	if noop {
		return g
	}
	kept := x.Shape.Clone()
	for i, r := range red {
		if r {
			kept[i] = 1
		}
	}
	g = b.Reshape(g, kept)
	if g == nil || g.Shape.Equal(x.Shape) {
		return g
	}
	return b.Op("Expand", []*ir.Value{g, b.Ints(x.Shape...)})
}
