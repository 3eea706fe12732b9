package kernels

import (
	"math"
	"slices"

	"github.com/tsplit/tsplit/ir"
)

// Broadcasting elementwise kernels: arithmetic (Add, Sub, Mul, Div, Pow,
// Mod) and the variadic Sum/Mean/Max/Min on every numeric type,
// comparisons giving bool, the logical And/Or/Xor on bool, and Where.
// All of them run on an ndWalk over the output shape, so broadcasting
// costs nothing when inputs already have the output's shape (one long
// contiguous run) and a broadcast operand is a stride-0 read.

// Arithmetic codes.
const (
	ewAdd = iota
	ewSub
	ewMul
	ewDiv
	ewMax
	ewMin
	ewMod  // integer modulus with the divisor's sign (Mod fmod=0)
	ewFMod // remainder with the dividend's sign (C fmod; Mod fmod=1)
)

// Comparison and logic codes.
const (
	ewEq = iota
	ewLt
	ewGt
	ewLe
	ewGe
	ewAnd
	ewOr
	ewXor
)

func init() {
	for name, op := range map[string]int{"Add": ewAdd, "Sub": ewSub, "Mul": ewMul, "Div": ewDiv} {
		regOp(name, 2, 1, numTypes, ewArithRun(op))
	}
	regOp("Mod", 2, 1, numTypes, ewModRun)
	regOp("Pow", 2, 1, numTypes, ewPowRun)
	cmpTypes := append(append([]ir.DType{}, numTypes...), ir.Bool)
	for name, op := range map[string]int{"Equal": ewEq, "Less": ewLt, "Greater": ewGt, "LessOrEqual": ewLe, "GreaterOrEqual": ewGe} {
		regOp(name, 2, 1, cmpTypes, ewCmpRun(op))
	}
	for name, op := range map[string]int{"And": ewAnd, "Or": ewOr, "Xor": ewXor} {
		regOp(name, 2, 1, []ir.DType{ir.Bool}, ewCmpRun(op))
	}
	for name, op := range map[string]int{"Sum": ewAdd, "Mean": ewAdd, "Max": ewMax, "Min": ewMin} {
		regOp(name, 1, 1, numTypes, ewVariadicRun(op))
	}
	regOp("Where", 3, 1, []ir.DType{ir.Bool}, ewWhereRun)
}

// ewBroadcastWalk checks that the output has the broadcast shape of the
// inputs idx and returns the walk over it: operand 0 is the output,
// operand k+1 is input idx[k].
func ewBroadcastWalk(c *Ctx, idx ...int) (*ndWalk, error) {
	shapes := make([]ir.Shape, len(idx))
	for k, i := range idx {
		shapes[k] = c.In[i].Shape
	}
	y := c.Out[0]
	b, err := ir.Broadcast(shapes...)
	if err != nil {
		return nil, c.Errorf("%v", err)
	}
	if !b.Equal(y.Shape) {
		return nil, c.Errorf("output shape %v, the inputs broadcast to %v", y.Shape, b)
	}
	st := make([][]int, 0, len(idx)+1)
	st = append(st, contigStrides(y.Shape))
	for _, s := range shapes {
		st = append(st, bcastStrides(s, y.Shape))
	}
	return newWalk(y.Shape, st...), nil
}

// ewSameTypes checks inputs idx share input idx[0]'s type and the output
// has type out (Undefined: that same type).
func ewSameTypes(c *Ctx, out ir.DType, idx ...int) error {
	dt := c.In[idx[0]].DType
	for _, i := range idx[1:] {
		if c.In[i].DType != dt {
			return c.Errorf("input %d has type %v, input %d has %v; they must match", i, c.In[i].DType, idx[0], dt)
		}
	}
	if out == ir.Undefined {
		out = dt
	}
	if c.Out[0].DType != out {
		return c.Errorf("output type %v, want %v", c.Out[0].DType, out)
	}
	return nil
}

func ewArithRun(op int) func(c *Ctx) error {
	return func(c *Ctx) error { return ewArithOp(c, op) }
}

func ewModRun(c *Ctx) error {
	op := ewMod
	if c.Op.AttrInt("fmod", 0) != 0 {
		op = ewFMod
	} else if c.In[0].DType.IsFloat() {
		return c.Errorf("Mod of floating-point type %v needs attribute fmod=1", c.In[0].DType)
	}
	return ewArithOp(c, op)
}

func ewArithOp(c *Ctx, op int) error {
	if err := ewSameTypes(c, ir.Undefined, 0, 1); err != nil {
		return err
	}
	w, err := ewBroadcastWalk(c, 0, 1)
	if err != nil {
		return err
	}
	a, b, y := c.In[0], c.In[1], c.Out[0]
	if (op == ewDiv || op == ewMod || op == ewFMod) && !a.DType.IsFloat() && ewHasZero(b) {
		return c.Errorf("integer division by zero")
	}
	k := numOf(a.DType)
	if k == nil {
		return c.Errorf("element type %v is not supported", a.DType)
	}
	k.arith(op, w, y, a, b)
	return nil
}

// ewHasZero reports whether an integer tensor holds a zero.
func ewHasZero(t *Tensor) bool {
	es := esize(t.DType)
	for i := 0; i+es <= len(t.Data); i += es {
		zero := true
		for _, b := range t.Data[i : i+es] {
			if b != 0 {
				zero = false
				break
			}
		}
		if zero {
			return true
		}
	}
	return false
}

// ewNumKernels are the typed bodies of this file's numeric kernels.
type ewNumKernels interface {
	arith(op int, w *ndWalk, y, a, b *Tensor)
	pow(w *ndWalk, y, a *Tensor, exp func(int) float64)
	float64s(t *Tensor) func(i int) float64
	cmp(op int, w *ndWalk, y []byte, a, b *Tensor)
	scaleDown(y *Tensor, n int)
}

// ewWordKernels are the typed bodies of this file's data-moving kernels.
type ewWordKernels interface {
	where(w *ndWalk, y *Tensor, cond []byte, x, z *Tensor)
}

// arith runs y = a op b over walk w (operands y, a, b). y may alias a
// (the variadic ops accumulate in place).
func (numK[T, A]) arith(op int, w *ndWalk, yt, at, bt *Tensor) {
	y, a, b := viewAs[T](yt), viewAs[T](at), viewAs[T](bt)
	sa, sb := w.inner(1), w.inner(2)
	w.par(nil, func(off []int, n int) {
		ys := y[off[0] : off[0]+n]
		ia, ib := off[1], off[2]
		switch {
		case sa == 1 && sb == 1:
			ewVV(op, ys, a[ia:ia+n], b[ib:ib+n])
		case sa == 1 && sb == 0:
			ewVS(op, ys, a[ia:ia+n], b[ib])
		case sa == 0 && sb == 1:
			ewSV(op, ys, a[ia], b[ib:ib+n])
		default:
			for i := range ys {
				ys[i] = ewScalar(op, a[ia+i*sa], b[ib+i*sb])
			}
		}
	})
}

func ewVV[T elemNum](op int, y, a, b []T) {
	a, b = a[:len(y)], b[:len(y)]
	switch op {
	case ewAdd:
		for i := range y {
			y[i] = a[i] + b[i]
		}
	case ewSub:
		for i := range y {
			y[i] = a[i] - b[i]
		}
	case ewMul:
		for i := range y {
			y[i] = a[i] * b[i]
		}
	case ewDiv:
		for i := range y {
			y[i] = a[i] / b[i]
		}
	default:
		for i := range y {
			y[i] = ewScalar(op, a[i], b[i])
		}
	}
}

func ewVS[T elemNum](op int, y, a []T, b T) {
	a = a[:len(y)]
	switch op {
	case ewAdd:
		for i := range y {
			y[i] = a[i] + b
		}
	case ewSub:
		for i := range y {
			y[i] = a[i] - b
		}
	case ewMul:
		for i := range y {
			y[i] = a[i] * b
		}
	case ewDiv:
		for i := range y {
			y[i] = a[i] / b
		}
	default:
		for i := range y {
			y[i] = ewScalar(op, a[i], b)
		}
	}
}

func ewSV[T elemNum](op int, y []T, a T, b []T) {
	b = b[:len(y)]
	switch op {
	case ewAdd:
		for i := range y {
			y[i] = a + b[i]
		}
	case ewSub:
		for i := range y {
			y[i] = a - b[i]
		}
	case ewMul:
		for i := range y {
			y[i] = a * b[i]
		}
	case ewDiv:
		for i := range y {
			y[i] = a / b[i]
		}
	default:
		for i := range y {
			y[i] = ewScalar(op, a, b[i])
		}
	}
}

func ewScalar[T elemNum](op int, x, y T) T {
	switch op {
	case ewAdd:
		return x + y
	case ewSub:
		return x - y
	case ewMul:
		return x * y
	case ewDiv:
		return x / y
	case ewMax:
		return max(x, y)
	case ewMin:
		return min(x, y)
	case ewMod, ewFMod:
		return ewRem(op, x, y)
	}
	return 0
}

// ewRem is Mod: for integers, the remainder takes the divisor's sign
// (fmod=0) or the dividend's (fmod=1); floats always use C fmod.
func ewRem[T elemNum](op int, x, y T) T {
	if isFloat[T]() {
		return T(math.Mod(float64(x), float64(y)))
	}
	// x % y, which Go does not define on a type parameter that admits
	// floats: integer division truncates, and x == (x/y)*y + x%y holds
	// for every x and y != 0, even with overflow (MinInt/-1).
	r := x - (x/y)*y
	if op == ewMod && r != 0 && (r < 0) != (y < 0) {
		r += y
	}
	return r
}

// ewPowRun: Y = A^B. The exponent may have another numeric type than
// the base; the result has the base's type (integer results truncate,
// as onnxruntime's std::pow and cast do).
func ewPowRun(c *Ctx) error {
	a, b, y := c.In[0], c.In[1], c.Out[0]
	if y.DType != a.DType {
		return c.Errorf("output type %v, want the base type %v", y.DType, a.DType)
	}
	w, err := ewBroadcastWalk(c, 0, 1)
	if err != nil {
		return err
	}
	if !slices.Contains(ewPowTypes, b.DType) {
		return c.Errorf("exponent type %v is not supported", b.DType)
	}
	if a.DType == ir.Float && b.DType == ir.Float {
		ewPowSame(w, viewAs[float32](y), viewAs[float32](a), viewAs[float32](b))
		return nil
	}
	if !slices.Contains(ewPowTypes, a.DType) {
		return c.Errorf("base type %v is not supported", a.DType)
	}
	numOf(a.DType).pow(w, y, a, numOf(b.DType).float64s(b))
	return nil
}

// ewPowTypes are the base and exponent types Pow supports.
var ewPowTypes = []ir.DType{ir.Float, ir.Double, ir.Int64, ir.Int32, ir.Int16, ir.Int8, ir.Uint8}

// float64s reads t's elements as float64s.
func (numK[T, A]) float64s(t *Tensor) func(i int) float64 {
	v := viewAs[T](t)
	return func(i int) float64 { return float64(v[i]) }
}

// ewPowSame is the float32^float32 path, with the common squares and
// square roots done without math.Pow.
func ewPowSame(w *ndWalk, y, a, b []float32) {
	sa, sb := w.inner(1), w.inner(2)
	w.par(nil, func(off []int, n int) {
		ys := y[off[0] : off[0]+n]
		ia, ib := off[1], off[2]
		if sb == 0 {
			e := b[ib]
			switch e {
			case 2:
				for i := range ys {
					x := a[ia+i*sa]
					ys[i] = x * x
				}
				return
			case 1:
				for i := range ys {
					ys[i] = a[ia+i*sa]
				}
				return
			}
		}
		for i := range ys {
			ys[i] = float32(math.Pow(float64(a[ia+i*sa]), float64(b[ib+i*sb])))
		}
	})
}

func (numK[T, A]) pow(w *ndWalk, yt, at *Tensor, exp func(int) float64) {
	y, a := viewAs[T](yt), viewAs[T](at)
	sa, sb := w.inner(1), w.inner(2)
	w.par(nil, func(off []int, n int) {
		ys := y[off[0] : off[0]+n]
		for i := range ys {
			ys[i] = T(math.Pow(float64(a[off[1]+i*sa]), exp(off[2]+i*sb)))
		}
	})
}

func ewCmpRun(op int) func(c *Ctx) error {
	return func(c *Ctx) error {
		if err := ewSameTypes(c, ir.Bool, 0, 1); err != nil {
			return err
		}
		w, err := ewBroadcastWalk(c, 0, 1)
		if err != nil {
			return err
		}
		a, b, y := c.In[0], c.In[1], c.Out[0].Data
		if op >= ewAnd && a.DType != ir.Bool {
			return c.Errorf("input type %v, %s takes bool", a.DType, c.Op.Type)
		}
		if a.DType == ir.Bool {
			ewLogic(op, w, y, a.Data, b.Data)
			return nil
		}
		k := numOf(a.DType)
		if k == nil {
			return c.Errorf("element type %v is not supported", a.DType)
		}
		k.cmp(op, w, y, a, b)
		return nil
	}
}

func (numK[T, A]) cmp(op int, w *ndWalk, y []byte, at, bt *Tensor) {
	a, b := viewAs[T](at), viewAs[T](bt)
	sa, sb := w.inner(1), w.inner(2)
	w.par(nil, func(off []int, n int) {
		ys := y[off[0] : off[0]+n]
		ia, ib := off[1], off[2]
		switch op {
		case ewEq:
			for i := range ys {
				ys[i] = b2byte(a[ia+i*sa] == b[ib+i*sb])
			}
		case ewLt:
			for i := range ys {
				ys[i] = b2byte(a[ia+i*sa] < b[ib+i*sb])
			}
		case ewGt:
			if sa == 1 && sb == 0 { // x > scalar (a ReLU gradient's mask)
				as, bv := a[ia:ia+n], b[ib]
				for i := range ys {
					ys[i] = b2byte(as[i] > bv)
				}
				return
			}
			for i := range ys {
				ys[i] = b2byte(a[ia+i*sa] > b[ib+i*sb])
			}
		case ewLe:
			for i := range ys {
				ys[i] = b2byte(a[ia+i*sa] <= b[ib+i*sb])
			}
		case ewGe:
			for i := range ys {
				ys[i] = b2byte(a[ia+i*sa] >= b[ib+i*sb])
			}
		}
	})
}

// ewLogic compares or combines bools, reading any non-zero byte as true.
func ewLogic(op int, w *ndWalk, y, a, b []byte) {
	sa, sb := w.inner(1), w.inner(2)
	w.par(nil, func(off []int, n int) {
		ys := y[off[0] : off[0]+n]
		for i := range ys {
			x, z := a[off[1]+i*sa] != 0, b[off[2]+i*sb] != 0
			var r bool
			switch op {
			case ewEq:
				r = x == z
			case ewLt:
				r = !x && z
			case ewGt:
				r = x && !z
			case ewLe:
				r = !x || z
			case ewGe:
				r = x || !z
			case ewAnd:
				r = x && z
			case ewOr:
				r = x || z
			case ewXor:
				r = x != z
			}
			ys[i] = b2byte(r)
		}
	})
}

// ewVariadicRun: Sum, Mean, Max and Min of any number of broadcast
// inputs. The output is initialised with input 0 broadcast, then each
// further input is combined into it in place.
func ewVariadicRun(op int) func(c *Ctx) error {
	return func(c *Ctx) error {
		n := len(c.In)
		idx := make([]int, n)
		for i := range idx {
			if c.In[i] == nil {
				return c.Errorf("input %d is missing", i)
			}
			idx[i] = i
		}
		if err := ewSameTypes(c, ir.Undefined, idx...); err != nil {
			return err
		}
		if _, err := ewBroadcastWalk(c, idx...); err != nil {
			return err
		}
		y := c.Out[0]
		dt := y.DType
		es := esize(dt)
		if es == 0 {
			return c.Errorf("element type %v is not supported", dt)
		}
		x0 := c.In[0]
		moveWalk(newWalk(y.Shape, contigStrides(y.Shape), bcastStrides(x0.Shape, y.Shape)), y, x0, es, nil)
		k := numOf(dt)
		if k == nil && n > 1 {
			return c.Errorf("element type %v is not supported", dt)
		}
		for i := 1; i < n; i++ {
			x := c.In[i]
			k.arith(op, newWalk(y.Shape, contigStrides(y.Shape), contigStrides(y.Shape), bcastStrides(x.Shape, y.Shape)), y, y, x)
		}
		if c.Op.Type == "Mean" && n > 1 {
			k.scaleDown(y, n)
		}
		return nil
	}
}

func (numK[T, A]) scaleDown(yt *Tensor, n int) {
	y := viewAs[T](yt)
	d := T(n)
	parRange(len(y), 1, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			y[i] /= d
		}
	})
}

// ewWhereRun: Y = condition ? X : Y, all three broadcast; X and Y may
// have any byte-sized type.
func ewWhereRun(c *Ctx) error {
	if c.In[0].DType != ir.Bool {
		return c.Errorf("condition has type %v, want bool", c.In[0].DType)
	}
	if err := ewSameTypes(c, ir.Undefined, 1, 2); err != nil {
		return err
	}
	w, err := ewBroadcastWalk(c, 0, 1, 2)
	if err != nil {
		return err
	}
	cond, x, z, y := c.In[0].Data, c.In[1], c.In[2], c.Out[0]
	k := wordOf(esize(y.DType))
	if k == nil {
		return c.Errorf("element type %v is not supported", y.DType)
	}
	k.where(w, y, cond, x, z)
	return nil
}

func (wordK[T]) where(w *ndWalk, yt *Tensor, cond []byte, xt, zt *Tensor) {
	y, x, z := viewAs[T](yt), viewAs[T](xt), viewAs[T](zt)
	sc, sx, sz := w.inner(1), w.inner(2), w.inner(3)
	w.par(nil, func(off []int, n int) {
		ys := y[off[0] : off[0]+n]
		if sc == 1 && sx == 1 && (sz == 0 || sz == 1) {
			// The common runs (a ReLU gradient: Where(y > 0, dy, 0)):
			// contiguous condition and X, Y contiguous or a scalar.
			cs, xs := cond[off[1]:off[1]+n], x[off[2]:off[2]+n]
			// Both values are loaded before the choice, so that it
			// compiles to a conditional move, not a mispredicted branch.
			if sz == 0 {
				zv := z[off[3]]
				for i, c := range cs {
					v, xv := zv, xs[i]
					if c != 0 {
						v = xv
					}
					ys[i] = v
				}
				return
			}
			zs := z[off[3] : off[3]+n]
			for i, c := range cs {
				v, xv := zs[i], xs[i]
				if c != 0 {
					v = xv
				}
				ys[i] = v
			}
			return
		}
		for i := range ys {
			if cond[off[1]+i*sc] != 0 {
				ys[i] = x[off[2]+i*sx]
			} else {
				ys[i] = z[off[3]+i*sz]
			}
		}
	})
}
