package kernels

import (
	"fmt"

	"github.com/tsplit/tsplit/ir"
)

// Sliding-window geometry shared by Conv, ConvTranspose and the pools.
//
// Output sizes are never recomputed here: they come from the output
// value's shape, which ir's inference rules (windowOut, inferConvTranspose
// in ir/shapes_nn.go) already derived. What the kernels need beyond that
// is the begin padding under auto_pad, which ir computes inside
// windowOut without exporting it; nnPads repeats that rule (ONNX's
// convPoolShapeInference) and the tests check it against ONNX Runtime.

// nnMaxSpatial is the spatial rank the kernels handle (1-D, 2-D, 3-D).
const nnMaxSpatial = 3

// nnGeom is a window geometry padded to three spatial dimensions
// (D, H, W): a 2-D op has D = 1, a 1-D op D = H = 1, with kernel 1,
// stride 1, dilation 1 and no padding on the added dimensions.
type nnGeom struct {
	in, out, k, s, d [nnMaxSpatial]int
	pb, pe           [nnMaxSpatial]int // begin and end padding
}

func (g *nnGeom) inVol() int  { return g.in[0] * g.in[1] * g.in[2] }
func (g *nnGeom) outVol() int { return g.out[0] * g.out[1] * g.out[2] }
func (g *nnGeom) kVol() int   { return g.k[0] * g.k[1] * g.k[2] }

// unit reports whether the window is a 1×1 identity: kernel 1, stride 1,
// no padding, output the size of the input.
func (g *nnGeom) unit() bool {
	for i := 0; i < nnMaxSpatial; i++ {
		if g.k[i] != 1 || g.s[i] != 1 || g.pb[i] != 0 || g.in[i] != g.out[i] {
			return false
		}
	}
	return true
}

// nnSpatialAttrs reads strides and dilations (default 1) for n spatial
// dimensions.
func nnSpatialAttrs(op *ir.Op, n int) (st, dil []int64, err error) {
	st = op.AttrInts("strides", nil)
	dil = op.AttrInts("dilations", nil)
	if st == nil {
		st = nnFilled(n, 1)
	}
	if dil == nil {
		dil = nnFilled(n, 1)
	}
	if len(st) != n || len(dil) != n {
		return nil, nil, fmt.Errorf("%s: strides %v / dilations %v do not have %d values", op.Describe(), st, dil, n)
	}
	return st, dil, nil
}

func nnFilled(n int, v int64) []int64 {
	s := make([]int64, n)
	for i := range s {
		s[i] = v
	}
	return s
}

// nnPads resolves the padding of a Conv or pool: the pads attribute, or
// the auto_pad rule of ONNX (as ir's windowOut applies it): SAME_UPPER
// and SAME_LOWER pad the total (ceil(in/s)-1)·s + ek - in, the odd
// element at the end (UPPER) or the beginning (LOWER).
func nnPads(op *ir.Op, in, kernel, st, dil []int64) ([]int64, error) {
	n := len(in)
	pads := op.AttrInts("pads", nil)
	if pads == nil {
		pads = make([]int64, 2*n)
	} else {
		if len(pads) != 2*n {
			return nil, fmt.Errorf("%s: pads %v does not have %d values", op.Describe(), pads, 2*n)
		}
		pads = append([]int64(nil), pads...)
	}
	switch ap := op.AttrString("auto_pad", "NOTSET"); ap {
	case "", "NOTSET":
	case "VALID":
		clear(pads)
	case "SAME_UPPER", "SAME_LOWER":
		for i := 0; i < n; i++ {
			ek := (kernel[i]-1)*dil[i] + 1
			outSame := (in[i] + st[i] - 1) / st[i]
			total := max(0, (outSame-1)*st[i]+ek-in[i])
			small := total / 2
			if ap == "SAME_UPPER" {
				pads[i], pads[i+n] = small, total-small
			} else {
				pads[i], pads[i+n] = total-small, small
			}
		}
	default:
		return nil, fmt.Errorf("%s: auto_pad %q is not supported", op.Describe(), ap)
	}
	return pads, nil
}

// nnMakeGeom builds the padded 3-D geometry from per-dimension values.
func nnMakeGeom(op *ir.Op, in, out, kernel, st, dil, pads []int64) (nnGeom, error) {
	var g nnGeom
	n := len(in)
	if n < 1 || n > nnMaxSpatial {
		return g, fmt.Errorf("%s: %d spatial dimensions; the reference kernels handle 1 to %d", op.Describe(), n, nnMaxSpatial)
	}
	if len(out) != n || len(kernel) != n {
		return g, fmt.Errorf("%s: spatial ranks of input %v, output %v and kernel %v differ", op.Describe(), in, out, kernel)
	}
	off := nnMaxSpatial - n
	for i := 0; i < nnMaxSpatial; i++ {
		g.in[i], g.out[i], g.k[i], g.s[i], g.d[i] = 1, 1, 1, 1, 1
	}
	for i := 0; i < n; i++ {
		j := off + i
		g.in[j], g.out[j], g.k[j] = int(in[i]), int(out[i]), int(kernel[i])
		g.s[j], g.d[j] = int(st[i]), int(dil[i])
		g.pb[j], g.pe[j] = int(pads[i]), int(pads[i+n])
		if g.s[j] <= 0 || g.d[j] <= 0 || g.k[j] <= 0 {
			return g, fmt.Errorf("%s: kernel %v, strides %v and dilations %v must be positive", op.Describe(), kernel, st, dil)
		}
	}
	return g, nil
}

// nnWindowGeom is the geometry of a Conv or pool op whose input 0 is
// (N, C, in...) and output 0 is (N, C', out...).
func nnWindowGeom(op *ir.Op, kernel []int64) (nnGeom, error) {
	x, y := op.Input(0), op.Output(0)
	if x == nil || y == nil || len(x.Shape) < 3 || len(y.Shape) != len(x.Shape) {
		return nnGeom{}, fmt.Errorf("%s: needs (N, C, D1, ...) input and output", op.Describe())
	}
	in, out := []int64(x.Shape[2:]), []int64(y.Shape[2:])
	if len(kernel) != len(in) {
		return nnGeom{}, fmt.Errorf("%s: kernel %v does not match %d spatial dimensions", op.Describe(), kernel, len(in))
	}
	st, dil, err := nnSpatialAttrs(op, len(in))
	if err != nil {
		return nnGeom{}, err
	}
	pads, err := nnPads(op, in, kernel, st, dil)
	if err != nil {
		return nnGeom{}, err
	}
	return nnMakeGeom(op, in, out, kernel, st, dil, pads)
}

// nnRange returns the indices i in [0, n) for which i·s + off lies in
// [0, limit), as the half-open range [lo, hi) (empty when lo >= hi).
// s must be positive.
func nnRange(off, s, limit, n int) (lo, hi int) {
	// i·s + off >= 0  <=>  i >= ceil(-off / s)
	if off < 0 {
		lo = (-off + s - 1) / s
	}
	// i·s + off <= limit-1  <=>  i <= floor((limit-1-off) / s)
	top := limit - 1 - off
	if top < 0 {
		return lo, lo
	}
	hi = min(n, top/s+1)
	if hi < lo {
		hi = lo
	}
	return lo, hi
}

// nnVol is the element count of a shape.
func nnVol(s ir.Shape) int {
	n := 1
	for _, d := range s {
		n *= int(d)
	}
	return n
}

// nnReg registers a float32 / float64 kernel (nn_generic.go) wrapped in
// nnGuard. outType, when not nil, allows output types other than the
// element type (MaxPool's int64 Indices, LayerNormalization's
// statistics in the stash type).
func nnReg(typ string, nIn, nOut int, k Kernel, outType func(i int, dt ir.DType) bool) {
	k.Run = nnGuard(nIn, nOut, outType, k.Run)
	k.DTypes = []ir.DType{ir.Float, ir.Double}
	Register("", typ, k)
}

// nnGuard wraps a Run: inputs 0..nIn-1 and outputs 0..nOut-1 must be
// present, and every present tensor must have the dtype and shape the op
// declares, the element type of input 0 (float32 or float64; outputs:
// or what outType allows), and the bytes they need. The nn kernels plan
// from the op's values and view tensors as the element type, so this
// keeps any mismatch the executor might pass from being misread or
// indexed out of range.
func nnGuard(nIn, nOut int, outType func(i int, dt ir.DType) bool, run func(c *Ctx) error) func(c *Ctx) error {
	return func(c *Ctx) error {
		et := ir.Float
		if len(c.In) > 0 && c.In[0] != nil && c.In[0].DType == ir.Double {
			et = ir.Double
		}
		check := func(what string, i int, t *Tensor, v *ir.Value) error {
			if t == nil || v == nil {
				if (t == nil) != (v == nil) {
					return c.Errorf("%s %d is present in one of op and call only", what, i)
				}
				return nil
			}
			if t.DType != v.DType || !t.Shape.Equal(v.Shape) {
				return c.Errorf("%s %d is %v%v, the op declares %v%v", what, i, t.DType, t.Shape, v.DType, v.Shape)
			}
			if t.DType != et && (what == "input" || outType == nil || !outType(i, t.DType)) {
				return c.Errorf("%s %d has type %v, the reference kernel supports float32 and float64 (element type %v)", what, i, t.DType, et)
			}
			n, err := t.Shape.Bytes(t.DType)
			if err != nil {
				return c.Errorf("%s %d: %v", what, i, err)
			}
			if int64(len(t.Data)) != n {
				return c.Errorf("%s %d (%v%v) has %d bytes, want %d", what, i, t.DType, t.Shape, len(t.Data), n)
			}
			return nil
		}
		if len(c.In) < nIn || len(c.Out) < nOut {
			return c.Errorf("has %d inputs and %d outputs, needs %d and %d", len(c.In), len(c.Out), nIn, nOut)
		}
		for i, t := range c.In {
			if i < nIn && t == nil {
				return c.Errorf("input %d is missing", i)
			}
			if err := check("input", i, t, c.Op.Input(i)); err != nil {
				return err
			}
		}
		for i, t := range c.Out {
			if i < nOut && t == nil {
				return c.Errorf("output %d is missing", i)
			}
			if err := check("output", i, t, c.Op.Output(i)); err != nil {
				return err
			}
		}
		return run(c)
	}
}
