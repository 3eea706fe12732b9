package kernels

import (
	"slices"

	"github.com/tsplit/tsplit/ir"
)

// Indexing ops: Gather, GatherElements, ScatterElements, ScatterND and
// OneHot. Data may have any byte-sized type (the reductions of the
// scatters need a numeric one); indices are int32 or int64 (any numeric
// type for OneHot), negative ones count from the end, and an index out
// of range is an error, found in a first pass before anything is
// written. Scatters apply updates in index order, so with duplicate
// indices the last update wins (reduction none), as in onnxruntime.

func init() {
	regOp("Gather", 2, 1, byteTypes, shGatherRun)
	regOp("GatherElements", 2, 1, byteTypes, shGatherElementsRun)
	regOp("ScatterElements", 3, 1, byteTypes, shScatterElementsRun)
	regOp("ScatterND", 3, 1, byteTypes, shScatterNDRun)
	regOp("OneHot", 3, 1, append([]ir.DType{}, numTypes...), shOneHotRun)
}

// shIdxCheck finds the first index outside [-dim, dim).
func shIdxCheck[I int32 | int64](idx []I, dim int64) (int, bool) {
	for i, v := range idx {
		if int64(v) < -dim || int64(v) >= dim {
			return i, false
		}
	}
	return 0, true
}

// shNorm maps an index in [-dim, dim) to [0, dim).
func shNorm[I int32 | int64](v I, dim int) int {
	k := int(v)
	if k < 0 {
		k += dim
	}
	return k
}

// shCheckIndices validates an int32/int64 index tensor against dim.
func shCheckIndices(c *Ctx, t *Tensor, dim int64, what string) error {
	var pos int
	var ok bool
	switch t.DType {
	case ir.Int64:
		pos, ok = shIdxCheck(viewAs[int64](t), dim)
	case ir.Int32:
		pos, ok = shIdxCheck(viewAs[int32](t), dim)
	default:
		return c.Errorf("%s has type %v, want int32 or int64", what, t.DType)
	}
	if !ok {
		v, _ := readScalar(c, &Tensor{DType: t.DType, Data: t.Data[pos*esize(t.DType):]}, what)
		return c.Errorf("%s has %v at position %d, out of range for a dimension of size %d", what, v, pos, dim)
	}
	return nil
}

func shGatherRun(c *Ctx) error {
	x, ind, y := c.In[0], c.In[1], c.Out[0]
	r := len(x.Shape)
	if r == 0 {
		return c.Errorf("input 0 is a scalar, Gather needs rank >= 1")
	}
	axis, err := axisIndex(c, "attribute axis", c.Op.AttrInt("axis", 0), r)
	if err != nil {
		return err
	}
	want := append(append(append(ir.Shape{}, x.Shape[:axis]...), ind.Shape...), x.Shape[axis+1:]...)
	if x.DType != y.DType || !want.Equal(y.Shape) {
		return c.Errorf("output is %v%v, want %v%v", y.DType, y.Shape, x.DType, want)
	}
	dim := x.Shape[axis]
	if err := shCheckIndices(c, ind, dim, "input 1 (indices)"); err != nil {
		return err
	}
	outer, nIdx := shapeLen(x.Shape[:axis]), ind.Len()
	block := shapeLen(x.Shape[axis+1:]) * esize(x.DType)
	if ind.DType == ir.Int64 {
		shGather(viewAs[int64](ind), y.Data, x.Data, outer, nIdx, int(dim), block)
	} else {
		shGather(viewAs[int32](ind), y.Data, x.Data, outer, nIdx, int(dim), block)
	}
	return nil
}

func shGather[I int32 | int64](idx []I, y, x []byte, outer, nIdx, dim, block int) {
	parRange(outer*nIdx, block/4, func(u0, u1 int) {
		for u := u0; u < u1; u++ {
			o, i := u/nIdx, u%nIdx
			src := (o*dim + shNorm(idx[i], dim)) * block
			copy(y[u*block:(u+1)*block], x[src:src+block])
		}
	})
}

// shElemsWalk checks GatherElements/ScatterElements shapes and returns
// the walk over the indices' shape: operand 0 is the indices (and
// updates, or the gathered output), operand 1 the data with stride 0
// along axis (the index supplies that coordinate); and the axis stride.
func shElemsWalk(c *Ctx, data, ind *Tensor) (*ndWalk, int, int64, error) {
	r := len(data.Shape)
	if r == 0 || len(ind.Shape) != r {
		return nil, 0, 0, c.Errorf("data has rank %d and indices %d; they must be equal and >= 1", r, len(ind.Shape))
	}
	axis, err := axisIndex(c, "attribute axis", c.Op.AttrInt("axis", 0), r)
	if err != nil {
		return nil, 0, 0, err
	}
	for d := range ind.Shape {
		if d != axis && ind.Shape[d] > data.Shape[d] {
			return nil, 0, 0, c.Errorf("indices of shape %v exceed data of shape %v on dimension %d", ind.Shape, data.Shape, d)
		}
	}
	dim := data.Shape[axis]
	if err := shCheckIndices(c, ind, dim, "input 1 (indices)"); err != nil {
		return nil, 0, 0, err
	}
	dst := contigStrides(data.Shape)
	ast := dst[axis]
	dst[axis] = 0
	return newWalk(ind.Shape, contigStrides(ind.Shape), dst), ast, dim, nil
}

func shGatherElementsRun(c *Ctx) error {
	x, ind, y := c.In[0], c.In[1], c.Out[0]
	if x.DType != y.DType || !ind.Shape.Equal(y.Shape) {
		return c.Errorf("output is %v%v, want %v%v (the indices' shape)", y.DType, y.Shape, x.DType, ind.Shape)
	}
	w, ast, dim, err := shElemsWalk(c, x, ind)
	if err != nil {
		return err
	}
	if y.Len() == 0 {
		return nil
	}
	k := wordOf(esize(x.DType))
	if k == nil {
		return c.Errorf("element type %v is not supported", x.DType)
	}
	k.gatherElems(w, y, x, ind, ast, int(dim))
	return nil
}

// shNumKernels are the typed bodies of the shape_* files' numeric
// kernels.
type shNumKernels interface {
	scatterElemsRed(w *ndWalk, y, upd, ind *Tensor, ast, dim, red int)
	scatterND(y, upd *Tensor, tuples, slice int, offs func(int) int, red int)
	oneHot(ind *Tensor, y, on []byte, outer, depth, inner int)
}

// shWordKernels are the typed bodies of the shape_* files' data-moving
// kernels.
type shWordKernels interface {
	gatherElems(w *ndWalk, y, x, ind *Tensor, ast, dim int)
	scatterElems(w *ndWalk, y, upd, ind *Tensor, ast, dim int)
	tiles(w *ndWalk, dst, src *Tensor)
	mapGather(y, x *Tensor, maps [][]int)
}

func (wordK[T]) gatherElems(w *ndWalk, yt, xt, ind *Tensor, ast, dim int) {
	y, x := viewAs[T](yt), viewAs[T](xt)
	if ind.DType == ir.Int64 {
		shGatherElems(w, y, x, viewAs[int64](ind), ast, dim)
		return
	}
	shGatherElems(w, y, x, viewAs[int32](ind), ast, dim)
}

func shGatherElems[T any, I int32 | int64](w *ndWalk, y, x []T, idx []I, ast, dim int) {
	sx := w.inner(1)
	w.par(nil, func(off []int, n int) {
		ys, is := y[off[0]:off[0]+n], idx[off[0]:off[0]+n]
		for j, v := range is {
			ys[j] = x[off[1]+j*sx+shNorm(v, dim)*ast]
		}
	})
}

// shReduction reads the scatter reduction attribute.
func shReduction(c *Ctx) (int, error) {
	switch red := c.Op.AttrString("reduction", "none"); red {
	case "none":
		return -1, nil
	case "add":
		return ewAdd, nil
	case "mul":
		return ewMul, nil
	case "max":
		return ewMax, nil
	case "min":
		return ewMin, nil
	default:
		return 0, c.Errorf("attribute reduction is %q, want none, add, mul, max or min", red)
	}
}

// shScatterInit checks data/updates/output types and copies data into
// the output, returning the reduction.
func shScatterInit(c *Ctx) (int, error) {
	x, upd, y := c.In[0], c.In[2], c.Out[0]
	if upd.DType != x.DType || y.DType != x.DType || !y.Shape.Equal(x.Shape) {
		return 0, c.Errorf("data %v%v, updates %v and output %v%v must agree", x.DType, x.Shape, upd.DType, y.DType, y.Shape)
	}
	red, err := shReduction(c)
	if err != nil {
		return 0, err
	}
	if red >= 0 && !slices.Contains(numTypes, x.DType) {
		return 0, c.Errorf("reduction %q is not supported on %v", c.Op.AttrString("reduction", ""), x.DType)
	}
	parCopy(y.Data, x.Data)
	return red, nil
}

func shScatterElementsRun(c *Ctx) error {
	x, ind, upd, y := c.In[0], c.In[1], c.In[2], c.Out[0]
	if !ind.Shape.Equal(upd.Shape) {
		return c.Errorf("indices have shape %v and updates %v; they must match", ind.Shape, upd.Shape)
	}
	w, ast, dim, err := shElemsWalk(c, x, ind)
	if err != nil {
		return err
	}
	red, err := shScatterInit(c)
	if err != nil {
		return err
	}
	if red < 0 {
		k := wordOf(esize(y.DType))
		if k == nil {
			return c.Errorf("element type %v is not supported", y.DType)
		}
		k.scatterElems(w, y, upd, ind, ast, int(dim))
		return nil
	}
	k := numOf(y.DType)
	if k == nil {
		return c.Errorf("element type %v is not supported", y.DType)
	}
	k.scatterElemsRed(w, y, upd, ind, ast, int(dim), red)
	return nil
}

func (wordK[T]) scatterElems(w *ndWalk, yt, ut, ind *Tensor, ast, dim int) {
	y, upd := viewAs[T](yt), viewAs[T](ut)
	if ind.DType == ir.Int64 {
		shScatterElems(w, y, upd, viewAs[int64](ind), ast, dim)
		return
	}
	shScatterElems(w, y, upd, viewAs[int32](ind), ast, dim)
}

func (numK[T, A]) scatterElemsRed(w *ndWalk, yt, ut, ind *Tensor, ast, dim, red int) {
	y, upd := viewAs[T](yt), viewAs[T](ut)
	if ind.DType == ir.Int64 {
		shScatterElemsRed(w, y, upd, viewAs[int64](ind), ast, dim, red)
		return
	}
	shScatterElemsRed(w, y, upd, viewAs[int32](ind), ast, dim, red)
}

// shScatterElems assigns updates sequentially (not in parallel: two
// updates may hit one element, and the last one wins).
func shScatterElems[T any, I int32 | int64](w *ndWalk, y, upd []T, idx []I, ast, dim int) {
	sy := w.inner(1)
	w.run(0, w.n, nil, func(off []int, n int) {
		for j := 0; j < n; j++ {
			y[off[1]+j*sy+shNorm(idx[off[0]+j], dim)*ast] = upd[off[0]+j]
		}
	})
}

// shScatterElemsRed combines updates into the elements with reduction
// red (an ew arithmetic code).
func shScatterElemsRed[T elemNum, I int32 | int64](w *ndWalk, y, upd []T, idx []I, ast, dim, red int) {
	sy := w.inner(1)
	w.run(0, w.n, nil, func(off []int, n int) {
		for j := 0; j < n; j++ {
			at := off[1] + j*sy + shNorm(idx[off[0]+j], dim)*ast
			y[at] = ewScalar(red, y[at], upd[off[0]+j])
		}
	})
}

func shScatterNDRun(c *Ctx) error {
	x, ind, upd, y := c.In[0], c.In[1], c.In[2], c.Out[0]
	if ind.DType != ir.Int64 {
		return c.Errorf("input 1 (indices) has type %v, ScatterND takes int64", ind.DType)
	}
	r, q := len(x.Shape), len(ind.Shape)
	if r == 0 || q == 0 {
		return c.Errorf("data and indices have ranks %d and %d, both must be >= 1", r, q)
	}
	k := int(ind.Shape[q-1])
	if k > r {
		return c.Errorf("indices have last dimension %d, more than the data rank %d", k, r)
	}
	want := append(ind.Shape[:q-1].Clone(), x.Shape[k:]...)
	if !upd.Shape.Equal(want) {
		return c.Errorf("updates have shape %v, want %v", upd.Shape, want)
	}
	idx := viewAs[int64](ind)
	tuples := shapeLen(ind.Shape[:q-1])
	for t := 0; t < tuples; t++ {
		for j := 0; j < k; j++ {
			if v, d := idx[t*k+j], x.Shape[j]; v < -d || v >= d {
				return c.Errorf("indices tuple %d has %d on axis %d of size %d", t, v, j, d)
			}
		}
	}
	red, err := shScatterInit(c)
	if err != nil {
		return err
	}
	st := contigStrides(x.Shape)
	slice := shapeLen(x.Shape[k:])
	if slice == 0 || tuples == 0 {
		return nil
	}
	offs := func(t int) int {
		o := 0
		for j := 0; j < k; j++ {
			o += shNorm(idx[t*k+j], int(x.Shape[j])) * st[j]
		}
		return o
	}
	if red < 0 {
		es := esize(x.DType)
		for t := 0; t < tuples; t++ {
			o := offs(t) * es
			copy(y.Data[o:o+slice*es], upd.Data[t*slice*es:(t+1)*slice*es])
		}
		return nil
	}
	typed := numOf(x.DType)
	if typed == nil {
		return c.Errorf("element type %v is not supported", x.DType)
	}
	typed.scatterND(y, upd, tuples, slice, offs, red)
	return nil
}

func (numK[T, A]) scatterND(yt, ut *Tensor, tuples, slice int, offs func(int) int, red int) {
	y, upd := viewAs[T](yt), viewAs[T](ut)
	for t := 0; t < tuples; t++ {
		ys, us := y[offs(t):][:slice], upd[t*slice:(t+1)*slice]
		for j, v := range us {
			ys[j] = ewScalar(red, ys[j], v)
		}
	}
}

// shOneHotRun: output[..., d, ...] (d on axis) is values[1] where the
// index equals d (negative indices count from depth), values[0]
// elsewhere; an index outside [-depth, depth) gives a row of values[0].
func shOneHotRun(c *Ctx) error {
	ind, depthT, vals, y := c.In[0], c.In[1], c.In[2], c.Out[0]
	r := len(ind.Shape) + 1
	axis, err := axisIndex(c, "attribute axis", c.Op.AttrInt("axis", -1), r)
	if err != nil {
		return err
	}
	if len(y.Shape) != r {
		return c.Errorf("output has rank %d, want %d", len(y.Shape), r)
	}
	depth := y.Shape[axis]
	if dv, err := readScalar(c, depthT, "input 1 (depth)"); err != nil {
		return err
	} else if int64(dv) != depth {
		return c.Errorf("input 1 (depth) is %v, the output has %d along axis %d", dv, depth, axis)
	}
	want := append(append(append(ir.Shape{}, ind.Shape[:axis]...), depth), ind.Shape[axis:]...)
	if vals.Len() != 2 || vals.DType != y.DType || !want.Equal(y.Shape) {
		return c.Errorf("values %v%v and output %v%v do not fit indices %v", vals.DType, vals.Shape, y.DType, y.Shape, ind.Shape)
	}
	es := esize(y.DType)
	if es == 0 {
		return c.Errorf("element type %v is not supported", y.DType)
	}
	shFill(y.Data, vals.Data[:es])
	outer, inner := shapeLen(ind.Shape[:axis]), shapeLen(ind.Shape[axis:])
	on := vals.Data[es : 2*es]
	k := numOf(ind.DType)
	if k == nil {
		return c.Errorf("indices of type %v are not supported", ind.DType)
	}
	k.oneHot(ind, y.Data, on, outer, int(depth), inner)
	return nil
}

func (numK[T, A]) oneHot(ind *Tensor, y, on []byte, outer, depth, inner int) {
	idx := viewAs[T](ind)
	es := len(on)
	for o := 0; o < outer; o++ {
		for i := 0; i < inner; i++ {
			k := int64(idx[o*inner+i]) // floats truncate toward zero
			if k < 0 {
				k += int64(depth)
			}
			if k < 0 || k >= int64(depth) {
				continue
			}
			at := ((o*depth+int(k))*inner + i) * es
			copy(y[at:at+es], on)
		}
	}
}
