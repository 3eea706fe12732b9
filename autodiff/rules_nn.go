package autodiff

import (
	"math"

	"github.com/tsplit/tsplit/ir"
)

// Gradient rules of the neural-network layers: convolution, pooling,
// normalisation, matrix products, softmax, dropout and GELU. Every rule
// emits standard ONNX operators:
//
//   - Conv: dX is a ConvTranspose of dY with W (same strides, dilations,
//     group; padding and output_padding chosen so the output is exactly
//     X's size); dW is a Conv of X, laid out as [C/g, g·N, spatial...],
//     with dY as [M, N, spatial...] for weight (group g, strides and
//     dilations swapped), cropped with Slice to the kernel and transposed
//     to [M, C/g, k...]; dB a ReduceSum.
//   - ConvTranspose: dX is a Conv of dY with W; dW the same transposed-
//     operand Conv with the roles of X and dY exchanged; dB a ReduceSum.
//   - MaxPool: dY scattered with ScatterElements(reduction="add") into
//     zeros of the flattened input at the forward op's Indices (added to
//     the forward op with Graph.AddOutput when it has none).
//   - AveragePool: a ConvTranspose of dY (as [N·C, 1, ...]) with a
//     constant [1, 1, k...] kernel of 1/k, or of ones after dY is scaled
//     by a constant tensor of 1/count per window when the counts differ
//     (count_include_pad=0 with padding, ceil_mode windows).
//   - GlobalAveragePool: Expand of dY/count; GlobalMaxPool: dY routed to
//     the elements Equal to the maximum (split evenly among ties).
//   - BatchNormalization, LayerNormalization: the closed forms over
//     ReduceMean/ReduceSum; Gemm and MatMul: Gemm and MatMul of dY with
//     the other operand; Softmax, LogSoftmax: from the output; Dropout:
//     through the forward mask; Gelu: its derivative in Erf/Exp or Tanh.

func init() {
	registerAll(map[string]Rule{
		"Conv": convGrad, "ConvTranspose": convTransposeGrad,
		"MaxPool": maxPoolGrad, "AveragePool": averagePoolGrad,
		"GlobalAveragePool": globalAveragePoolGrad, "GlobalMaxPool": globalMaxPoolGrad,
		"BatchNormalization": batchNormGrad, "LayerNormalization": layerNormGrad,
		"Gemm": gemmGrad, "MatMul": matMulGrad,
		"Softmax": softmaxGrad(false), "LogSoftmax": softmaxGrad(true),
		"Dropout": dropoutGrad, "Gelu": geluGrad,
	})
}

// ---- small helpers ----

func nnAInts(name string, v ...int64) ir.Attr {
	return ir.Attr{Name: name, Type: ir.AttrInts, Ints: append([]int64{}, v...)}
}
func nnAInt(name string, v int64) ir.Attr { return ir.Attr{Name: name, Type: ir.AttrInt, Int: v} }
func nnAFloat(name string, v float32) ir.Attr {
	return ir.Attr{Name: name, Type: ir.AttrFloat, Float: v}
}
func nnAStr(name, v string) ir.Attr { return ir.Attr{Name: name, Type: ir.AttrString, String: v} }

func nnNumel(s ir.Shape) int64 {
	n := int64(1)
	for _, d := range s {
		n *= d
	}
	return n
}

func nnCat(parts ...[]int64) ir.Shape {
	var s ir.Shape
	for _, p := range parts {
		s = append(s, p...)
	}
	return s
}

func nnRange(lo, hi int) []int64 {
	var r []int64
	for i := lo; i < hi; i++ {
		r = append(r, int64(i))
	}
	return r
}

// nnAllBut1 lists the axes of a rank-r tensor except the channel axis 1.
func nnAllBut1(r int) []int64 { return append([]int64{0}, nnRange(2, r)...) }

// nnReduce emits a reduction over axes (non-empty, non-negative) in the
// form of the model's opset: axes as an input from opset 13 (ReduceSum)
// or 18 (the others), as an attribute before.
func nnReduce(b *Builder, typ string, x *ir.Value, axes []int64, keep bool) *ir.Value {
	if x == nil || b.Err() != nil {
		return nil
	}
	if len(axes) == 0 {
		return x
	}
	k := int64(0)
	if keep {
		k = 1
	}
	since := int64(18)
	if typ == "ReduceSum" {
		since = 13
	}
	if b.M.Opset("") >= since {
		return b.Op(typ, []*ir.Value{x, b.Ints(axes...)}, nnAInt("keepdims", k))
	}
	return b.Op(typ, []*ir.Value{x}, nnAInts("axes", axes...), nnAInt("keepdims", k))
}

// nnTranspose permutes v's axes; a permutation that keeps the order of
// the axes longer than 1 is a Reshape (no data movement).
func nnTranspose(b *Builder, v *ir.Value, perm ...int64) *ir.Value {
	if v == nil || b.Err() != nil {
		return nil
	}
	out := make(ir.Shape, len(perm))
	last, moves := int64(-1), false
	for i, p := range perm {
		out[i] = v.Shape[p]
		if v.Shape[p] != 1 {
			if p < last {
				moves = true
			}
			last = p
		}
	}
	if !moves {
		return b.Reshape(v, out)
	}
	return b.Op("Transpose", []*ir.Value{v}, nnAInts("perm", perm...))
}

// nnSwap01 is the permutation exchanging axes 0 and 1 of a rank-r tensor.
func nnSwap01(r int) []int64 { return append([]int64{1, 0}, nnRange(2, r)...) }

// nnSwapLast is the permutation exchanging the last two axes.
func nnSwapLast(r int) []int64 {
	p := nnRange(0, r)
	p[r-2], p[r-1] = p[r-1], p[r-2]
	return p
}

// nnCrop slices v to shape (a prefix of every axis) where they differ.
func nnCrop(b *Builder, v *ir.Value, shape ir.Shape) *ir.Value {
	if v == nil || b.Err() != nil {
		return nil
	}
	var starts, ends, axes []int64
	for i, d := range shape {
		if v.Shape[i] != d {
			starts, ends, axes = append(starts, 0), append(ends, d), append(axes, int64(i))
		}
	}
	if len(axes) == 0 {
		return v
	}
	if b.M.Opset("") < 10 {
		return b.Op("Slice", []*ir.Value{v}, nnAInts("starts", starts...), nnAInts("ends", ends...), nnAInts("axes", axes...))
	}
	return b.Op("Slice", []*ir.Value{v, b.Ints(starts...), b.Ints(ends...), b.Ints(axes...)})
}

// nnConst is a constant tensor of v's element type.
func nnConst(b *Builder, dt ir.DType, shape ir.Shape, vals []float64) *ir.Value {
	return b.Const(ir.TensorFromFloat64s(dt, shape, vals))
}

// nnConstBool reads a constant bool (or numeric) scalar.
func nnConstBool(v *ir.Value) (val, known bool) {
	if v == nil || !v.IsConst() {
		return false, false
	}
	t, err := v.Data()
	if err != nil || t == nil || t.Len() != 1 {
		return false, false
	}
	return t.Int64s()[0] != 0, true
}

// nnConstFloat reads a constant float scalar.
func nnConstFloat(v *ir.Value) (float64, bool) {
	if v == nil || !v.IsConst() {
		return 0, false
	}
	t, err := v.Data()
	if err != nil || t == nil || t.Len() != 1 {
		return 0, false
	}
	return t.Float64s()[0], true
}

// nnForwardOutput returns output i of a forward op, adding it (with
// Graph.AddOutput, which keeps the op's uses and infers its type) when
// the op does not produce it: rules read what the forward pass computed
// (MaxPool's Indices, Dropout's mask) instead of recomputing it.
func nnForwardOutput(b *Builder, op *ir.Op, i int, what string) *ir.Value {
	if b.Err() != nil {
		return nil
	}
	if v := op.Output(i); v != nil {
		return v
	}
	name := op.Output(0).Name + "_" + what
	if b.G.Lookup(name) != nil {
		name = b.fresh(what)
	}
	v, err := b.G.AddOutput(op, i, name, b.M.Opset(op.Domain))
	if err != nil {
		b.Fail("autodiff: adding output %d (%s) to %s: %v", i, what, op.Describe(), err)
		return nil
	}
	return v
}

// nnNeedOpset fails unless the model's opset is at least v.
func nnNeedOpset(b *Builder, op *ir.Op, v int64, why string) bool {
	if o := b.M.Opset(""); o < v {
		b.Fail("autodiff: the gradient of %s uses %s, which needs opset >= %d; the model has opset %d", op.Describe(), why, v, o)
		return false
	}
	return true
}

// nnTransposePads chooses the padding and output_padding of a
// ConvTranspose that spreads o window positions (stride s, dilation d,
// kernel k, begin padding pb) back over an input of exactly size in:
// with t = s·(o-1) + ek - pb - in the end padding is t when t >= 0, and
// otherwise the output is extended by output_padding -t (the input's
// tail no window reached).
func nnTransposePads(b *Builder, st, dil, k, o, in, pb []int64) (pads, opad []int64) {
	n := len(in)
	pads, opad = make([]int64, 2*n), make([]int64, n)
	for i := 0; i < n; i++ {
		ek := (k[i]-1)*dil[i] + 1
		t := st[i]*(o[i]-1) + ek - pb[i] - in[i]
		pads[i] = pb[i]
		if t >= 0 {
			pads[n+i] = t
		} else {
			opad[i] = -t
			if opad[i] >= st[i] && opad[i] >= dil[i] {
				b.Fail("autodiff: cannot spread %d windows back over %d elements (output_padding %d)", o[i], in[i], opad[i])
			}
		}
	}
	return pads, opad
}

// nnWindowAttrs are the attributes of a Conv or ConvTranspose that the
// rules emit.
func nnWindowAttrs(st, dil, pads, opad []int64, group int64) []ir.Attr {
	a := []ir.Attr{nnAInts("strides", st...), nnAInts("dilations", dil...), nnAInts("pads", pads...)}
	if group != 1 {
		a = append(a, nnAInt("group", group))
	}
	for _, p := range opad {
		if p != 0 {
			a = append(a, nnAInts("output_padding", opad...))
			break
		}
	}
	return a
}

// ---- Conv and ConvTranspose ----

// convGrad: Y[n,m,o] = Σ_{c,k} X[n, g(m)·Cg + c, o·s - pb + k·d]·W[m,c,k] + B[m].
func convGrad(b *Builder, op *ir.Op, dy []*ir.Value, need []bool) []*ir.Value {
	x, w := op.Input(0), op.Input(1)
	out := make([]*ir.Value, len(op.Inputs()))
	g := dy[0]
	win, err := ir.WindowOf(op)
	if err != nil {
		b.Fail("autodiff: %v", err)
		return out
	}
	group := op.AttrInt("group", 1)
	r := len(x.Shape)
	n := r - 2
	in, o := []int64(x.Shape[2:]), []int64(g.Shape[2:])
	pb := win.Pads[:n]
	if need[0] {
		// dX[n,ch,i] = Σ dY[n,m,o]·W[m,c,k] over i = o·s - pb + k·d: the
		// scatter a ConvTranspose does, W [M, C/g, k...] being exactly a
		// ConvTranspose weight (M input channels, C/g outputs per group).
		pads, opad := nnTransposePads(b, win.Strides, win.Dilations, win.Kernel, o, in, pb)
		out[0] = b.Op("ConvTranspose", []*ir.Value{g, w}, nnWindowAttrs(win.Strides, win.Dilations, pads, opad, group)...)
	}
	if need[1] {
		out[1] = windowWeightGrad(b, x, g, group, win.Strides, win.Dilations, pb, w.Shape)
	}
	if len(need) > 2 && need[2] {
		out[2] = nnReduce(b, "ReduceSum", g, nnAllBut1(r), false)
	}
	return out
}

// windowWeightGrad is Conv's weight gradient,
//
//	dW[m,c,k] = Σ_{n,o} dY[n,m,o]·X[n, g(m)·Cg + c, o·s - pb + k·d],
//
// a convolution over k of X with dY as kernel: X as [Cg, g·N, in...]
// (channel (gi, n) of batch element c is X[n, gi·Cg + c]) convolved,
// group g, with dY as [M, N, o...] for weight, stride d and dilation s,
// gives [Cg, M, k'...] with k' >= k; Slice to k and a transpose give
// [M, Cg, k...]. dY here is any [N, M, o...] tensor and X [N, C, in...].
func windowWeightGrad(b *Builder, x, dy *ir.Value, group int64, st, dil, pb []int64, wShape ir.Shape) *ir.Value {
	N, C, M := x.Shape[0], x.Shape[1], dy.Shape[1]
	r := len(x.Shape)
	n := r - 2
	in, o, k := []int64(x.Shape[2:]), []int64(dy.Shape[2:]), []int64(wShape[2:])
	cg := C / group
	var xp *ir.Value
	if group == 1 {
		xp = nnTranspose(b, x, nnSwap01(r)...)
	} else {
		x5 := b.Reshape(x, nnCat([]int64{N, group, cg}, in))
		xt := nnTranspose(b, x5, append([]int64{2, 1, 0}, nnRange(3, r+1)...)...)
		xp = b.Reshape(xt, nnCat([]int64{cg, group * N}, in))
	}
	dyp := nnTranspose(b, dy, nnSwap01(r)...) // [M, N, o...]
	pads := make([]int64, 2*n)
	for i := 0; i < n; i++ {
		pads[i] = pb[i]
		pads[n+i] = max(0, (k[i]-1)*dil[i]+(o[i]-1)*st[i]+1-in[i]-pb[i])
	}
	c := b.Op("Conv", []*ir.Value{xp, dyp}, nnWindowAttrs(dil, st, pads, nil, group)...)
	c = nnCrop(b, c, nnCat([]int64{cg, M}, k))
	return nnTranspose(b, c, nnSwap01(r)...)
}

// convTransposeBegin is ConvTranspose's begin padding as the kernels
// resolve it: explicit pads, or with output_shape or auto_pad SAME_* the
// total s·(in-1) + output_padding + ek - out split (the odd element at
// the end for SAME_UPPER, at the beginning otherwise).
func convTransposeBegin(op *ir.Op, in, out, k, st, dil []int64) []int64 {
	n := len(in)
	opad := op.AttrInts("output_padding", make([]int64, n))
	ap := op.AttrString("auto_pad", "NOTSET")
	pb := make([]int64, n)
	if p := op.AttrInts("pads", nil); len(p) == 2*n && ap != "VALID" {
		copy(pb, p[:n])
	}
	if op.Attr("output_shape") == nil && ap != "SAME_UPPER" && ap != "SAME_LOWER" {
		return pb
	}
	for i := 0; i < n; i++ {
		ek := (k[i]-1)*dil[i] + 1
		total := max(0, st[i]*(in[i]-1)+opad[i]+ek-out[i])
		if ap == "SAME_UPPER" {
			pb[i] = total / 2
		} else {
			pb[i] = total - total/2
		}
	}
	return pb
}

// convTransposeGrad: Y[n, g·Mg + mm, i·s - pb + k·d] += X[n, g·Cg + c, i]·W[g·Cg + c, mm, k].
func convTransposeGrad(b *Builder, op *ir.Op, dy []*ir.Value, need []bool) []*ir.Value {
	x, w := op.Input(0), op.Input(1)
	out := make([]*ir.Value, len(op.Inputs()))
	g := dy[0]
	r := len(x.Shape)
	n := r - 2
	group := op.AttrInt("group", 1)
	in, o, k := []int64(x.Shape[2:]), []int64(g.Shape[2:]), []int64(w.Shape[2:])
	st := op.AttrInts("strides", nil)
	dil := op.AttrInts("dilations", nil)
	if st == nil {
		st = nnFilled(n, 1)
	}
	if dil == nil {
		dil = nnFilled(n, 1)
	}
	if len(st) != n || len(dil) != n {
		b.Fail("autodiff: %s: strides %v or dilations %v do not have %d values", op.Describe(), st, dil, n)
		return out
	}
	pb := convTransposeBegin(op, in, o, k, st, dil)
	if need[0] {
		// dX[n,ch,i] = Σ_{mm,k} dY[n, g·Mg + mm, i·s - pb + k·d]·W[ch,mm,k]:
		// a Conv of dY with W, cropped when dY's tail reaches past X.
		pads := make([]int64, 2*n)
		for i := 0; i < n; i++ {
			pads[i] = pb[i]
			pads[n+i] = max(0, st[i]*(in[i]-1)+(k[i]-1)*dil[i]+1-o[i]-pb[i])
		}
		dx := b.Op("Conv", []*ir.Value{g, w}, nnWindowAttrs(st, dil, pads, nil, group)...)
		out[0] = nnCrop(b, dx, x.Shape)
	}
	if need[1] {
		// dW[ch,mm,k] = Σ_{n,i} X[n,ch,i]·dY[n, g·Mg + mm, i·s - pb + k·d]:
		// windowWeightGrad with the roles of X and dY exchanged gives
		// [Mg, C, k...] laid out as [C, Mg, k...] after its transpose.
		out[1] = windowWeightGrad(b, g, x, group, st, dil, pb, nnCat([]int64{x.Shape[1], w.Shape[1]}, k))
	}
	if len(need) > 2 && need[2] {
		out[2] = nnReduce(b, "ReduceSum", g, nnAllBut1(r), false)
	}
	return out
}

func nnFilled(n int, v int64) []int64 {
	s := make([]int64, n)
	for i := range s {
		s[i] = v
	}
	return s
}

// ---- pooling ----

// poolTaps counts, per spatial dimension and output coordinate, the
// window taps that land inside the input (or, with inclPad, inside the
// padded input, clipped at the end padding as the kernel does).
// tapsFit checks that poolTaps' tables (and the loop filling them,
// output positions × kernel taps per axis) stay within the constant
// bound.
func tapsFit(b *Builder, win *ir.Window, o []int64) bool {
	for i := range o {
		if !b.Materialize("window taps", o[i], win.Kernel[i]) {
			return false
		}
	}
	return true
}

func poolTaps(win *ir.Window, in, o []int64, inclPad bool) [][]int64 {
	n := len(in)
	cnt := make([][]int64, n)
	for i := 0; i < n; i++ {
		lo, hi := int64(0), in[i]
		if inclPad {
			lo, hi = -win.Pads[i], in[i]+win.Pads[n+i]
		}
		cnt[i] = make([]int64, o[i])
		for oc := range cnt[i] {
			for t := int64(0); t < win.Kernel[i]; t++ {
				p := int64(oc)*win.Strides[i] - win.Pads[i] + t*win.Dilations[i]
				if p >= lo && p < hi {
					cnt[i][oc]++
				}
			}
		}
	}
	return cnt
}

// maxPoolGrad scatters dY to the maxima the forward op's Indices name:
// per (n, c) plane, ScatterElements(zeros[N·C, H·W], Indices − plane·H·W,
// dY, axis 1, reduction="add"), then Reshape. (Indices are flat indices
// into the whole input; making them plane-local keeps the scatter
// splittable along the planes, so the planner can split it by batch.)
// Windows entirely in the padding have index -1 and no input: their
// updates are masked to 0.
func maxPoolGrad(b *Builder, op *ir.Op, dy []*ir.Value, need []bool) []*ir.Value {
	x, y := op.Input(0), op.Output(0)
	out := make([]*ir.Value, 1)
	if !nnNeedOpset(b, op, 16, `ScatterElements with reduction="add"`) {
		return out
	}
	win, err := ir.WindowOf(op)
	if err != nil {
		b.Fail("autodiff: %v", err)
		return out
	}
	idx := nnForwardOutput(b, op, 1, "indices")
	if idx == nil {
		return out
	}
	if !b.Materialize("batch × channels plane offsets", x.Shape[0], x.Shape[1]) || !tapsFit(b, win, y.Shape[2:]) {
		return out
	}
	planes := x.Shape[0] * x.Shape[1]
	xvol := nnNumel(x.Shape[2:])
	yvol := nnNumel(y.Shape[2:])
	ind := b.Reshape(idx, ir.Shape{planes, yvol})
	upd := b.Reshape(dy[0], ir.Shape{planes, yvol})
	if op.AttrInt("storage_order", 0) == 1 {
		ind = b.Reshape(rowMajorIndices(b, b.Reshape(ind, ir.Shape{planes * yvol}), x.Shape), ir.Shape{planes, yvol})
	}
	empty := false
	for _, c := range poolTaps(win, x.Shape[2:], y.Shape[2:], false) {
		for _, v := range c {
			empty = empty || v == 0
		}
	}
	var neg *ir.Value
	if empty {
		neg = b.Op("Less", []*ir.Value{ind, b.Scalar(ir.Int64, 0)})
	}
	offsets := make([]int64, planes)
	for p := range offsets {
		offsets[p] = int64(p) * xvol
	}
	ind = b.Sub(ind, b.Const(ir.TensorFromInt64s(ir.Int64, ir.Shape{planes, 1}, offsets)))
	if empty {
		upd = b.Op("Where", []*ir.Value{neg, b.Scalar(x.DType, 0), upd})
		ind = b.Op("Where", []*ir.Value{neg, b.Scalar(ir.Int64, 0), ind})
	}
	sc := b.Op("ScatterElements", []*ir.Value{b.Zeros(x.DType, ir.Shape{planes, xvol}), ind, upd},
		nnAInt("axis", 1), nnAStr("reduction", "add"))
	out[0] = b.Reshape(sc, x.Shape)
	return out
}

// rowMajorIndices converts MaxPool indices of storage_order 1 (the
// spatial position counted column-major within its (n, c) plane) to
// row-major flat indices, with integer Div and Mod.
func rowMajorIndices(b *Builder, ind *ir.Value, xs ir.Shape) *ir.Value {
	sp := xs[2:]
	vol := nnNumel(sp)
	i64 := func(v int64) *ir.Value { return b.Scalar(ir.Int64, float64(v)) }
	plane := b.Mul(b.Div(ind, i64(vol)), i64(vol))
	rest := b.Sub(ind, plane)
	// rest = i0 + i1·S0 + i2·S0·S1 + ...; rebuild ((i0·S1 + i1)·S2 + i2)...
	var row *ir.Value
	for d := range sp {
		c := rest
		if d < len(sp)-1 {
			c = b.Op("Mod", []*ir.Value{rest, i64(sp[d])})
			rest = b.Div(rest, i64(sp[d]))
		}
		if row == nil {
			row = c
		} else {
			row = b.Add(b.Mul(row, i64(sp[d])), c)
		}
	}
	return b.Add(plane, row)
}

// averagePoolGrad spreads dY/count back over every window: a
// ConvTranspose of dY as [N·C, 1, o...] with a constant [1, 1, k...]
// kernel (same strides, dilations, begin padding; output exactly the
// input's size). When every window counts prod(k) elements the kernel
// holds 1/prod(k); otherwise dY is first multiplied by a constant
// [1, 1, o...] tensor of 1/count (0 for an empty window) and the kernel
// holds ones.
func averagePoolGrad(b *Builder, op *ir.Op, dy []*ir.Value, need []bool) []*ir.Value {
	x, y := op.Input(0), op.Output(0)
	out := make([]*ir.Value, 1)
	win, err := ir.WindowOf(op)
	if err != nil {
		b.Fail("autodiff: %v", err)
		return out
	}
	r := len(x.Shape)
	n := r - 2
	in, o := []int64(x.Shape[2:]), []int64(y.Shape[2:])
	if !tapsFit(b, win, o) || !b.Materialize("kernel", win.Kernel...) {
		return out
	}
	cnt := poolTaps(win, in, o, op.AttrInt("count_include_pad", 0) == 1)
	uniform := true
	for i := range cnt {
		for _, c := range cnt[i] {
			uniform = uniform && c == win.Kernel[i]
		}
	}
	g := dy[0]
	wv := 1.0
	if uniform {
		wv = 1 / float64(nnNumel(win.Kernel))
	} else {
		if !b.Materialize("window counts", o...) {
			return out
		}
		inv := make([]float64, nnNumel(o))
		coord := make([]int64, n)
		for j := range inv {
			c := int64(1)
			for i := 0; i < n; i++ {
				c *= cnt[i][coord[i]]
			}
			if c > 0 {
				inv[j] = 1 / float64(c)
			}
			for i := n - 1; i >= 0; i-- {
				coord[i]++
				if coord[i] < o[i] {
					break
				}
				coord[i] = 0
			}
		}
		g = b.Mul(g, nnConst(b, x.DType, nnCat([]int64{1, 1}, o), inv))
	}
	kvals := make([]float64, nnNumel(win.Kernel))
	for i := range kvals {
		kvals[i] = wv
	}
	kern := nnConst(b, x.DType, nnCat([]int64{1, 1}, win.Kernel), kvals)
	g = b.Reshape(g, nnCat([]int64{x.Shape[0] * x.Shape[1], 1}, o))
	pads, opad := nnTransposePads(b, win.Strides, win.Dilations, win.Kernel, o, in, win.Pads[:n])
	dx := b.Op("ConvTranspose", []*ir.Value{g, kern}, nnWindowAttrs(win.Strides, win.Dilations, pads, opad, 1)...)
	out[0] = b.Reshape(dx, x.Shape)
	return out
}

func globalAveragePoolGrad(b *Builder, op *ir.Op, dy []*ir.Value, need []bool) []*ir.Value {
	x := op.Input(0)
	vol := nnNumel(x.Shape[2:])
	g := b.Mul(dy[0], b.Scalar(x.DType, 1/float64(vol)))
	if g == nil || g.Shape.Equal(x.Shape) {
		return []*ir.Value{g}
	}
	return []*ir.Value{b.Op("Expand", []*ir.Value{g, b.Ints(x.Shape...)})}
}

// globalMaxPoolGrad routes dY to the elements equal to their plane's
// maximum, divided among them when several tie.
func globalMaxPoolGrad(b *Builder, op *ir.Op, dy []*ir.Value, need []bool) []*ir.Value {
	x, y := op.Input(0), op.Output(0)
	r := len(x.Shape)
	mask := b.Op("Equal", []*ir.Value{x, y})
	g := dy[0]
	if r > 2 {
		ties := nnReduce(b, "ReduceSum", b.Op("Cast", []*ir.Value{mask}, nnAInt("to", int64(x.DType))), nnRange(2, r), true)
		g = b.Div(g, ties)
	}
	return []*ir.Value{b.Op("Where", []*ir.Value{mask, g, b.Scalar(x.DType, 0)})}
}

// ---- normalisation ----

// batchNormGrad: Y = γ·x̂ + β with x̂ = (X - μ)·invstd per channel. In
// training mode (ir.BatchNormTraining) μ and σ² are the batch mean and
// biased variance the kernel normalised with, recomputed here in the
// graph with ReduceMean (since opset 14 the op has no output that saves
// them), and
//
//	dX = γ·invstd·(dY - ΣdY/N - x̂·Σ(dY·x̂)/N)
//
// (sums over N and the spatial axes, N their element count); in
// inference mode the running statistics are constants of the forward
// op and dX = dY·γ·invstd. dγ = Σ(dY·x̂), dβ = ΣdY. The running
// statistics get no gradient.
func batchNormGrad(b *Builder, op *ir.Op, dy []*ir.Value, need []bool) []*ir.Value {
	x, scale := op.Input(0), op.Input(1)
	out := make([]*ir.Value, len(op.Inputs()))
	g := dy[0]
	if g == nil || !(need[0] || need[1] || need[2]) {
		return out
	}
	r := len(x.Shape)
	C := x.Shape[1]
	axes := nnAllBut1(r)
	bshape := make(ir.Shape, r)
	for i := range bshape {
		bshape[i] = 1
	}
	bshape[1] = C
	training := ir.BatchNormTraining(op)
	needXhat := need[1] || (need[0] && training)
	var xc, invstd *ir.Value
	if needXhat || need[0] {
		eps := b.Scalar(x.DType, float64(op.AttrFloat("epsilon", 1e-5)))
		if training {
			mu := nnReduce(b, "ReduceMean", x, axes, true)
			xc = b.Sub(x, mu)
			v := nnReduce(b, "ReduceMean", b.Mul(xc, xc), axes, true)
			invstd = b.Op("Reciprocal", []*ir.Value{b.Op("Sqrt", []*ir.Value{b.Add(v, eps)})})
		} else {
			invstd = b.Op("Reciprocal", []*ir.Value{b.Op("Sqrt", []*ir.Value{b.Add(b.Reshape(op.Input(4), bshape), eps)})})
			if needXhat {
				xc = b.Sub(x, b.Reshape(op.Input(3), bshape))
			}
		}
	}
	var xhat, sumDy, sumDyXhat *ir.Value
	if needXhat {
		xhat = b.Mul(xc, invstd)
		sumDyXhat = nnReduce(b, "ReduceSum", b.Mul(g, xhat), axes, true)
	}
	if need[2] || (need[0] && training) {
		sumDy = nnReduce(b, "ReduceSum", g, axes, true)
	}
	if need[0] {
		k := b.Mul(b.Reshape(scale, bshape), invstd)
		if training {
			inv := b.Scalar(x.DType, 1/float64(nnNumel(x.Shape)/C))
			inner := b.Sub(b.Sub(g, b.Mul(sumDy, inv)), b.Mul(xhat, b.Mul(sumDyXhat, inv)))
			out[0] = b.Mul(k, inner)
		} else {
			out[0] = b.Mul(g, k)
		}
	}
	if need[1] {
		out[1] = b.Reshape(sumDyXhat, ir.Shape{C})
	}
	if need[2] {
		out[2] = b.Reshape(sumDy, ir.Shape{C})
	}
	return out
}

// layerNormGrad: Y = x̂·Scale + B over the normalised axes [axis, r)
// with x̂ = (X - μ)·invstd. With g = dY·Scale and means over those axes,
//
//	dX = invstd·(g - mean(g) - x̂·mean(g·x̂)),
//
// dScale and dB are dY·x̂ and dY summed back to their shapes. μ and
// invstd are the forward op's Mean and InvStdDev outputs when present and
// at least as precise as X (cast to X's type), else recomputed.
func layerNormGrad(b *Builder, op *ir.Op, dy []*ir.Value, need []bool) []*ir.Value {
	x, scale, bias := op.Input(0), op.Input(1), op.Input(2)
	out := make([]*ir.Value, len(op.Inputs()))
	g := dy[0]
	if g == nil {
		return out
	}
	r := len(x.Shape)
	axis := op.AttrInt("axis", -1)
	if axis < 0 {
		axis += int64(r)
	}
	if axis < 0 || axis >= int64(r) {
		b.Fail("autodiff: %s: axis %d out of range", op.Describe(), op.AttrInt("axis", -1))
		return out
	}
	axes := nnRange(int(axis), r)
	stat := func(i int) *ir.Value {
		v := op.Output(i)
		switch {
		case v == nil || v.DType.Bits() < x.DType.Bits():
			return nil
		case v.DType != x.DType:
			return b.Op("Cast", []*ir.Value{v}, nnAInt("to", int64(x.DType)))
		}
		return v
	}
	needScale := len(need) > 1 && need[1]
	if !need[0] && !needScale {
		if len(need) > 2 && need[2] && bias != nil {
			out[2] = b.SumTo(g, bias.Shape)
		}
		return out
	}
	mu, invstd := stat(1), stat(2)
	if mu == nil {
		mu = nnReduce(b, "ReduceMean", x, axes, true)
	}
	xc := b.Sub(x, mu)
	if invstd == nil {
		v := nnReduce(b, "ReduceMean", b.Mul(xc, xc), axes, true)
		eps := b.Scalar(x.DType, float64(op.AttrFloat("epsilon", 1e-5)))
		invstd = b.Op("Reciprocal", []*ir.Value{b.Op("Sqrt", []*ir.Value{b.Add(v, eps)})})
	}
	xhat := b.Mul(xc, invstd)
	if need[0] {
		gs := b.Mul(g, scale)
		m1 := nnReduce(b, "ReduceMean", gs, axes, true)
		m2 := nnReduce(b, "ReduceMean", b.Mul(gs, xhat), axes, true)
		out[0] = b.Mul(invstd, b.Sub(b.Sub(gs, m1), b.Mul(xhat, m2)))
	}
	if needScale {
		out[1] = b.SumTo(b.Mul(g, xhat), scale.Shape)
	}
	if len(need) > 2 && need[2] && bias != nil {
		out[2] = b.SumTo(g, bias.Shape)
	}
	return out
}

// ---- matrix products ----

// gemmGrad: Y = α·op(A)·op(B) + β·C. With op(B)ᵀ and op(A)ᵀ read off
// the transposition flags, every gradient is one Gemm:
//
//	dA = α·dY·op(B)ᵀ (transA=0) or α·op(B)·dYᵀ (transA=1)
//	dB = α·op(A)ᵀ·dY (transB=0) or α·dYᵀ·op(A) (transB=1)
//	dC = β·dY summed to C's shape
func gemmGrad(b *Builder, op *ir.Op, dy []*ir.Value, need []bool) []*ir.Value {
	a, bm, c := op.Input(0), op.Input(1), op.Input(2)
	out := make([]*ir.Value, len(op.Inputs()))
	g := dy[0]
	tA, tB := op.AttrInt("transA", 0) != 0, op.AttrInt("transB", 0) != 0
	alpha, beta := op.AttrFloat("alpha", 1), op.AttrFloat("beta", 1)
	gemm := func(p, q *ir.Value, tp, tq bool) *ir.Value {
		var attrs []ir.Attr
		if tp {
			attrs = append(attrs, nnAInt("transA", 1))
		}
		if tq {
			attrs = append(attrs, nnAInt("transB", 1))
		}
		if alpha != 1 {
			attrs = append(attrs, nnAFloat("alpha", alpha))
		}
		return b.Op("Gemm", []*ir.Value{p, q}, attrs...)
	}
	if need[0] {
		if !tA {
			out[0] = gemm(g, bm, false, !tB)
		} else {
			out[0] = gemm(bm, g, tB, true)
		}
	}
	if need[1] {
		if !tB {
			out[1] = gemm(a, g, !tA, false)
		} else {
			out[1] = gemm(g, a, true, tA)
		}
	}
	if len(need) > 2 && need[2] && c != nil {
		switch beta {
		case 0:
			out[2] = b.Zeros(c.DType, c.Shape)
		case 1:
			out[2] = b.SumTo(g, c.Shape)
		default:
			out[2] = b.SumTo(b.Mul(g, b.Scalar(g.DType, float64(beta))), c.Shape)
		}
	}
	return out
}

// matMulGrad follows numpy.matmul's promotions: 1-D A is a [1, K] row, 1-D
// B a [K, 1] column, batch dimensions broadcast. dA = dY·Bᵀ and
// dB = Aᵀ·dY, summed over the batch dimensions an operand was broadcast
// along. When B has no batch dimensions (a Linear layer on a batch) the
// batch folds into the rows: both gradients are single Gemms with no
// transposes and no batch-sized intermediate.
func matMulGrad(b *Builder, op *ir.Op, dy []*ir.Value, need []bool) []*ir.Value {
	a, bm := op.Input(0), op.Input(1)
	out := make([]*ir.Value, 2)
	g := dy[0]
	as, bs := a.Shape, bm.Shape
	ap, bp := as, bs
	if len(as) == 1 {
		ap = ir.Shape{1, as[0]}
	}
	if len(bs) == 1 {
		bp = ir.Shape{bs[0], 1}
	}
	M, K, N := ap[len(ap)-2], ap[len(ap)-1], bp[len(bp)-1]
	batch, err := ir.Broadcast(ap[:len(ap)-2], bp[:len(bp)-2])
	if err != nil {
		b.Fail("autodiff: %s: %v", op.Describe(), err)
		return out
	}
	gp := b.Reshape(g, nnCat(batch, []int64{M, N}))
	A, B := b.Reshape(a, ap), b.Reshape(bm, bp)
	if len(bp) == 2 {
		P := nnNumel(batch)
		g2 := b.Reshape(gp, ir.Shape{P * M, N})
		if need[0] {
			out[0] = b.Reshape(b.Op("Gemm", []*ir.Value{g2, B}, nnAInt("transB", 1)), as)
		}
		if need[1] {
			a2 := b.Reshape(A, ir.Shape{P * M, K})
			out[1] = b.Reshape(b.Op("Gemm", []*ir.Value{a2, g2}, nnAInt("transA", 1)), bs)
		}
		return out
	}
	if need[0] {
		full := b.Op("MatMul", []*ir.Value{gp, nnTranspose(b, B, nnSwapLast(len(bp))...)})
		out[0] = b.Reshape(b.SumTo(full, ap), as)
	}
	if need[1] {
		full := b.Op("MatMul", []*ir.Value{nnTranspose(b, A, nnSwapLast(len(ap))...), gp})
		out[1] = b.Reshape(b.SumTo(full, bp), bs)
	}
	return out
}

// ---- softmax ----

// softmaxGrad, from the output Y: Softmax dX = Y·(dY - Σ dY·Y),
// LogSoftmax dX = dY - exp(Y)·Σ dY, the sums over the normalised axis
// (opset >= 13) or, before opset 13, over every axis from axis on (the
// input is coerced to 2-D there; axis defaults to 1).
func softmaxGrad(log bool) Rule {
	return func(b *Builder, op *ir.Op, dy []*ir.Value, need []bool) []*ir.Value {
		y, g := op.Output(0), dy[0]
		r := int64(len(y.Shape))
		legacy := b.M.Opset("") < 13
		def := int64(-1)
		if legacy {
			def = 1
		}
		axis := op.AttrInt("axis", def)
		if axis < 0 {
			axis += r
		}
		if axis < 0 || axis >= r {
			b.Fail("autodiff: %s: axis %d out of range", op.Describe(), op.AttrInt("axis", def))
			return nil
		}
		axes := []int64{axis}
		if legacy {
			axes = nnRange(int(axis), int(r))
		}
		if log {
			s := nnReduce(b, "ReduceSum", g, axes, true)
			return []*ir.Value{b.Sub(g, b.Mul(b.Op("Exp", []*ir.Value{y}), s))}
		}
		s := nnReduce(b, "ReduceSum", b.Mul(g, y), axes, true)
		return []*ir.Value{b.Mul(y, b.Sub(g, s))}
	}
}

// ---- dropout ----

// dropoutGrad: in training mode dX = dY·mask/(1-ratio), as
// Where(mask, dY·(1/(1-ratio)), 0) with the forward op's mask output
// (added to the op when absent); with ratio 0 or in inference mode
// (training_mode absent or constant false; always before opset 12)
// Dropout is the identity. A training_mode known only at run time
// selects between the two with Where; a run-time ratio gives the scale
// as 1/(1-ratio) in the graph.
func dropoutGrad(b *Builder, op *ir.Op, dy []*ir.Value, need []bool) []*ir.Value {
	x := op.Input(0)
	out := make([]*ir.Value, len(op.Inputs()))
	g := dy[0]
	if g == nil || !need[0] {
		return out
	}
	if dropoutIdentity(op) {
		out[0] = g
		return out
	}
	tm := op.Input(2)
	_, known := nnConstBool(tm)
	var scale *ir.Value
	if rv := op.Input(1); rv == nil {
		scale = b.Scalar(x.DType, 1/(1-float64(op.AttrFloat("ratio", 0.5))))
	} else if r, ok := nnConstFloat(rv); ok {
		scale = b.Scalar(x.DType, 1/(1-r))
	} else {
		rc := rv
		if rv.DType != x.DType {
			rc = b.Op("Cast", []*ir.Value{rv}, nnAInt("to", int64(x.DType)))
		}
		scale = b.Op("Reciprocal", []*ir.Value{b.Sub(b.Scalar(x.DType, 1), b.Reshape(rc, ir.Shape{}))})
	}
	mask := nnForwardOutput(b, op, 1, "mask")
	d := b.Op("Where", []*ir.Value{mask, b.Mul(g, scale), b.Scalar(x.DType, 0)})
	if !known {
		d = b.Op("Where", []*ir.Value{b.Reshape(tm, ir.Shape{}), d, g})
	}
	out[0] = d
	return out
}

// ---- GELU ----

// geluGrad differentiates Gelu (opset 20):
//
//	exact: y = x·Φ(x), y' = Φ(x) + x·φ(x), Φ(x) = (1 + erf(x/√2))/2,
//	       φ(x) = exp(-x²/2)/√(2π);
//	tanh:  y = x/2·(1 + tanh u), u = √(2/π)·(x + 0.044715·x³),
//	       y' = (1 + tanh u)/2 + x/2·(1 - tanh² u)·√(2/π)·(1 + 3·0.044715·x²).
func geluGrad(b *Builder, op *ir.Op, dy []*ir.Value, need []bool) []*ir.Value {
	x := op.Input(0)
	dt := x.DType
	c := func(v float64) *ir.Value { return b.Scalar(dt, v) }
	var d *ir.Value
	switch ap := op.AttrString("approximate", "none"); ap {
	case "none":
		d = geluExactDeriv(b, x)
	case "tanh":
		k := math.Sqrt(2 / math.Pi)
		x2 := b.Mul(x, x)
		u := b.Mul(b.Mul(x, b.Add(c(1), b.Mul(x2, c(0.044715)))), c(k))
		t := b.Op("Tanh", []*ir.Value{u})
		du := b.Mul(b.Add(c(1), b.Mul(x2, c(3*0.044715))), c(k))
		d = b.Add(b.Mul(c(0.5), b.Add(c(1), t)), b.Mul(b.Mul(b.Mul(x, c(0.5)), b.Sub(c(1), b.Mul(t, t))), du))
	default:
		b.Fail("autodiff: %s: approximate %q, want \"none\" or \"tanh\"", op.Describe(), ap)
		return nil
	}
	return []*ir.Value{b.Mul(dy[0], d)}
}
