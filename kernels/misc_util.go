package kernels

import (
	"math"
	"unsafe"

	"github.com/tsplit/tsplit/ir"
)

// Helpers shared by the elementwise (ew_*), shape (shape_*), reduction
// (reduce_*) and miscellaneous (misc_*) kernels: typed views, the strided
// ndWalk that every broadcasting or data-moving kernel is built on, axis
// normalisation and small-input readers.

// viewAs reinterprets t's bytes as a []T (no copy).
func viewAs[T any](t *Tensor) []T {
	if t == nil || len(t.Data) == 0 {
		return nil
	}
	var z T
	return unsafe.Slice((*T)(unsafe.Pointer(&t.Data[0])), len(t.Data)/int(unsafe.Sizeof(z)))
}

// esize is the byte width of one element, 0 when elements are not whole
// bytes (4-bit types, strings).
func esize(dt ir.DType) int {
	b := dt.Bits()
	if b == 0 || b%8 != 0 {
		return 0
	}
	return b / 8
}

// parGrain is the element count below which kernels run inline: spawning
// goroutines costs more than it saves on small tensors.
const parGrain = 1 << 14

// parRange runs fn over [0, n) in parallel when the work (n units of
// about cost elements each) is large enough, inline otherwise.
func parRange(n, cost int, fn func(lo, hi int)) {
	if n <= 0 {
		return
	}
	if n*max(cost, 1) < parGrain {
		fn(0, n)
		return
	}
	Parallel(n, fn)
}

// contigStrides is the row-major element strides of shape.
func contigStrides(shape ir.Shape) []int {
	st := make([]int, len(shape))
	acc := 1
	for i := len(shape) - 1; i >= 0; i-- {
		st[i] = acc
		acc *= int(shape[i])
	}
	return st
}

// bcastStrides is the strides of a contiguous tensor of shape in read
// as broadcast to shape out (numpy rules, leading dims added): 0 along
// broadcast dimensions.
func bcastStrides(in, out ir.Shape) []int {
	st := make([]int, len(out))
	cs := contigStrides(in)
	off := len(out) - len(in)
	for d := range in {
		if in[d] != 1 || out[off+d] == 1 {
			st[off+d] = cs[d]
		}
	}
	return st
}

// shapeLen is the element count of a shape already validated by the IR.
func shapeLen(s ir.Shape) int {
	n := 1
	for _, d := range s {
		n *= int(d)
	}
	return n
}

// ndWalk is a row-major traversal of an index space shared by several
// operands, each with its own element strides. Size-1 dimensions are
// dropped and adjacent dimensions that are contiguous for every operand
// are merged, so a broadcast or a copy becomes as few long inner runs as
// possible. Operand 0 is usually the (contiguous) output.
type ndWalk struct {
	dims []int
	st   [][]int // st[k][d]: stride of operand k along dimension d
	n    int
}

// newWalk builds the ndWalk of shape with per-operand strides aligned to
// shape.
func newWalk(shape ir.Shape, strides ...[]int) *ndWalk {
	w := &ndWalk{st: make([][]int, len(strides)), n: 1}
	for d, s := range shape {
		w.n *= int(s)
		if s == 1 {
			continue
		}
		last := len(w.dims) - 1
		merge := last >= 0
		for k := range strides {
			if merge && w.st[k][last] != strides[k][d]*int(s) {
				merge = false
			}
		}
		if merge {
			w.dims[last] *= int(s)
			for k := range strides {
				w.st[k][last] = strides[k][d]
			}
			continue
		}
		w.dims = append(w.dims, int(s))
		for k := range strides {
			w.st[k] = append(w.st[k], strides[k][d])
		}
	}
	if len(w.dims) == 0 {
		w.dims = []int{1}
		for k := range w.st {
			w.st[k] = []int{0}
		}
	}
	return w
}

// inner is operand k's stride along the innermost dimension.
func (w *ndWalk) inner(k int) int { return w.st[k][len(w.dims)-1] }

// run visits the flat range [lo, hi) of the index space as inner runs:
// fn gets each operand's offset (base[k] plus the run's start) and the
// run length; the offsets slice is reused between calls.
func (w *ndWalk) run(lo, hi int, base []int, fn func(off []int, n int)) {
	if lo >= hi {
		return
	}
	r := len(w.dims)
	last := r - 1
	coord := make([]int, r)
	off := make([]int, len(w.st))
	copy(off, base)
	rem := lo
	for d := last; d >= 0; d-- {
		coord[d] = rem % w.dims[d]
		rem /= w.dims[d]
	}
	for k, st := range w.st {
		for d, c := range coord {
			off[k] += c * st[d]
		}
	}
	for pos := lo; pos < hi; {
		n := min(w.dims[last]-coord[last], hi-pos)
		fn(off, n)
		pos += n
		if pos >= hi {
			return
		}
		// The run ended at the end of the innermost dimension: carry.
		for k, st := range w.st {
			off[k] -= coord[last] * st[last]
		}
		coord[last] = 0
		for d := last - 1; d >= 0; d-- {
			coord[d]++
			for k, st := range w.st {
				off[k] += st[d]
			}
			if coord[d] < w.dims[d] {
				break
			}
			for k, st := range w.st {
				off[k] -= coord[d] * st[d]
			}
			coord[d] = 0
		}
	}
}

// par runs the whole ndWalk, in parallel chunks when it is large. Only
// valid when operand 0 (the one written) is visited injectively.
func (w *ndWalk) par(base []int, fn func(off []int, n int)) {
	parRange(w.n, 1, func(lo, hi int) { w.run(lo, hi, base, fn) })
}

// axisIndex maps axis from [-rank, rank-1] to [0, rank-1]; what names the
// attribute or input for the error. (The IR's own normAxis is
// unexported; the inference rule has already validated attribute axes,
// so this mostly guards runtime inputs.)
func axisIndex(c *Ctx, what string, axis int64, rank int) (int, error) {
	if axis < -int64(rank) || axis >= int64(rank) {
		return 0, c.Errorf("%s %d is out of range for rank %d", what, axis, rank)
	}
	if axis < 0 {
		axis += int64(rank)
	}
	return int(axis), nil
}

// axisMask normalises a list of axes into a per-dimension mask.
func axisMask(c *Ctx, what string, axes []int64, rank int) ([]bool, error) {
	mask := make([]bool, rank)
	for _, a := range axes {
		n, err := axisIndex(c, what, a, rank)
		if err != nil {
			return nil, err
		}
		if mask[n] {
			return nil, c.Errorf("%s repeats axis %d", what, a)
		}
		mask[n] = true
	}
	return mask, nil
}

// optIn returns input i, or nil when absent.
func optIn(c *Ctx, i int) *Tensor {
	if i < len(c.In) {
		return c.In[i]
	}
	return nil
}

// optOut returns output i, or nil when absent.
func optOut(c *Ctx, i int) *Tensor {
	if i < len(c.Out) {
		return c.Out[i]
	}
	return nil
}

// needIO checks that inputs 0..n-1 are present and outputs 0..m-1 are
// allocated.
func needIO(c *Ctx, nIn, nOut int) error {
	for i := 0; i < nIn; i++ {
		if optIn(c, i) == nil {
			return c.Errorf("input %d is missing", i)
		}
	}
	for i := 0; i < nOut; i++ {
		if optOut(c, i) == nil {
			return c.Errorf("output %d is missing", i)
		}
	}
	return nil
}

// readInts reads a small integer tensor (axes, pads, shapes, indices of
// shape arithmetic) as int64s.
func readInts(c *Ctx, t *Tensor, what string) ([]int64, error) {
	switch t.DType {
	case ir.Int64:
		return append([]int64(nil), viewAs[int64](t)...), nil
	case ir.Int32:
		v := viewAs[int32](t)
		out := make([]int64, len(v))
		for i, x := range v {
			out[i] = int64(x)
		}
		return out, nil
	}
	return nil, c.Errorf("%s has type %v, want int32 or int64", what, t.DType)
}

// readScalar reads element 0 of a numeric tensor as float64.
func readScalar(c *Ctx, t *Tensor, what string) (float64, error) {
	if t.Len() < 1 {
		return 0, c.Errorf("%s is empty, want one element", what)
	}
	if k := numOf(t.DType); k != nil {
		return k.float64s(t)(0), nil
	}
	switch t.DType {
	case ir.Bool:
		return float64(t.Data[0]), nil
	case ir.Float16:
		return float64(halfToF32(viewAs[uint16](t)[0])), nil
	case ir.BFloat16:
		return float64(bf16ToF32(viewAs[uint16](t)[0])), nil
	}
	return 0, c.Errorf("%s has type %v, want a number", what, t.DType)
}

// checkTensorBytes checks that every present input and output tensor has
// the byte length its dtype and shape need, so typed views cannot read
// out of range whatever the executor passes.
func checkTensorBytes(c *Ctx) error {
	for _, group := range []struct {
		what string
		ts   []*Tensor
	}{{"input", c.In}, {"output", c.Out}} {
		for i, t := range group.ts {
			if t == nil {
				continue
			}
			n, err := t.Shape.Bytes(t.DType)
			if err != nil {
				return c.Errorf("%s %d: %v", group.what, i, err)
			}
			if int64(len(t.Data)) != n {
				return c.Errorf("%s %d (%v%v) has %d bytes, want %d", group.what, i, t.DType, t.Shape, len(t.Data), n)
			}
		}
	}
	return nil
}

// regOp registers a kernel whose Run is wrapped with the checks every
// kernel of these families relies on (present inputs and outputs, data
// lengths), so no unexpected input can make a kernel index out of range.
func regOp(typ string, nIn, nOut int, dtypes []ir.DType, run func(c *Ctx) error) {
	Register("", typ, Kernel{DTypes: dtypes, Run: guardRun(nIn, nOut, run)})
}

func guardRun(nIn, nOut int, run func(c *Ctx) error) func(c *Ctx) error {
	return func(c *Ctx) error {
		if err := needIO(c, nIn, nOut); err != nil {
			return err
		}
		if err := checkTensorBytes(c); err != nil {
			return err
		}
		return run(c)
	}
}

// regIfAbsent is regOp for operators that sit at the border with another
// family of kernels (the nn_* files): it registers only when no kernel
// exists yet. Files initialise in file-name order, so reduce_*.go and
// shape_*.go run after nn_*.go and defer to a kernel registered there.
func regIfAbsent(typ string, nIn, nOut int, dtypes []ir.DType, run func(c *Ctx) error) {
	if Lookup("", typ) == nil {
		regOp(typ, nIn, nOut, dtypes, run)
	}
}

// parCopy copies src into dst (equal lengths), in parallel when large.
func parCopy(dst, src []byte) {
	const chunk = 1 << 20
	if len(dst) < 4*chunk {
		copy(dst, src)
		return
	}
	parRange((len(dst)+chunk-1)/chunk, chunk, func(lo, hi int) {
		copy(dst[lo*chunk:min(hi*chunk, len(dst))], src[lo*chunk:min(hi*chunk, len(src))])
	})
}

// moveWalk copies elements along a ndWalk whose operand 0 is dst and
// operand 1 is src, both of element size es: the data-moving kernels
// (Transpose, Slice, Expand, Pad, Split...) all reduce to it.
func moveWalk(w *ndWalk, dst, src *Tensor, es int, base []int) {
	if k := wordOf(es); k != nil {
		k.move(w, dst, src, base)
		return
	}
	moveBytes(w, dst.Data, src.Data, es, base)
}

// miscWordKernels are the typed bodies of the helpers' data moves.
type miscWordKernels interface {
	move(w *ndWalk, dst, src *Tensor, base []int)
}

func (wordK[T]) move(w *ndWalk, dt, st *Tensor, base []int) {
	dst, src := viewAs[T](dt), viewAs[T](st)
	sd, ss := w.inner(0), w.inner(1)
	w.par(base, func(off []int, n int) {
		o, i := off[0], off[1]
		switch {
		case sd == 1 && ss == 1:
			copy(dst[o:o+n], src[i:i+n])
		case sd == 1 && ss == 0:
			v := src[i]
			d := dst[o : o+n]
			for j := range d {
				d[j] = v
			}
		case sd == 1:
			d := dst[o : o+n]
			for j := range d {
				d[j] = src[i+j*ss]
			}
		default:
			for j := 0; j < n; j++ {
				dst[o+j*sd] = src[i+j*ss]
			}
		}
	})
}

// moveBytes is moveT for element sizes with no Go integer type (16-byte
// complex and friends never reach it today; kept for completeness).
func moveBytes(w *ndWalk, dst, src []byte, es int, base []int) {
	sd, ss := w.inner(0), w.inner(1)
	w.par(base, func(off []int, n int) {
		for j := 0; j < n; j++ {
			o, i := (off[0]+j*sd)*es, (off[1]+j*ss)*es
			copy(dst[o:o+es], src[i:i+es])
		}
	})
}

// halfToF32 decodes an IEEE half.
func halfToF32(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	man := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f:
		return math.Float32frombits(sign | 0xff<<23 | man<<13)
	case exp == 0:
		if man == 0 {
			return math.Float32frombits(sign)
		}
		// subnormal: normalise
		e := uint32(127 - 15 + 1)
		for man&0x400 == 0 {
			man <<= 1
			e--
		}
		return math.Float32frombits(sign | e<<23 | (man&0x3ff)<<13)
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | man<<13)
}

// f32ToHalf encodes an IEEE half, rounding to nearest even; overflow gives
// infinity and NaN stays NaN.
func f32ToHalf(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int(b>>23) & 0xff
	man := b & 0x7fffff
	if exp == 0xff {
		if man != 0 {
			return sign | 0x7e00
		}
		return sign | 0x7c00
	}
	e := exp - 127 + 15
	if e >= 0x1f {
		return sign | 0x7c00
	}
	if e <= 0 {
		if e < -10 {
			return sign
		}
		man |= 0x800000
		shift := uint(14 - e)
		half := uint32(1) << (shift - 1)
		r := man >> shift
		rem := man & (1<<shift - 1)
		if rem > half || (rem == half && r&1 == 1) {
			r++
		}
		return sign | uint16(r)
	}
	r := uint32(e)<<10 | man>>13
	rem := man & 0x1fff
	if rem > 0x1000 || (rem == 0x1000 && r&1 == 1) {
		r++ // may carry into the exponent, up to infinity: correct
	}
	return sign | uint16(r)
}

// bf16ToF32 decodes a bfloat16.
func bf16ToF32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// f32ToBF16 encodes a bfloat16, rounding to nearest even.
func f32ToBF16(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 {
		return uint16(b>>16) | 0x40 // quiet NaN
	}
	b += 0x7fff + (b>>16)&1
	return uint16(b >> 16)
}
