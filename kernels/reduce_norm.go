package kernels

import "github.com/tsplit/tsplit/ir"

// InstanceNormalization: for every (n, c) plane of X (N, C, D1, ...),
// Y = scale[c] * (X - mean) / sqrt(var + epsilon) + B[c], with the mean
// and the (population) variance of the plane, computed in float64.
//
// It sits in the IR's nn family but is not among the nn_* kernels;
// the registration defers to an nn_* kernel should one appear (nn_*.go
// files initialise before reduce_*.go).

func init() {
	regIfAbsent("InstanceNormalization", 3, 1, floatTypes, instNormRun)
}

func instNormRun(c *Ctx) error {
	if err := ewSameShape(c, ir.Undefined); err != nil {
		return err
	}
	x, scale, bias := c.In[0], c.In[1], c.In[2]
	if len(x.Shape) < 3 {
		return c.Errorf("input has rank %d, want at least 3 (N, C, D1, ...)", len(x.Shape))
	}
	ch := int(x.Shape[1])
	for i, t := range []*Tensor{scale, bias} {
		if t.DType != x.DType || t.Len() != ch {
			return c.Errorf("input %d is %v%v, want %d values of type %v", i+1, t.DType, t.Shape, ch, x.DType)
		}
	}
	eps := float64(c.Op.AttrFloat("epsilon", 1e-5))
	sz := shapeLen(x.Shape[2:])
	if sz == 0 || x.Len() == 0 {
		return nil
	}
	k := floatOf(x.DType)
	if k == nil {
		return c.Errorf("element type %v is not supported (float32 or float64)", x.DType)
	}
	k.instNorm(c.Out[0], x, scale, bias, ch, sz, eps)
	return nil
}

// instNorm normalises each of the planes of x of size sz.
func (floatK[T]) instNorm(yt, xt, st, bt *Tensor, ch, sz int, eps float64) {
	y, x, scale, bias := viewAs[T](yt), viewAs[T](xt), viewAs[T](st), viewAs[T](bt)
	planes := len(x) / sz
	parRange(planes, sz, func(p0, p1 int) {
		for p := p0; p < p1; p++ {
			xs, ys := x[p*sz:(p+1)*sz], y[p*sz:(p+1)*sz]
			mean, inv := meanInvStd(xs, eps)
			a := float64(scale[p%ch]) * inv
			b := float64(bias[p%ch]) - mean*a
			for i, v := range xs {
				ys[i] = T(float64(v)*a + b)
			}
		}
	})
}
