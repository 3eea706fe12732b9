package kernels

import (
	"math"

	"github.com/tsplit/tsplit/ir"
)

// Slice, Pad, Expand and Tile on any byte-sized type.
//
// Slice and Expand are strided walks (moveWalk): a slice reads with
// stride step*stride from its first element (negative steps walk
// backwards), an expand reads broadcast dimensions with stride 0.
// Pad's non-constant modes (reflect, edge, wrap) and Tile are gathers
// through one index map per dimension (shMapGather); constant Pad is a
// fill plus a strided copy of the interior (or a crop, for negative
// pads).

func init() {
	regOp("Slice", 1, 1, byteTypes, shSliceRun)
	regOp("Pad", 1, 1, byteTypes, shPadRun)
	regOp("Expand", 2, 1, byteTypes, shExpandRun)
	regOp("Tile", 2, 1, byteTypes, shTileRun)
}

// shSliceArgs reads starts, ends, axes and steps from inputs 1-4 (opset
// >= 10) or the attributes starts/ends/axes (opset 1).
func shSliceArgs(c *Ctx) (starts, axes, steps []int64, err error) {
	var ends []int64
	if len(c.In) >= 3 {
		if c.Op.Attr("starts") != nil || c.Op.Attr("ends") != nil || c.Op.Attr("axes") != nil {
			return nil, nil, nil, c.Errorf("starts/ends/axes are given both as attributes and as inputs")
		}
		read := func(i int, what string) ([]int64, error) {
			if t := optIn(c, i); t != nil {
				return readInts(c, t, what)
			}
			return nil, nil
		}
		if starts, err = read(1, "input 1 (starts)"); err != nil {
			return
		}
		if ends, err = read(2, "input 2 (ends)"); err != nil {
			return
		}
		if axes, err = read(3, "input 3 (axes)"); err != nil {
			return
		}
		if steps, err = read(4, "input 4 (steps)"); err != nil {
			return
		}
	} else {
		starts, ends, axes = c.Op.AttrInts("starts", nil), c.Op.AttrInts("ends", nil), c.Op.AttrInts("axes", nil)
	}
	if len(ends) != len(starts) {
		return nil, nil, nil, c.Errorf("starts has %d values and ends %d", len(starts), len(ends))
	}
	if axes == nil {
		axes = make([]int64, len(starts))
		for i := range axes {
			axes[i] = int64(i)
		}
	}
	if steps == nil {
		steps = make([]int64, len(starts))
		for i := range steps {
			steps[i] = 1
		}
	}
	if len(axes) != len(starts) || len(steps) != len(starts) {
		return nil, nil, nil, c.Errorf("starts, axes and steps have %d, %d and %d values", len(starts), len(axes), len(steps))
	}
	return starts, axes, steps, nil
}

// shSliceFirst is the first index a slice of a dimension of size dim
// takes: start counted from the end when negative, then clamped to
// [0, dim] for positive steps and [0, dim-1] for negative ones. (The
// element count is the output dimension the IR computed; the IR's own
// sliceRange, which computes both, is unexported.)
func shSliceFirst(dim, start, step int64) int64 {
	if start < 0 {
		start += dim
	}
	if step > 0 {
		return min(max(start, 0), dim)
	}
	return min(max(start, 0), dim-1)
}

func shSliceRun(c *Ctx) error {
	x, y := c.In[0], c.Out[0]
	r := len(x.Shape)
	starts, axes, steps, err := shSliceArgs(c)
	if err != nil {
		return err
	}
	if x.DType != y.DType || len(y.Shape) != r {
		return c.Errorf("output is %v%v, input %v%v", y.DType, y.Shape, x.DType, x.Shape)
	}
	st := contigStrides(x.Shape)
	rst := make([]int, r) // read strides
	copy(rst, st)
	base := 0
	sliced := make([]bool, r)
	for i, a := range axes {
		d, err := axisIndex(c, "axes", a, r)
		if err != nil {
			return err
		}
		if sliced[d] {
			return c.Errorf("axes repeat axis %d", a)
		}
		sliced[d] = true
		if steps[i] == 0 {
			return c.Errorf("steps has 0 for axis %d", a)
		}
		dim, n := x.Shape[d], y.Shape[d]
		first := shSliceFirst(dim, starts[i], steps[i])
		if n > 0 {
			// The last element read must be inside the dimension
			// (computed without overflow for huge steps).
			if n > dim || first < 0 || first >= dim || (n > 1 && (math.MaxInt64/max(steps[i], -steps[i]) < n-1 ||
				first+(n-1)*steps[i] < 0 || first+(n-1)*steps[i] >= dim)) {
				return c.Errorf("output dimension %d (%d) does not fit slicing %d from %d by %d", d, n, dim, first, steps[i])
			}
		}
		base += int(first) * st[d]
		rst[d] = int(steps[i]) * st[d]
	}
	for d := range sliced {
		if !sliced[d] && y.Shape[d] != x.Shape[d] {
			return c.Errorf("output dimension %d is %d, input %d, and axis %d is not sliced", d, y.Shape[d], x.Shape[d], d)
		}
	}
	if y.Len() == 0 {
		return nil
	}
	moveWalk(newWalk(y.Shape, contigStrides(y.Shape), rst), y, x, esize(x.DType), []int{0, base})
	return nil
}

func shExpandRun(c *Ctx) error {
	x, y := c.In[0], c.Out[0]
	b, err := ir.Broadcast(x.Shape, y.Shape)
	if err != nil || !b.Equal(y.Shape) || x.DType != y.DType {
		return c.Errorf("input %v%v does not broadcast to output %v%v", x.DType, x.Shape, y.DType, y.Shape)
	}
	moveWalk(newWalk(y.Shape, contigStrides(y.Shape), bcastStrides(x.Shape, y.Shape)), y, x, esize(x.DType), nil)
	return nil
}

func shTileRun(c *Ctx) error {
	x, y := c.In[0], c.Out[0]
	reps, err := readInts(c, c.In[1], "input 1 (repeats)")
	if err != nil {
		return err
	}
	if len(reps) != len(x.Shape) || len(y.Shape) != len(x.Shape) || x.DType != y.DType {
		return c.Errorf("output %v%v, input %v%v, repeats %v do not agree", y.DType, y.Shape, x.DType, x.Shape, reps)
	}
	maps := make([][]int, len(x.Shape))
	for d, n := range x.Shape {
		if reps[d] < 0 || y.Shape[d] != n*reps[d] {
			return c.Errorf("output dimension %d is %d, want %d × %d", d, y.Shape[d], n, reps[d])
		}
		maps[d] = make([]int, y.Shape[d])
		for i := range maps[d] {
			maps[d][i] = i % int(n)
		}
	}
	shMapGather(y, x, maps)
	return nil
}

// shMapGather sets y[i0, i1, ...] = x[maps[0][i0], maps[1][i1], ...].
func shMapGather(y, x *Tensor, maps [][]int) {
	if y.Len() == 0 {
		return
	}
	if k := wordOf(esize(x.DType)); k != nil {
		k.mapGather(y, x, maps)
	}
}

func (wordK[T]) mapGather(yt, xt *Tensor, maps [][]int) {
	yShape, xShape, y, x := yt.Shape, xt.Shape, viewAs[T](yt), viewAs[T](xt)
	r := len(yShape)
	if r == 0 {
		y[0] = x[0]
		return
	}
	st := contigStrides(xShape)
	cols := int(yShape[r-1])
	last := maps[r-1]
	rows := len(y) / cols
	parRange(rows, cols, func(r0, r1 int) {
		for row := r0; row < r1; row++ {
			base, rem := 0, row
			for d := r - 2; d >= 0; d-- {
				k := rem % int(yShape[d])
				rem /= int(yShape[d])
				base += maps[d][k] * st[d]
			}
			ys := y[row*cols : (row+1)*cols]
			for j := range ys {
				ys[j] = x[base+last[j]]
			}
		}
	})
}

// shPadArgs reads pads (input 1, or the opset-2 attribute), the
// constant value (input 2, or attribute value) and the padded axes
// (input 3; all by default), returning per-dimension begin pads.
func shPadArgs(c *Ctx, r int) (begin, end []int64, err error) {
	var pads []int64
	if t := optIn(c, 1); t != nil {
		if c.Op.Attr("pads") != nil {
			return nil, nil, c.Errorf("pads are given both as attribute and as input 1")
		}
		if pads, err = readInts(c, t, "input 1 (pads)"); err != nil {
			return nil, nil, err
		}
	} else if a := c.Op.Attr("pads"); a != nil {
		pads = a.Ints
	} else {
		return nil, nil, c.Errorf("has no pads")
	}
	axes := make([]int, r)
	for i := range axes {
		axes[i] = i
	}
	if t := optIn(c, 3); t != nil {
		ax, err := readInts(c, t, "input 3 (axes)")
		if err != nil {
			return nil, nil, err
		}
		if _, err := axisMask(c, "input 3 (axes)", ax, r); err != nil {
			return nil, nil, err // out of range or repeated
		}
		axes = axes[:0]
		for _, a := range ax {
			axes = append(axes, int((a+int64(r))%int64(r)))
		}
	}
	if len(pads) != 2*len(axes) {
		return nil, nil, c.Errorf("pads has %d values, want %d (begin and end for each of %d axes)", len(pads), 2*len(axes), len(axes))
	}
	begin, end = make([]int64, r), make([]int64, r)
	for i, a := range axes {
		begin[a], end[a] = pads[i], pads[i+len(axes)]
	}
	return begin, end, nil
}

func shPadRun(c *Ctx) error {
	x, y := c.In[0], c.Out[0]
	r := len(x.Shape)
	begin, end, err := shPadArgs(c, r)
	if err != nil {
		return err
	}
	if x.DType != y.DType || len(y.Shape) != r {
		return c.Errorf("output is %v%v, input %v%v", y.DType, y.Shape, x.DType, x.Shape)
	}
	for d := range begin {
		if y.Shape[d] != x.Shape[d]+begin[d]+end[d] {
			return c.Errorf("output dimension %d is %d, want %d + %d + %d", d, y.Shape[d], x.Shape[d], begin[d], end[d])
		}
	}
	if y.Len() == 0 {
		return nil
	}
	mode := c.Op.AttrString("mode", "constant")
	if mode == "constant" {
		return shPadConstant(c, x, y, begin)
	}
	if x.Len() == 0 {
		return c.Errorf("cannot %s-pad an empty tensor", mode)
	}
	maps := make([][]int, r)
	for d := range maps {
		n := x.Shape[d]
		maps[d] = make([]int, y.Shape[d])
		for o := range maps[d] {
			i := int64(o) - begin[d]
			switch mode {
			case "edge":
				i = min(max(i, 0), n-1)
			case "wrap":
				i = ((i % n) + n) % n
			case "reflect":
				if n == 1 {
					i = 0
					break
				}
				p := 2 * (n - 1)
				i = ((i % p) + p) % p
				if i >= n {
					i = p - i
				}
			default:
				return c.Errorf("attribute mode is %q, want constant, reflect, edge or wrap", mode)
			}
			maps[d][o] = int(i)
		}
	}
	shMapGather(y, x, maps)
	return nil
}

// shPadConstant fills y with the pad value and copies the part of x
// that lands inside y.
func shPadConstant(c *Ctx, x, y *Tensor, begin []int64) error {
	es := esize(x.DType)
	val := make([]byte, es)
	if v := optIn(c, 2); v != nil {
		if v.DType != x.DType || v.Len() != 1 {
			return c.Errorf("input 2 (constant_value) is %v%v, want a scalar of type %v", v.DType, v.Shape, x.DType)
		}
		copy(val, v.Data)
	} else if a := c.Op.Attr("value"); a != nil && a.Float != 0 {
		t := &Tensor{DType: x.DType, Shape: ir.Shape{}, Data: val}
		if !ewCastable(x.DType) {
			return c.Errorf("attribute value cannot be converted to %v", x.DType)
		}
		ewCastFrom([]float64{float64(a.Float)}, t)
	}
	shFill(y.Data, val)
	r := len(x.Shape)
	region := make(ir.Shape, r)
	xst, yst := contigStrides(x.Shape), contigStrides(y.Shape)
	xb, yb := 0, 0
	for d := 0; d < r; d++ {
		lo := max(0, -begin[d])
		hi := min(x.Shape[d], y.Shape[d]-begin[d])
		if hi <= lo {
			return nil // nothing of x survives
		}
		region[d] = hi - lo
		xb += int(lo) * xst[d]
		yb += int(lo+begin[d]) * yst[d]
	}
	moveWalk(newWalk(region, yst, xst), y, x, es, []int{yb, xb})
	return nil
}

// shFill repeats the element pattern val over dst.
func shFill(dst, val []byte) {
	zero := true
	for _, b := range val {
		zero = zero && b == 0
	}
	if zero {
		clear(dst)
		return
	}
	es := len(val)
	if len(dst) < es {
		return
	}
	copy(dst, val)
	for n := es; n < len(dst); n *= 2 {
		copy(dst[n:], dst[:n])
	}
}
