package kernels

import "github.com/tsplit/tsplit/ir"

// ArgMax, ArgMin (int64 indices along one axis; keepdims only shapes
// the output; select_last_index picks the last of equal extremes) and
// Hardmax (1 at the first maximum along an axis, 0 elsewhere), which is
// an ArgMax followed by a one-hot.
//
// Hardmax's axis semantics changed in opset 13: before, the input was
// coerced to 2-D at axis (default 1) and the maximum taken over the
// flattened trailing dimensions; since, it is taken over the one axis
// (default -1). This kernel implements both (Ctx.Opset); its workspace is
// declared for the opset-13 form, which bounds the older one.

func init() {
	regOp("ArgMax", 1, 1, numTypes, argRun(true))
	regOp("ArgMin", 1, 1, numTypes, argRun(false))
	// Hardmax sits next to Softmax in the IR's nn family; defer to an
	// nn_* kernel if one is registered.
	if Lookup("", "Hardmax") == nil {
		Register("", "Hardmax", Kernel{DTypes: floatTypes, Run: guardRun(1, 1, hardmaxRun), Workspace: hardmaxWorkspace})
	}
}

// argSplit is (outer, dim, inner) for reducing axis of shape.
func argSplit(shape ir.Shape, axis int) (outer, dim, inner int) {
	return shapeLen(shape[:axis]), int(shape[axis]), shapeLen(shape[axis+1:])
}

func argRun(isMax bool) func(c *Ctx) error {
	return func(c *Ctx) error {
		x, y := c.In[0], c.Out[0]
		r := len(x.Shape)
		if r == 0 {
			return c.Errorf("input is a scalar, %s needs rank >= 1", c.Op.Type)
		}
		axis, err := axisIndex(c, "attribute axis", c.Op.AttrInt("axis", 0), r)
		if err != nil {
			return err
		}
		outer, dim, inner := argSplit(x.Shape, axis)
		if y.DType != ir.Int64 || y.Len() != outer*inner {
			return c.Errorf("output is %v%v, want int64 with %d elements", y.DType, y.Shape, outer*inner)
		}
		if dim == 0 && outer*inner > 0 {
			return c.Errorf("axis %d has size 0: no index to return", axis)
		}
		last := c.Op.AttrInt("select_last_index", 0) != 0
		k := numOf(x.DType)
		if k == nil {
			return c.Errorf("element type %v is not supported", x.DType)
		}
		k.arg(x, viewAs[int64](y), outer, dim, inner, isMax, last)
		return nil
	}
}

func (numK[T, A]) arg(x *Tensor, idx []int64, outer, dim, inner int, isMax, last bool) {
	argIndex(viewAs[T](x), idx, outer, dim, inner, isMax, last)
}

// argIndex writes into idx[o*inner+j] the index along dim of the extreme
// of x[o, :, j]. Work goes in units of up to redChunk consecutive j so
// rows are read contiguously.
func argIndex[T elemNum](x []T, idx []int64, outer, dim, inner int, isMax, last bool) {
	chunks := (inner + redChunk - 1) / redChunk
	parRange(outer*chunks, dim*redChunk, func(u0, u1 int) {
		var best [redChunk]T
		for u := u0; u < u1; u++ {
			o, j0 := u/chunks, (u%chunks)*redChunk
			n := min(redChunk, inner-j0)
			b, ix := best[:n], idx[o*inner+j0:o*inner+j0+n]
			copy(b, x[o*dim*inner+j0:])
			for j := range ix {
				ix[j] = 0
			}
			for k := 1; k < dim; k++ {
				row := x[(o*dim+k)*inner+j0:][:n]
				for j, v := range row {
					var better bool
					switch {
					case isMax && last:
						better = v >= b[j]
					case isMax:
						better = v > b[j]
					case last:
						better = v <= b[j]
					default:
						better = v < b[j]
					}
					if better {
						b[j], ix[j] = v, int64(k)
					}
				}
			}
		}
	})
}

// hardmaxAxis is Hardmax's axis, normalised (opset 13 default -1).
func hardmaxAxis(c *Ctx, rank int) (int, error) {
	if rank == 0 {
		return 0, c.Errorf("input is a scalar, Hardmax needs rank >= 1")
	}
	return axisIndex(c, "attribute axis", c.Op.AttrInt("axis", -1), rank)
}

// hardmaxWorkspace is the argmax index buffer: one int64 per position
// off the axis.
func hardmaxWorkspace(op *ir.Op) int64 {
	x := op.Input(0)
	if x == nil || len(x.Shape) == 0 {
		return 0
	}
	a := op.AttrInt("axis", -1)
	r := int64(len(x.Shape))
	if a < 0 {
		a += r
	}
	if a < 0 || a >= r || x.Shape[a] == 0 {
		return 0
	}
	n, err := x.Shape.NumElements()
	if err != nil {
		return 0
	}
	return 8 * (n / x.Shape[a])
}

func hardmaxRun(c *Ctx) error {
	if err := ewSameShape(c, ir.Undefined); err != nil {
		return err
	}
	x, y := c.In[0], c.Out[0]
	var outer, dim, inner int
	if c.Opset > 0 && c.Opset < 13 {
		// Before opset 13: the input is coerced to 2-D at axis (default
		// 1) and the maximum is taken over the flattened trailing part.
		if len(x.Shape) == 0 {
			return c.Errorf("input is a scalar, Hardmax needs rank >= 1")
		}
		axis, err := axisIndex(c, "attribute axis", c.Op.AttrInt("axis", 1), len(x.Shape))
		if err != nil {
			return err
		}
		outer, dim, inner = shapeLen(x.Shape[:axis]), shapeLen(x.Shape[axis:]), 1
	} else {
		axis, err := hardmaxAxis(c, len(x.Shape))
		if err != nil {
			return err
		}
		outer, dim, inner = argSplit(x.Shape, axis)
	}
	if dim == 0 || outer*inner == 0 {
		return nil
	}
	need := 8 * outer * inner
	ws := c.Workspace
	if len(ws) < need {
		ws = make([]byte, need) // Eval without the declared scratch
	}
	idx := viewAs[int64](&Tensor{Data: ws[:need]})
	k := floatOf(x.DType)
	if k == nil {
		return c.Errorf("element type %v is not supported (float32 or float64)", x.DType)
	}
	k.hardmax(x, y, idx, outer, dim, inner)
	return nil
}

// hardmax sets y to 1 at the first maximum of x along dim, 0 elsewhere;
// idx is scratch for the maxima's indices.
func (floatK[T]) hardmax(xt, yt *Tensor, idx []int64, outer, dim, inner int) {
	argIndex(viewAs[T](xt), idx, outer, dim, inner, true, false)
	y := viewAs[T](yt)
	clear(y)
	for o := 0; o < outer; o++ {
		for j := 0; j < inner; j++ {
			y[(o*dim+int(idx[o*inner+j]))*inner+j] = 1
		}
	}
}
