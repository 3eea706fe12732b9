package kernels

import (
	"fmt"
	"math"

	"github.com/tsplit/tsplit/ir"
)

// Softmax and LogSoftmax.
//
// Opset 13 changed their meaning: from 13 on they normalise along the
// single dimension axis (default -1); before 13 the input is coerced to
// 2-D, (prod(shape[:axis]), prod(shape[axis:])) with axis default 1, and
// each row of that matrix is normalised. The kernel reads the model's
// opset from Ctx.Opset; an unknown opset (0) counts as 13 or later. Both
// readings agree whenever axis is the last dimension.

func init() {
	nnReg("Softmax", 1, 1, Kernel{Run: func(c *Ctx) error { return runSoftmax(c, false) }}, nil)
	nnReg("LogSoftmax", 1, 1, Kernel{Run: func(c *Ctx) error { return runSoftmax(c, true) }}, nil)
}

// softmaxDims views shape as (outer, n, inner) with the normalised
// dimension n: opset >= 13 (legacy false) normalises shape[axis];
// legacy (opset < 13) normalises the flattened shape[axis:].
func softmaxDims(shape ir.Shape, axis int64, legacy bool) (outer, n, inner int, err error) {
	r := int64(len(shape))
	if axis < -r || axis >= r {
		return 0, 0, 0, fmt.Errorf("axis %d out of range for rank %d", axis, r)
	}
	if axis < 0 {
		axis += r
	}
	if legacy {
		return nnVol(shape[:axis]), nnVol(shape[axis:]), 1, nil
	}
	return nnVol(shape[:axis]), int(shape[axis]), nnVol(shape[axis+1:]), nil
}

func runSoftmax(c *Ctx, log bool) error {
	legacy := c.Opset > 0 && c.Opset < 13
	def := int64(-1)
	if legacy {
		def = 1
	}
	outer, n, inner, err := softmaxDims(c.In[0].Shape, c.Op.AttrInt("axis", def), legacy)
	if err != nil {
		return c.Errorf("%v", err)
	}
	nnFloat(c).softmax(c.In[0], c.Out[0], outer, n, inner, log)
	return nil
}

// softmax normalises x, viewed as (outer, n, inner), along n into y.
func (floatK[T]) softmax(xt, yt *Tensor, outer, n, inner int, log bool) {
	x, y := viewAs[T](xt), viewAs[T](yt)
	if n == 0 {
		return
	}
	Parallel(outer*inner, func(lo, hi int) {
		for col := lo; col < hi; col++ {
			o, i := col/inner, col%inner
			base := o*n*inner + i
			mx := T(math.Inf(-1))
			for j := 0; j < n; j++ {
				if v := x[base+j*inner]; v > mx {
					mx = v
				}
			}
			if math.IsInf(float64(mx), -1) {
				mx = 0 // every entry -inf: no finite shift exists
			}
			var sum float64
			if log {
				for j := 0; j < n; j++ {
					sum += math.Exp(float64(x[base+j*inner] - mx))
				}
				shift := mx + T(math.Log(sum))
				for j := 0; j < n; j++ {
					k := base + j*inner
					y[k] = x[k] - shift
				}
				continue
			}
			for j := 0; j < n; j++ {
				k := base + j*inner
				e := math.Exp(float64(x[k] - mx))
				y[k] = T(e)
				sum += e
			}
			inv := T(1 / sum)
			for j := 0; j < n; j++ {
				y[base+j*inner] *= inv
			}
		}
	})
}
