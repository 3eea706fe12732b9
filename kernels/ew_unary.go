package kernels

import (
	"math"
	"slices"

	"github.com/tsplit/tsplit/ir"
	"github.com/tsplit/tsplit/kernels/internal/simd"
)

// Unary elementwise kernels: activations and math functions on float32
// and float64 (computed in float64 and rounded, so float32 results are
// as accurate as the format allows); the sign-only ops (Neg, Abs, Relu,
// Sign) also on signed integers. Clip, PRelu, Not, IsNaN and IsInf live
// here too.

// ewUnaryMath builds, from the op's attributes, the float64 function of a
// float-only unary op.
type ewUnaryMath func(c *Ctx) (func(float64) float64, error)

func ewFixed(f func(float64) float64) ewUnaryMath {
	return func(*Ctx) (func(float64) float64, error) { return f, nil }
}

func ewSigmoid(x float64) float64 {
	if x >= 0 {
		return 1 / (1 + math.Exp(-x))
	}
	e := math.Exp(x)
	return e / (1 + e)
}

func ewSoftplus(x float64) float64 {
	if x > 0 {
		return x + math.Log1p(math.Exp(-x))
	}
	return math.Log1p(math.Exp(x))
}

func ewSign(x float64) float64 {
	switch {
	case x > 0:
		return 1
	case x < 0:
		return -1
	}
	return x // ±0 or NaN
}

var ewUnaryOps = map[string]ewUnaryMath{
	"Relu":       ewFixed(func(x float64) float64 { return max(x, 0) }),
	"Neg":        ewFixed(func(x float64) float64 { return -x }),
	"Abs":        ewFixed(math.Abs),
	"Sign":       ewFixed(ewSign),
	"Sigmoid":    ewFixed(ewSigmoid),
	"Tanh":       ewFixed(math.Tanh),
	"Erf":        ewFixed(math.Erf),
	"Sqrt":       ewFixed(math.Sqrt),
	"Exp":        ewFixed(math.Exp),
	"Log":        ewFixed(math.Log),
	"Reciprocal": ewFixed(func(x float64) float64 { return 1 / x }),
	"Floor":      ewFixed(math.Floor),
	"Ceil":       ewFixed(math.Ceil),
	"Round":      ewFixed(math.RoundToEven),
	"Sin":        ewFixed(math.Sin),
	"Cos":        ewFixed(math.Cos),
	"Tan":        ewFixed(math.Tan),
	"Asin":       ewFixed(math.Asin),
	"Acos":       ewFixed(math.Acos),
	"Atan":       ewFixed(math.Atan),
	"Sinh":       ewFixed(math.Sinh),
	"Cosh":       ewFixed(math.Cosh),
	"Asinh":      ewFixed(math.Asinh),
	"Acosh":      ewFixed(math.Acosh),
	"Atanh":      ewFixed(math.Atanh),
	"Softplus":   ewFixed(ewSoftplus),
	"Softsign":   ewFixed(func(x float64) float64 { return x / (1 + math.Abs(x)) }),
	"HardSwish":  ewFixed(func(x float64) float64 { return x * max(0, min(1, x/6+0.5)) }),
	"Mish":       ewFixed(func(x float64) float64 { return x * math.Tanh(ewSoftplus(x)) }),
	"LeakyRelu": func(c *Ctx) (func(float64) float64, error) {
		a := float64(c.Op.AttrFloat("alpha", 0.01))
		return func(x float64) float64 {
			if x < 0 {
				return a * x
			}
			return x
		}, nil
	},
	"Gelu": func(c *Ctx) (func(float64) float64, error) {
		switch ap := c.Op.AttrString("approximate", "none"); ap {
		case "none":
			return func(x float64) float64 { return 0.5 * x * (1 + math.Erf(x/math.Sqrt2)) }, nil
		case "tanh":
			k := math.Sqrt(2 / math.Pi)
			return func(x float64) float64 { return 0.5 * x * (1 + math.Tanh(k*(x+0.044715*x*x*x))) }, nil
		default:
			return nil, c.Errorf("attribute approximate is %q, want \"none\" or \"tanh\"", ap)
		}
	},
	"HardSigmoid": func(c *Ctx) (func(float64) float64, error) {
		a, b := float64(c.Op.AttrFloat("alpha", 0.2)), float64(c.Op.AttrFloat("beta", 0.5))
		return func(x float64) float64 { return max(0, min(1, a*x+b)) }, nil
	},
	"Elu": func(c *Ctx) (func(float64) float64, error) {
		a := float64(c.Op.AttrFloat("alpha", 1))
		return func(x float64) float64 {
			if x < 0 {
				return a * math.Expm1(x)
			}
			return x
		}, nil
	},
	"Celu": func(c *Ctx) (func(float64) float64, error) {
		a := float64(c.Op.AttrFloat("alpha", 1))
		if a == 0 {
			return nil, c.Errorf("attribute alpha is 0")
		}
		return func(x float64) float64 { return max(0, x) + min(0, a*math.Expm1(x/a)) }, nil
	},
	"ThresholdedRelu": func(c *Ctx) (func(float64) float64, error) {
		a := float64(c.Op.AttrFloat("alpha", 1))
		return func(x float64) float64 {
			if x > a {
				return x
			}
			return 0
		}, nil
	},
	"Shrink": func(c *Ctx) (func(float64) float64, error) {
		l, b := float64(c.Op.AttrFloat("lambd", 0.5)), float64(c.Op.AttrFloat("bias", 0))
		return func(x float64) float64 {
			switch {
			case x < -l:
				return x + b
			case x > l:
				return x - b
			}
			return 0
		}, nil
	},
	"Selu": func(c *Ctx) (func(float64) float64, error) {
		a := float64(c.Op.AttrFloat("alpha", 1.67326319217681884765625))
		g := float64(c.Op.AttrFloat("gamma", 1.05070102214813232421875))
		return func(x float64) float64 {
			if x > 0 {
				return g * x
			}
			return g * a * math.Expm1(x)
		}, nil
	},
}

// ewSignOps are the unary ops also defined on signed integers.
var ewSignOps = map[string]bool{"Relu": true, "Neg": true, "Abs": true, "Sign": true}

func init() {
	for name, mk := range ewUnaryOps {
		dts := floatTypes
		if ewSignOps[name] {
			dts = signedTypes
		}
		regOp(name, 1, 1, dts, ewUnaryRun(name, mk))
	}
	regOp("Not", 1, 1, []ir.DType{ir.Bool}, ewNot)
	regOp("IsNaN", 1, 1, floatTypes, ewIsClass)
	regOp("IsInf", 1, 1, floatTypes, ewIsClass)
	regOp("PRelu", 2, 1, signedTypes, ewPReluRun)
	regOp("Clip", 1, 1, numTypes, ewClipRun)
}

// ewSameShape checks the output matches input 0 in element count and,
// when want is not Undefined, has dtype want.
func ewSameShape(c *Ctx, want ir.DType) error {
	x, y := c.In[0], c.Out[0]
	if !x.Shape.Equal(y.Shape) {
		return c.Errorf("output shape %v differs from input shape %v", y.Shape, x.Shape)
	}
	if want == ir.Undefined {
		want = x.DType
	}
	if y.DType != want {
		return c.Errorf("output type %v, want %v", y.DType, want)
	}
	return nil
}

func ewUnaryRun(name string, mk ewUnaryMath) func(c *Ctx) error {
	return func(c *Ctx) error {
		if err := ewSameShape(c, ir.Undefined); err != nil {
			return err
		}
		x, y := c.In[0], c.Out[0]
		if k := floatOf(x.DType); k != nil {
			return k.unary(c, name, mk, y, x)
		}
		if !ewSignOps[name] {
			return c.Errorf("element type %v is not supported (float32 or float64)", x.DType)
		}
		if !slices.Contains(signedTypes, x.DType) {
			return c.Errorf("element type %v is not supported", x.DType)
		}
		numOf(x.DType).signOp(name, y, x)
		return nil
	}
}

// ewUnaryNumKernels are the typed bodies of this file's numeric kernels.
type ewUnaryNumKernels interface {
	signOp(name string, y, x *Tensor)
	prelu(w *ndWalk, y, x, s *Tensor)
	clip(c *Ctx, bounds [2]*Tensor, attr [2]*ir.Attr)
}

// ewFloatKernels are the typed bodies of this file's float kernels.
type ewFloatKernels interface {
	unary(c *Ctx, name string, mk ewUnaryMath, y, x *Tensor) error
	isClass(test func(float64) bool, y []byte, x *Tensor)
}

func (floatK[T]) unary(c *Ctx, name string, mk ewUnaryMath, yt, xt *Tensor) error {
	y, x := viewAs[T](yt), viewAs[T](xt)
	// Cheap ops get direct loops; the rest go through float64.
	switch name {
	case "Relu":
		parRange(len(x), 1, func(lo, hi int) {
			ys := y[lo:hi]
			if nnIs32[T]() {
				simd.Relu(nnAs[float32](ys), nnAs[float32](x[lo:hi]))
				return
			}
			for i, v := range x[lo:hi] {
				ys[i] = max(v, 0) // branch-free; NaN stays NaN, -0 becomes +0
			}
		})
		return nil
	case "Neg":
		parRange(len(x), 1, func(lo, hi int) {
			for i, v := range x[lo:hi] {
				y[lo+i] = -v
			}
		})
		return nil
	case "Abs":
		parRange(len(x), 1, func(lo, hi int) {
			for i, v := range x[lo:hi] {
				y[lo+i] = T(math.Abs(float64(v)))
			}
		})
		return nil
	case "LeakyRelu":
		a := T(c.Op.AttrFloat("alpha", 0.01))
		parRange(len(x), 1, func(lo, hi int) {
			for i, v := range x[lo:hi] {
				if v < 0 {
					v *= a
				}
				y[lo+i] = v
			}
		})
		return nil
	}
	f, err := mk(c)
	if err != nil {
		return err
	}
	parRange(len(x), 16, func(lo, hi int) {
		for i, v := range x[lo:hi] {
			y[lo+i] = T(f(float64(v)))
		}
	})
	return nil
}

// signOp runs Relu, Neg, Abs or Sign on integers (signed ones: the
// kernel checks; the body compiles for every numeric T).
func (numK[T, A]) signOp(name string, yt, xt *Tensor) {
	y, x := viewAs[T](yt), viewAs[T](xt)
	var one T = 1
	parRange(len(x), 1, func(lo, hi int) {
		ys, xs := y[lo:hi], x[lo:hi]
		switch name {
		case "Relu":
			for i, v := range xs {
				ys[i] = max(v, 0)
			}
		case "Neg":
			for i, v := range xs {
				ys[i] = -v
			}
		case "Abs":
			for i, v := range xs {
				if v < 0 {
					v = -v
				}
				ys[i] = v
			}
		case "Sign":
			for i, v := range xs {
				switch {
				case v > 0:
					ys[i] = 1
				case v < 0:
					ys[i] = -one
				default:
					ys[i] = 0
				}
			}
		}
	})
}

func ewNot(c *Ctx) error {
	if err := ewSameShape(c, ir.Bool); err != nil {
		return err
	}
	if c.In[0].DType != ir.Bool {
		return c.Errorf("input type %v, Not takes bool", c.In[0].DType)
	}
	x, y := c.In[0].Data, c.Out[0].Data
	parRange(len(x), 1, func(lo, hi int) {
		for i, v := range x[lo:hi] {
			y[lo+i] = b2byte(v == 0)
		}
	})
	return nil
}

func b2byte(b bool) byte {
	if b {
		return 1
	}
	return 0
}

func ewIsClass(c *Ctx) error {
	if err := ewSameShape(c, ir.Bool); err != nil {
		return err
	}
	neg, pos := c.Op.AttrInt("detect_negative", 1) != 0, c.Op.AttrInt("detect_positive", 1) != 0
	nan := c.Op.Type == "IsNaN"
	test := func(v float64) bool {
		if nan {
			return v != v
		}
		return (pos && math.IsInf(v, 1)) || (neg && math.IsInf(v, -1))
	}
	k := floatOf(c.In[0].DType)
	if k == nil {
		return c.Errorf("element type %v is not supported (float32 or float64)", c.In[0].DType)
	}
	k.isClass(test, c.Out[0].Data, c.In[0])
	return nil
}

func (floatK[T]) isClass(test func(float64) bool, y []byte, xt *Tensor) {
	xs := viewAs[T](xt)
	parRange(len(xs), 1, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			y[i] = b2byte(test(float64(xs[i])))
		}
	})
}

// ewPReluRun: Y = X where X >= 0, slope*X elsewhere; slope broadcasts to X.
func ewPReluRun(c *Ctx) error {
	if err := ewSameShape(c, ir.Undefined); err != nil {
		return err
	}
	x, s, y := c.In[0], c.In[1], c.Out[0]
	if s.DType != x.DType {
		return c.Errorf("slope type %v differs from input type %v", s.DType, x.DType)
	}
	if b, err := ir.Broadcast(x.Shape, s.Shape); err != nil || !b.Equal(x.Shape) {
		return c.Errorf("slope of shape %v does not broadcast to %v", s.Shape, x.Shape)
	}
	w := newWalk(y.Shape, contigStrides(y.Shape), contigStrides(x.Shape), bcastStrides(s.Shape, y.Shape))
	if !slices.Contains(signedTypes, x.DType) {
		return c.Errorf("element type %v is not supported", x.DType)
	}
	numOf(x.DType).prelu(w, y, x, s)
	return nil
}

func (numK[T, A]) prelu(w *ndWalk, yt, xt, st *Tensor) {
	y, x, s := viewAs[T](yt), viewAs[T](xt), viewAs[T](st)
	ss := w.inner(2)
	w.par(nil, func(off []int, n int) {
		ys, xs := y[off[0]:off[0]+n], x[off[1]:off[1]+n]
		for i, v := range xs {
			if v < 0 {
				v *= s[off[2]+i*ss]
			}
			ys[i] = v
		}
	})
}

// ewClipRun clamps to [min, max]: bounds are the optional scalar inputs 1
// and 2 (opset >= 11) or the float attributes min/max (opset 6); absent
// bounds do not clamp.
func ewClipRun(c *Ctx) error {
	if err := ewSameShape(c, ir.Undefined); err != nil {
		return err
	}
	x := c.In[0]
	var bounds [2]*Tensor
	for i := range bounds {
		if b := optIn(c, i+1); b != nil {
			if b.DType != x.DType || b.Len() != 1 {
				return c.Errorf("input %d is %v%v, want a scalar of type %v", i+1, b.DType, b.Shape, x.DType)
			}
			bounds[i] = b
		}
	}
	attr := [2]*ir.Attr{c.Op.Attr("min"), c.Op.Attr("max")}
	k := numOf(x.DType)
	if k == nil {
		return c.Errorf("element type %v is not supported", x.DType)
	}
	k.clip(c, bounds, attr)
	return nil
}

// clip clamps to the bounds given (inputs, else attributes); absent
// ones are T's lowest and highest values.
func (numK[T, A]) clip(c *Ctx, bounds [2]*Tensor, attr [2]*ir.Attr) {
	lo, hi := elemLimits[T]()
	lim := [2]*T{&lo, &hi}
	for i, b := range bounds {
		switch {
		case b != nil:
			*lim[i] = viewAs[T](b)[0]
		case attr[i] != nil:
			*lim[i] = T(attr[i].Float)
		}
	}
	x, y := viewAs[T](c.In[0]), viewAs[T](c.Out[0])
	parRange(len(x), 1, func(lo_, hi_ int) {
		for i, v := range x[lo_:hi_] {
			// min(max(x, lo), hi), as the spec writes it (lo > hi gives hi).
			if v < lo {
				v = lo
			}
			if v > hi {
				v = hi
			}
			y[lo_+i] = v
		}
	})
}
