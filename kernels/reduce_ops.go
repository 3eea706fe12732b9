package kernels

import (
	"math"

	"github.com/tsplit/tsplit/ir"
)

// Reductions: ReduceSum, ReduceMean, ReduceMax, ReduceMin, ReduceProd,
// ReduceL1, ReduceL2, ReduceSumSquare, ReduceLogSum and ReduceLogSumExp
// on every numeric type. Axes come from input 1 (ReduceSum since opset
// 13, the others since 18) or the axes attribute (earlier opsets); no
// axes reduce everything unless noop_with_empty_axes=1, which makes the
// op the identity. keepdims does not change the data layout, so the
// kernel never needs it: the output shape is the IR's.
//
// Sums accumulate in float64 for float inputs and in int64 for integer
// ones. Reductions over an empty set give the spec's identities: 0 for
// sums, 1 for the product, the lowest/highest value for max/min, -inf
// for the log reductions (and NaN for the mean of floats).

const (
	redSum = iota
	redMean
	redMax
	redMin
	redProd
	redL1
	redL2
	redSumSq
	redLogSum
	redLogSumExp
)

var redOps = map[string]int{
	"ReduceSum": redSum, "ReduceMean": redMean, "ReduceMax": redMax, "ReduceMin": redMin,
	"ReduceProd": redProd, "ReduceL1": redL1, "ReduceL2": redL2, "ReduceSumSquare": redSumSq,
	"ReduceLogSum": redLogSum, "ReduceLogSumExp": redLogSumExp,
}

func init() {
	for name, op := range redOps {
		regOp(name, 1, 1, numTypes, redRun(op))
	}
}

// redPlan is a reduction of a contiguous tensor, with size-1 dimensions
// dropped and adjacent dimensions of the same kind (kept or reduced)
// merged. Each output "unit" is one output element when the innermost
// merged dimension is reduced (a contiguous run folded into a scalar),
// or a chunk of up to redChunk consecutive outputs when it is kept (rows
// added into a vector); either way every input element is read once, in
// memory order within a unit.
type redPlan struct {
	dims []int
	st   []int
	ko   []int // kept dimensions indexing the units (all kept but a vector one)
	ro   []int // reduced dimensions iterated per unit (all reduced but a run one)
	vec  int   // outputs per unit row (innermost kept dimension), 1 if none
	run  int   // contiguous reduced run (innermost reduced dimension), 1 if none
	nOut int   // product of the ko dimensions
	nRed int   // product of the ro dimensions
}

const redChunk = 256

func newRedPlan(shape ir.Shape, red []bool) *redPlan {
	p := &redPlan{}
	var flags []bool
	for d, s := range shape {
		if s == 1 {
			continue
		}
		if last := len(p.dims) - 1; last >= 0 && flags[last] == red[d] {
			p.dims[last] *= int(s)
			continue
		}
		p.dims = append(p.dims, int(s))
		flags = append(flags, red[d])
	}
	if len(p.dims) == 0 {
		p.dims, flags = []int{1}, []bool{false}
	}
	m := len(p.dims)
	p.st = make([]int, m)
	acc := 1
	for i := m - 1; i >= 0; i-- {
		p.st[i] = acc
		acc *= p.dims[i]
	}
	p.vec, p.run = 1, 1
	if flags[m-1] {
		p.run = p.dims[m-1]
	} else {
		p.vec = p.dims[m-1]
	}
	p.nOut, p.nRed = 1, 1
	for i := 0; i < m-1; i++ {
		if flags[i] {
			p.ro = append(p.ro, i)
			p.nRed *= p.dims[i]
		} else {
			p.ko = append(p.ko, i)
			p.nOut *= p.dims[i]
		}
	}
	return p
}

// base is the input offset of unit row o (row-major over the ko dims).
func (p *redPlan) base(o int) int {
	off := 0
	for j := len(p.ko) - 1; j >= 0; j-- {
		d := p.ko[j]
		off += (o % p.dims[d]) * p.st[d]
		o /= p.dims[d]
	}
	return off
}

// eachRed calls fn with the input offset of every combination of the ro
// dimensions, in memory order.
func (p *redPlan) eachRed(fn func(off int)) {
	switch len(p.ro) {
	case 0:
		fn(0)
		return
	case 1:
		d := p.ro[0]
		for i := 0; i < p.dims[d]; i++ {
			fn(i * p.st[d])
		}
		return
	}
	if p.nRed == 0 {
		return
	}
	var coord [32]int
	off := 0
	for {
		fn(off)
		j := len(p.ro) - 1
		for ; j >= 0; j-- {
			d := p.ro[j]
			coord[j]++
			off += p.st[d]
			if coord[j] < p.dims[d] {
				break
			}
			off -= coord[j] * p.st[d]
			coord[j] = 0
		}
		if j < 0 {
			return
		}
	}
}

// redAxes reads the reduction axes from input 1 or the axes attribute.
func redAxes(c *Ctx) ([]int64, error) {
	if t := optIn(c, 1); t != nil {
		if c.Op.Attr("axes") != nil {
			return nil, c.Errorf("axes are given both as attribute and as input 1")
		}
		return readInts(c, t, "input 1 (axes)")
	}
	return c.Op.AttrInts("axes", nil), nil
}

// redShapes is the keepdims and the squeezed output shape of reducing
// dimensions red of shape.
func redShapes(shape ir.Shape, red []bool) (keep, drop ir.Shape) {
	keep, drop = ir.Shape{}, ir.Shape{}
	for d, s := range shape {
		if red[d] {
			keep = append(keep, 1)
		} else {
			keep = append(keep, s)
			drop = append(drop, s)
		}
	}
	return keep, drop
}

// redMaskOut reads the axes of a reduction, checks the output shape and
// returns the reduced-dimension mask, or nil when the op is the
// identity (no axes and noop_with_empty_axes=1).
func redMaskOut(c *Ctx) ([]bool, error) {
	x, y := c.In[0], c.Out[0]
	axes, err := redAxes(c)
	if err != nil {
		return nil, err
	}
	r := len(x.Shape)
	var red []bool
	if len(axes) == 0 {
		if c.Op.AttrInt("noop_with_empty_axes", 0) != 0 {
			if !y.Shape.Equal(x.Shape) {
				return nil, c.Errorf("output shape %v, want the input shape %v (no axes and noop_with_empty_axes=1)", y.Shape, x.Shape)
			}
			return nil, nil
		}
		red = make([]bool, r)
		for i := range red {
			red[i] = true
		}
	} else if red, err = axisMask(c, "axes", axes, r); err != nil {
		return nil, err
	}
	keep, drop := redShapes(x.Shape, red)
	if !y.Shape.Equal(keep) && !y.Shape.Equal(drop) {
		return nil, c.Errorf("output shape %v, reducing %v over axes %v gives %v or %v", y.Shape, x.Shape, axes, keep, drop)
	}
	return red, nil
}

func redRun(op int) func(c *Ctx) error {
	return func(c *Ctx) error {
		x, y := c.In[0], c.Out[0]
		if y.DType != x.DType {
			return c.Errorf("output type %v, want the input type %v", y.DType, x.DType)
		}
		red, err := redMaskOut(c)
		if err != nil {
			return err
		}
		if red == nil {
			parCopy(y.Data, x.Data)
			return nil
		}
		k := numOf(x.DType)
		if k == nil {
			return c.Errorf("element type %v is not supported", x.DType)
		}
		k.reduce(op, newRedPlan(x.Shape, red), x, y)
		return nil
	}
}

// redNumKernels are the typed bodies of the reduce_* files' numeric
// kernels.
type redNumKernels interface {
	reduce(op int, p *redPlan, x, y *Tensor)
	arg(x *Tensor, idx []int64, outer, dim, inner int, isMax, last bool)
}

// redFloatKernels are the typed bodies of the reduce_* files' float
// kernels.
type redFloatKernels interface {
	hardmax(x, y *Tensor, idx []int64, outer, dim, inner int)
	instNorm(y, x, scale, bias *Tensor, ch, sz int, eps float64)
}

// reduce reduces x into y, summing and multiplying in A (float64 for
// floats, int64 for integers).
func (numK[T, A]) reduce(op int, p *redPlan, xt, yt *Tensor) {
	x, y := viewAs[T](xt), viewAs[T](yt)
	count := p.nRed * p.run
	lo, hi := elemLimits[T]()
	finish := func(acc A, m T) T {
		switch op {
		case redMean:
			if count == 0 {
				if isFloat[T]() {
					return T(math.NaN())
				}
				return 0
			}
			return T(acc / A(count))
		case redL2:
			return T(math.Sqrt(float64(acc)))
		case redLogSum:
			return T(math.Log(float64(acc)))
		case redMax, redMin:
			return m
		}
		return T(acc)
	}
	if p.vec == 1 {
		// One output per unit: fold runs of p.run contiguous elements.
		parRange(p.nOut, count, func(u0, u1 int) {
			for o := u0; o < u1; o++ {
				base := p.base(o)
				if op == redLogSumExp {
					redLSE(p, x, base, 1, func(_ int, v float64) { y[o] = T(v) })
					continue
				}
				var acc A
				if op == redProd {
					acc = 1
				}
				m := lo
				if op == redMin {
					m = hi
				}
				p.eachRed(func(off int) {
					seg := x[base+off : base+off+p.run]
					switch op {
					case redSum, redMean, redLogSum, redL1, redL2, redSumSq:
						acc += redRunSum[T, A](op, seg)
					case redProd:
						for _, v := range seg {
							acc *= A(v)
						}
					case redMax:
						for _, v := range seg {
							if v > m {
								m = v
							}
						}
					case redMin:
						for _, v := range seg {
							if v < m {
								m = v
							}
						}
					}
				})
				y[o] = finish(acc, m)
			}
		})
		return
	}
	// Vector units: add rows of up to redChunk contiguous outputs.
	chunks := (p.vec + redChunk - 1) / redChunk
	parRange(p.nOut*chunks, p.nRed*redChunk, func(u0, u1 int) {
		var acc [redChunk]A
		var m [redChunk]T
		for u := u0; u < u1; u++ {
			o, ch := u/chunks, u%chunks
			j0 := ch * redChunk
			n := min(redChunk, p.vec-j0)
			base := p.base(o) + j0
			ys := y[o*p.vec+j0 : o*p.vec+j0+n]
			if op == redLogSumExp {
				redLSE(p, x, base, n, func(j int, v float64) { ys[j] = T(v) })
				continue
			}
			a, mm := acc[:n], m[:n]
			for j := range a {
				a[j] = 0
				if op == redProd {
					a[j] = 1
				}
				mm[j] = lo
				if op == redMin {
					mm[j] = hi
				}
			}
			p.eachRed(func(off int) {
				seg := x[base+off : base+off+n]
				switch op {
				case redSum, redMean, redLogSum:
					for j, v := range seg {
						a[j] += A(v)
					}
				case redL1:
					for j, v := range seg {
						if v < 0 {
							a[j] -= A(v)
						} else {
							a[j] += A(v)
						}
					}
				case redL2, redSumSq:
					for j, v := range seg {
						a[j] += A(v) * A(v)
					}
				case redProd:
					for j, v := range seg {
						a[j] *= A(v)
					}
				case redMax:
					for j, v := range seg {
						if v > mm[j] {
							mm[j] = v
						}
					}
				case redMin:
					for j, v := range seg {
						if v < mm[j] {
							mm[j] = v
						}
					}
				}
			})
			for j := range ys {
				ys[j] = finish(a[j], mm[j])
			}
		}
	})
}

// redRunSum is the sum (of values, absolute values or squares, by op)
// of a contiguous run, with four partial sums so consecutive additions
// do not wait on each other.
func redRunSum[T elemNum, A float64 | int64](op int, seg []T) A {
	var s0, s1, s2, s3 A
	i := 0
	switch op {
	case redL1:
		abs := func(v T) A {
			if v < 0 {
				return -A(v)
			}
			return A(v)
		}
		for ; i+4 <= len(seg); i += 4 {
			s0 += abs(seg[i])
			s1 += abs(seg[i+1])
			s2 += abs(seg[i+2])
			s3 += abs(seg[i+3])
		}
		for ; i < len(seg); i++ {
			s0 += abs(seg[i])
		}
	case redL2, redSumSq:
		for ; i+4 <= len(seg); i += 4 {
			a, b, c, d := A(seg[i]), A(seg[i+1]), A(seg[i+2]), A(seg[i+3])
			s0 += a * a
			s1 += b * b
			s2 += c * c
			s3 += d * d
		}
		for ; i < len(seg); i++ {
			a := A(seg[i])
			s0 += a * a
		}
	default:
		for ; i+4 <= len(seg); i += 4 {
			s0 += A(seg[i])
			s1 += A(seg[i+1])
			s2 += A(seg[i+2])
			s3 += A(seg[i+3])
		}
		for ; i < len(seg); i++ {
			s0 += A(seg[i])
		}
	}
	return (s0 + s1) + (s2 + s3)
}

// redLSE computes log(sum(exp(x))) for n consecutive outputs starting
// at input offset base (n=1 with runs for a scalar unit), stably as
// max + log(sum(exp(x - max))) in float64, and hands each to out.
func redLSE[T elemNum](p *redPlan, x []T, base, n int, out func(j int, v float64)) {
	// A scalar unit (p.vec == 1) has n == 1 and folds whole runs.
	scalar, span := p.vec == 1, n
	if scalar {
		span = p.run
	}
	var mxA, sumA [redChunk]float64
	mx, sum := mxA[:n], sumA[:n]
	for j := range mx {
		mx[j] = math.Inf(-1)
	}
	p.eachRed(func(off int) {
		for k, v := range x[base+off : base+off+span] {
			if scalar {
				k = 0
			}
			mx[k] = max(mx[k], float64(v))
		}
	})
	p.eachRed(func(off int) {
		for k, v := range x[base+off : base+off+span] {
			if scalar {
				k = 0
			}
			if !math.IsInf(mx[k], 0) {
				sum[k] += math.Exp(float64(v) - mx[k])
			}
		}
	})
	for j := range mx {
		v := mx[j]
		if !math.IsInf(v, 0) {
			v += math.Log(sum[j])
		}
		out(j, v)
	}
}
