package kernels

import "github.com/tsplit/tsplit/ir"

// Concat and Split on any byte-sized type: both are, for each index of
// the dimensions before the axis, a sequence of contiguous block copies.
// Split's sizes (attribute split, input 1, num_outputs or an even split,
// depending on the opset) are already in its output shapes.

func init() {
	regOp("Concat", 1, 1, byteTypes, shConcatRun)
	regOp("Split", 1, 1, byteTypes, shSplitRun)
}

// shBlocks checks that parts differ from whole only along axis, with
// sizes summing to whole's, and returns the block byte sizes: for each
// outer index, part k is block[k] bytes.
func shBlocks(c *Ctx, whole *Tensor, parts []*Tensor, axis int) (outer int, block []int, err error) {
	es := esize(whole.DType)
	if es == 0 {
		return 0, nil, c.Errorf("element type %v is not supported", whole.DType)
	}
	inner := shapeLen(whole.Shape[axis+1:]) * es
	sum := int64(0)
	block = make([]int, len(parts))
	for k, p := range parts {
		if p == nil {
			return 0, nil, c.Errorf("part %d is missing", k)
		}
		if p.DType != whole.DType || len(p.Shape) != len(whole.Shape) {
			return 0, nil, c.Errorf("part %d is %v%v, the whole is %v%v", k, p.DType, p.Shape, whole.DType, whole.Shape)
		}
		for d := range p.Shape {
			if d != axis && p.Shape[d] != whole.Shape[d] {
				return 0, nil, c.Errorf("part %d has shape %v, the whole %v; they may differ only on axis %d", k, p.Shape, whole.Shape, axis)
			}
		}
		sum += p.Shape[axis]
		block[k] = int(p.Shape[axis]) * inner
	}
	if sum != whole.Shape[axis] {
		return 0, nil, c.Errorf("parts sum to %d along axis %d, the whole has %d", sum, axis, whole.Shape[axis])
	}
	return shapeLen(whole.Shape[:axis]), block, nil
}

// shConcatAxis normalises the axis attribute (required for Concat,
// default 0 for Split).
func shConcatAxis(c *Ctx, shape ir.Shape, def *int64) (int, error) {
	a := c.Op.Attr("axis")
	var v int64
	switch {
	case a != nil:
		v = a.Int
	case def != nil:
		v = *def
	default:
		return 0, c.Errorf("attribute axis is required")
	}
	if len(shape) == 0 {
		return 0, c.Errorf("%s needs tensors of rank >= 1", c.Op.Type)
	}
	return axisIndex(c, "attribute axis", v, len(shape))
}

func shConcatRun(c *Ctx) error { return shBlockCopy(c, c.Out[0], c.In, nil, false) }

func shSplitRun(c *Ctx) error {
	zero := int64(0)
	return shBlockCopy(c, c.In[0], c.Out, &zero, true)
}

// shBlockCopy copies, for each index of the dimensions before the axis,
// whole's row to the parts' blocks (split) or the blocks into it;
// defAxis is the axis when the attribute is absent (nil: required).
func shBlockCopy(c *Ctx, whole *Tensor, parts []*Tensor, defAxis *int64, split bool) error {
	axis, err := shConcatAxis(c, whole.Shape, defAxis)
	if err != nil {
		return err
	}
	outer, block, err := shBlocks(c, whole, parts, axis)
	if err != nil {
		return err
	}
	row := 0
	for _, b := range block {
		row += b
	}
	parRange(outer, row/8, func(o0, o1 int) {
		for o := o0; o < o1; o++ {
			at := o * row
			for k, b := range block {
				w, p := whole.Data[at:at+b], parts[k].Data[o*b:(o+1)*b]
				if split {
					copy(p, w)
				} else {
					copy(w, p)
				}
				at += b
			}
		}
	})
	return nil
}
