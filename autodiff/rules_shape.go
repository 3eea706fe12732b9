package autodiff

import (
	"math"

	"github.com/tsplit/tsplit/ir"
)

// Gradient rules of ops that move data without computing on it. Each
// gradient moves dy back to where the op read it: Concat's is a Split,
// Split's a Concat, Slice's a Pad (interleaved with zeros for strides),
// Pad's a Slice (plus, for the edge, reflect and wrap modes, the padded
// border folded back onto the elements it copies), Gather's a ScatterND
// with reduction "add" into zeros. Index and shape inputs get none.
//
// The axis and attribute semantics come from the ir package
// (ir.SplitSizes, ir.SliceRanges, ir.PadAmounts), which the inference
// rules share, so they are written once.

func init() {
	// Ops that only change the shape: the gradient is dy reshaped back.
	reshapeBack := func(b *Builder, op *ir.Op, dy []*ir.Value, need []bool) []*ir.Value {
		return []*ir.Value{reshapeTo(b, dy[0], op.Input(0).Shape)}
	}
	registerAll(map[string]Rule{
		"Concat": concatGrad, "Split": splitGrad, "Slice": sliceGrad, "Pad": padGrad,
		"Reshape": reshapeBack, "Flatten": reshapeBack, "Squeeze": reshapeBack, "Unsqueeze": reshapeBack,
		"Transpose": transposeGrad,
		"Expand": func(b *Builder, op *ir.Op, dy []*ir.Value, need []bool) []*ir.Value {
			return []*ir.Value{b.SumTo(dy[0], op.Input(0).Shape)}
		},
		"Tile": tileGrad, "Gather": gatherGrad, "GatherElements": gatherElementsGrad, "Where": whereGrad,
	})
}

// numel is the element count of a static shape.
func numel(s ir.Shape) int64 {
	n, _ := s.NumElements()
	return n
}

// attrAxis reads an axis attribute and maps it into [0, rank). The
// inference rule has already checked its range.
func attrAxis(op *ir.Op, name string, def int64, rank int) int {
	a := op.AttrInt(name, def)
	if a < 0 {
		a += int64(rank)
	}
	return int(a)
}

func intAttr(name string, v int64) ir.Attr { return ir.Attr{Name: name, Type: ir.AttrInt, Int: v} }

func intsAttr(name string, v ...int64) ir.Attr {
	return ir.Attr{Name: name, Type: ir.AttrInts, Ints: v}
}

func strAttr(name, v string) ir.Attr { return ir.Attr{Name: name, Type: ir.AttrString, String: v} }

// reshapeTo is Builder.Reshape that also serves empty shapes: a Reshape
// target with a 0 dimension means "copy" unless allowzero is set, so an
// empty result is made as zeros instead.
func reshapeTo(b *Builder, g *ir.Value, shape ir.Shape) *ir.Value {
	if g == nil || b.Err() != nil {
		return nil
	}
	if !g.Shape.Equal(shape) && numel(shape) == 0 {
		return b.Zeros(g.DType, shape)
	}
	return b.Reshape(g, shape)
}

// sliceAxes emits Slice(x, starts, ends, axes[, steps]) in the input
// form (opset >= 10); steps nil means all 1.
func sliceAxes(b *Builder, x *ir.Value, starts, ends, axes, steps []int64) *ir.Value {
	if b.Err() != nil {
		return nil
	}
	if b.M.Opset("") < 10 {
		if steps != nil {
			b.Fail("autodiff: a strided Slice needs opset >= 10, the model has %d", b.M.Opset(""))
			return nil
		}
		return b.Op("Slice", []*ir.Value{x}, intsAttr("starts", starts...), intsAttr("ends", ends...), intsAttr("axes", axes...))
	}
	in := []*ir.Value{x, b.Ints(starts...), b.Ints(ends...), b.Ints(axes...)}
	if steps != nil {
		in = append(in, b.Ints(steps...))
	}
	return b.Op("Slice", in)
}

// padZeros pads x with zeros: begin[d] and end[d] (>= 0) elements
// before and after each axis d. It is x itself when nothing is added.
func padZeros(b *Builder, x *ir.Value, begin, end []int64) *ir.Value {
	if x == nil || b.Err() != nil {
		return nil
	}
	pads := append(append([]int64(nil), begin...), end...)
	nonzero := false
	for _, p := range pads {
		nonzero = nonzero || p != 0
	}
	if !nonzero {
		return x
	}
	if b.M.Opset("") < 11 {
		return b.Op("Pad", []*ir.Value{x}, intsAttr("pads", pads...))
	}
	return b.Op("Pad", []*ir.Value{x, b.Ints(pads...)})
}

// reduceSum emits ReduceSum over axes (axes as input since opset 13, as
// attribute before).
func reduceSum(b *Builder, x *ir.Value, axes []int64, keepdims bool) *ir.Value {
	if x == nil || b.Err() != nil {
		return nil
	}
	kd := int64(0)
	if keepdims {
		kd = 1
	}
	if b.M.Opset("") < 13 {
		return b.Op("ReduceSum", []*ir.Value{x}, intsAttr("axes", axes...), intAttr("keepdims", kd))
	}
	return b.Op("ReduceSum", []*ir.Value{x, b.Ints(axes...)}, intAttr("keepdims", kd))
}

// reduceSumAll sums every element of x into a rank-0 value.
func reduceSumAll(b *Builder, x *ir.Value) *ir.Value {
	if x == nil || b.Err() != nil {
		return nil
	}
	if len(x.Shape) == 0 {
		return x
	}
	axes := make([]int64, len(x.Shape))
	for i := range axes {
		axes[i] = int64(i)
	}
	return reduceSum(b, x, axes, false)
}

// splitAxis emits Split of x along axis into parts of the given sizes
// (sizes as input since opset 13, as attribute before).
func splitAxis(b *Builder, x *ir.Value, axis int, sizes []int64) []*ir.Value {
	if x == nil || b.Err() != nil {
		return nil
	}
	if b.M.Opset("") < 13 {
		return b.OpN("Split", len(sizes), []*ir.Value{x}, intAttr("axis", int64(axis)), intsAttr("split", sizes...))
	}
	return b.OpN("Split", len(sizes), []*ir.Value{x, b.Ints(sizes...)}, intAttr("axis", int64(axis)))
}

// concatGrad splits dy back into the inputs' pieces: one Split when
// every input needs its gradient, else a Slice per input that does.
func concatGrad(b *Builder, op *ir.Op, dy []*ir.Value, need []bool) []*ir.Value {
	ins := op.Inputs()
	out := make([]*ir.Value, len(ins))
	if len(ins) == 1 {
		out[0] = dy[0]
		return out
	}
	axis := attrAxis(op, "axis", 0, len(op.Output(0).Shape))
	all := true
	sizes := make([]int64, len(ins))
	for i, in := range ins {
		sizes[i] = in.Shape[axis]
		all = all && need[i]
	}
	if all {
		if parts := splitAxis(b, dy[0], axis, sizes); parts != nil {
			copy(out, parts)
		}
		return out
	}
	off := int64(0)
	for i := range ins {
		if need[i] {
			out[i] = sliceAxes(b, dy[0], []int64{off}, []int64{off + sizes[i]}, []int64{int64(axis)}, nil)
		}
		off += sizes[i]
	}
	return out
}

// splitGrad concatenates the outputs' gradients; an output no gradient
// reaches contributes zeros.
func splitGrad(b *Builder, op *ir.Op, dy []*ir.Value, need []bool) []*ir.Value {
	x := op.Input(0)
	axis, sizes, err := ir.SplitSizes(op, b.M.Opset(""))
	if err != nil {
		b.Fail("%v", err)
		return nil
	}
	parts := make([]*ir.Value, len(sizes))
	for j, s := range sizes {
		if j < len(dy) && dy[j] != nil {
			parts[j] = dy[j]
			continue
		}
		shape := x.Shape.Clone()
		shape[axis] = s
		parts[j] = b.Zeros(x.DType, shape)
	}
	if len(parts) == 1 {
		return []*ir.Value{parts[0]}
	}
	return []*ir.Value{b.Op("Concat", parts, intAttr("axis", int64(axis)))}
}

// sliceGrad places dy where the slice read it, zeros elsewhere, with
// Slice, Reshape and Pad only:
//
//  1. axes sliced with a negative step are reversed (a Slice with step
//     −1), so every step is positive and the first element is the
//     lowest index taken;
//  2. axes with step s > 1 are interleaved with zeros: [n] is reshaped
//     to [n, 1], padded to [n, s] and flattened to [n·s], which puts
//     element k at k·s;
//  3. the trailing zeros beyond the input's dimension are cropped and
//     the result padded to the input's shape.
//
// A step-1 slice is thus a single Pad.
func sliceGrad(b *Builder, op *ir.Op, dy []*ir.Value, need []bool) []*ir.Value {
	x := op.Input(0)
	first, step, count, err := ir.SliceRanges(op)
	if err != nil {
		b.Fail("%v", err)
		return nil
	}
	if numel(ir.Shape(count)) == 0 || numel(x.Shape) == 0 {
		return []*ir.Value{b.Zeros(x.DType, x.Shape)}
	}
	r := len(x.Shape)
	g := dy[0]
	// 1. Reverse negative-step axes.
	var rev []int64
	lo := make([]int64, r)     // lowest input index taken
	stride := make([]int64, r) // |step|
	for d := 0; d < r; d++ {
		lo[d], stride[d] = first[d], step[d]
		if step[d] < 0 {
			lo[d] = first[d] + (count[d]-1)*step[d]
			stride[d] = -step[d]
			if count[d] > 1 {
				rev = append(rev, int64(d))
			}
		}
		if count[d] == 1 {
			stride[d] = 1
		}
	}
	if len(rev) > 0 {
		starts, ends, steps := make([]int64, len(rev)), make([]int64, len(rev)), make([]int64, len(rev))
		for i := range rev {
			starts[i], ends[i], steps[i] = -1, math.MinInt64, -1
		}
		g = sliceAxes(b, g, starts, ends, rev, steps)
	}
	// 2. Interleave strided axes with zeros.
	length := ir.Shape(count).Clone()
	var split ir.Shape
	var padEnd []int64
	strided := false
	for d := 0; d < r; d++ {
		split = append(split, count[d])
		padEnd = append(padEnd, 0)
		if stride[d] > 1 {
			split = append(split, 1)
			padEnd = append(padEnd, stride[d]-1)
			length[d] = count[d] * stride[d]
			strided = true
		}
	}
	if strided {
		g = reshapeTo(b, g, split)
		g = padZeros(b, g, make([]int64, len(split)), padEnd)
		g = reshapeTo(b, g, length)
	}
	// 3. Crop the zeros past the input's end, then pad into place.
	var cropEnds, cropAxes []int64
	begin, end := make([]int64, r), make([]int64, r)
	for d := 0; d < r; d++ {
		room := x.Shape[d] - lo[d]
		if length[d] > room {
			cropEnds = append(cropEnds, room)
			cropAxes = append(cropAxes, int64(d))
			length[d] = room
		}
		begin[d], end[d] = lo[d], room-length[d]
	}
	if len(cropAxes) > 0 {
		g = sliceAxes(b, g, make([]int64, len(cropAxes)), cropEnds, cropAxes, nil)
	}
	return []*ir.Value{padZeros(b, g, begin, end)}
}

// padGrad: for constant padding the gradient is the part of dy that
// holds the input (a Slice; axes the pads crop are padded back with
// zeros), and the constant value's gradient is the sum of dy over the
// padding. For edge, reflect and wrap padding each padded axis is folded
// back in turn (padAxisGrad).
func padGrad(b *Builder, op *ir.Op, dy []*ir.Value, need []bool) []*ir.Value {
	x, y := op.Input(0), op.Output(0)
	begin, end, err := ir.PadAmounts(op)
	if err != nil {
		b.Fail("%v", err)
		return nil
	}
	out := make([]*ir.Value, len(op.Inputs()))
	r := len(x.Shape)
	mode := op.AttrString("mode", "constant")
	if mode != "constant" {
		if numel(x.Shape) == 0 {
			out[0] = b.Zeros(x.DType, x.Shape)
			return out
		}
		g := dy[0]
		for d := 0; d < r; d++ {
			if begin[d] != 0 || end[d] != 0 {
				g = padAxisGrad(b, g, d, mode, begin[d], x.Shape[d])
			}
		}
		out[0] = g
		return out
	}
	// Constant mode: input element i sits at output i + begin.
	var starts, ends, axes []int64
	pb, pe := make([]int64, r), make([]int64, r)
	empty := numel(x.Shape) == 0
	for d := 0; d < r; d++ {
		s := max(begin[d], 0)
		e := min(begin[d]+x.Shape[d], y.Shape[d])
		if e <= s {
			empty = true
		}
		if s != 0 || e != y.Shape[d] {
			starts, ends, axes = append(starts, s), append(ends, e), append(axes, int64(d))
		}
		pb[d], pe[d] = max(-begin[d], 0), max(-end[d], 0)
	}
	var inner *ir.Value
	if !empty {
		inner = dy[0]
		if len(axes) > 0 {
			inner = sliceAxes(b, dy[0], starts, ends, axes, nil)
		}
	}
	if need[0] {
		if empty {
			out[0] = b.Zeros(x.DType, x.Shape)
		} else {
			out[0] = padZeros(b, inner, pb, pe)
		}
	}
	if len(need) > 2 && need[2] {
		v := op.Input(2)
		sum := reduceSumAll(b, dy[0])
		if inner != nil {
			sum = b.Sub(sum, reduceSumAll(b, inner))
		}
		out[2] = reshapeTo(b, sum, v.Shape)
	}
	return out
}

// padSource is the input index that output index o of a non-constant
// Pad copies along an axis of size n with begin pad begin (as the
// reference kernel and ONNX define the modes).
func padSource(mode string, o, begin, n int64) int64 {
	i := o - begin
	switch mode {
	case "edge":
		return min(max(i, 0), n-1)
	case "wrap":
		return ((i % n) + n) % n
	case "reflect":
		if n == 1 {
			return 0
		}
		p := 2 * (n - 1)
		i = ((i % p) + p) % p
		if i >= n {
			i = p - i
		}
		return i
	}
	return -1
}

// padAxisGrad folds the gradient g of an edge/reflect/wrap Pad along
// axis d back onto the n input elements. The output positions are
// grouped into runs whose sources step by +1 (a copy), −1 (a mirrored
// copy) or 0 (an edge element repeated); each run's slice of g is
// reversed or summed as needed, padded into place and added.
func padAxisGrad(b *Builder, g *ir.Value, d int, mode string, begin, n int64) *ir.Value {
	if g == nil || b.Err() != nil {
		return nil
	}
	if mode != "edge" && mode != "reflect" && mode != "wrap" {
		b.Fail("autodiff: no gradient rule for Pad mode %q", mode)
		return nil
	}
	O := g.Shape[d]
	r := len(g.Shape)
	var acc *ir.Value
	for o0 := int64(0); o0 < O; {
		i0 := padSource(mode, o0, begin, n)
		// Extend the run while the source keeps the slope of its first
		// step (a run of one element has slope 1).
		o1, slope := o0+1, int64(1)
		for o1 < O {
			diff := padSource(mode, o1, begin, n) - padSource(mode, o1-1, begin, n)
			if o1 == o0+1 && diff >= -1 && diff <= 1 {
				slope = diff
			}
			if diff != slope {
				break
			}
			o1++
		}
		piece := g
		if o0 != 0 || o1 != O {
			piece = sliceAxes(b, g, []int64{o0}, []int64{o1}, []int64{int64(d)}, nil)
		}
		lo, size := i0, o1-o0
		switch {
		case slope == -1:
			piece = sliceAxes(b, piece, []int64{-1}, []int64{math.MinInt64}, []int64{int64(d)}, []int64{-1})
			lo = i0 - (size - 1)
		case slope == 0:
			piece = reduceSum(b, piece, []int64{int64(d)}, true)
			size = 1
		}
		pb, pe := make([]int64, r), make([]int64, r)
		pb[d], pe[d] = lo, n-lo-size
		acc = b.Add(acc, padZeros(b, piece, pb, pe))
		o0 = o1
	}
	return acc
}

func transposeGrad(b *Builder, op *ir.Op, dy []*ir.Value, need []bool) []*ir.Value {
	r := len(op.Input(0).Shape)
	perm := op.AttrInts("perm", nil)
	if perm == nil {
		perm = make([]int64, r)
		for i := range perm {
			perm[i] = int64(r - 1 - i)
		}
	}
	inv := make([]int64, r)
	identity := true
	for i, p := range perm {
		inv[p] = int64(i)
		identity = identity && p == int64(i)
	}
	if identity {
		return []*ir.Value{dy[0]}
	}
	return []*ir.Value{b.Op("Transpose", []*ir.Value{dy[0]}, intsAttr("perm", inv...))}
}

// tileGrad: output axis d of Tile is reps[d] copies of input axis d, so
// dy is reshaped to [..., reps[d], n[d], ...] and summed over the
// repetition axes.
func tileGrad(b *Builder, op *ir.Op, dy []*ir.Value, need []bool) []*ir.Value {
	x, y := op.Input(0), op.Output(0)
	if numel(x.Shape) == 0 {
		return []*ir.Value{b.Zeros(x.DType, x.Shape)}
	}
	var split ir.Shape
	var axes []int64
	for d, n := range x.Shape {
		if reps := y.Shape[d] / n; reps != 1 {
			axes = append(axes, int64(len(split)))
			split = append(split, reps)
		}
		split = append(split, n)
	}
	if len(axes) == 0 {
		return []*ir.Value{dy[0]}
	}
	g := reduceSum(b, reshapeTo(b, dy[0], split), axes, false)
	return []*ir.Value{reshapeTo(b, g, x.Shape)}
}

// int64Indices casts an index tensor to int64 and maps negative indices
// into [0, dim) (skipped when the indices are known constants with no
// negative entry).
func int64Indices(b *Builder, ind *ir.Value, dim int64) *ir.Value {
	if b.Err() != nil {
		return nil
	}
	if ind.IsConst() && ind.DType == ir.Int64 && numel(ind.Shape) <= ir.MaxFoldElements {
		if t, err := ind.Data(); err == nil && t != nil {
			neg := false
			for _, v := range t.Int64s() {
				neg = neg || v < 0
			}
			if !neg {
				return ind
			}
		}
	}
	idx := ind
	if ind.DType != ir.Int64 {
		idx = b.Op("Cast", []*ir.Value{ind}, intAttr("to", int64(ir.Int64)))
	}
	isNeg := b.Op("Less", []*ir.Value{idx, b.Scalar(ir.Int64, 0)})
	return b.Op("Where", []*ir.Value{isNeg, b.Op("Add", []*ir.Value{idx, b.Scalar(ir.Int64, float64(dim))}), idx})
}

// needScatterAdd fails unless the model's opset has the scatter
// reductions (opset 16).
func needScatterAdd(b *Builder, op *ir.Op) bool {
	if v := b.M.Opset(""); v < 16 {
		b.Fail("autodiff: the gradient of %s accumulates with a scatter reduction=\"add\", which needs opset >= 16; the model has opset %d", op.Type, v)
		return false
	}
	return true
}

// gatherGrad is the embedding-lookup gradient: dy's slices are added,
// with ScatterND reduction="add", into zeros at the rows the indices
// name (repeated indices accumulate). Data of shape A·[dim]·S gathered
// along the middle axis is handled as [P, dim, S] (P = ∏A): the updates
// are dy as [N, S] (P = 1, no copy) or [N, P, S] (a transpose of dy's
// [P, N, S], and one of the result back).
func gatherGrad(b *Builder, op *ir.Op, dy []*ir.Value, need []bool) []*ir.Value {
	x, ind := op.Input(0), op.Input(1)
	out := make([]*ir.Value, 2)
	if !need[0] {
		return out
	}
	r := len(x.Shape)
	a := attrAxis(op, "axis", 0, r)
	dim := x.Shape[a]
	P, S, N := numel(x.Shape[:a]), numel(x.Shape[a+1:]), numel(ind.Shape)
	if numel(x.Shape) == 0 || N == 0 {
		out[0] = b.Zeros(x.DType, x.Shape)
		return out
	}
	if !needScatterAdd(b, op) {
		return out
	}
	idx := reshapeTo(b, int64Indices(b, ind, dim), ir.Shape{N, 1})
	add := strAttr("reduction", "add")
	if P == 1 {
		upd := reshapeTo(b, dy[0], ir.Shape{N, S})
		g := b.Op("ScatterND", []*ir.Value{b.Zeros(x.DType, ir.Shape{dim, S}), idx, upd}, add)
		out[0] = reshapeTo(b, g, x.Shape)
		return out
	}
	swap := intsAttr("perm", 1, 0, 2)
	upd := b.Op("Transpose", []*ir.Value{reshapeTo(b, dy[0], ir.Shape{P, N, S})}, swap)
	g := b.Op("ScatterND", []*ir.Value{b.Zeros(x.DType, ir.Shape{dim, P, S}), idx, upd}, add)
	out[0] = reshapeTo(b, b.Op("Transpose", []*ir.Value{g}, swap), x.Shape)
	return out
}

// gatherElementsGrad adds dy into zeros at the gathered positions
// (ScatterElements reduction="add"; negative indices are valid there).
func gatherElementsGrad(b *Builder, op *ir.Op, dy []*ir.Value, need []bool) []*ir.Value {
	x, ind := op.Input(0), op.Input(1)
	out := make([]*ir.Value, 2)
	if !need[0] {
		return out
	}
	if numel(x.Shape) == 0 || numel(ind.Shape) == 0 {
		out[0] = b.Zeros(x.DType, x.Shape)
		return out
	}
	if !needScatterAdd(b, op) {
		return out
	}
	axis := attrAxis(op, "axis", 0, len(x.Shape))
	out[0] = b.Op("ScatterElements", []*ir.Value{b.Zeros(x.DType, x.Shape), ind, dy[0]},
		intAttr("axis", int64(axis)), strAttr("reduction", "add"))
	return out
}

// whereGrad routes dy to the branch each element came from; broadcast
// branches are summed back to their shapes. The condition gets none.
func whereGrad(b *Builder, op *ir.Op, dy []*ir.Value, need []bool) []*ir.Value {
	cond, x, y := op.Input(0), op.Input(1), op.Input(2)
	out := make([]*ir.Value, 3)
	zero := b.Scalar(dy[0].DType, 0)
	if need[1] {
		out[1] = b.SumTo(b.Op("Where", []*ir.Value{cond, dy[0], zero}), x.Shape)
	}
	if need[2] {
		out[2] = b.SumTo(b.Op("Where", []*ir.Value{cond, zero, dy[0]}), y.Shape)
	}
	return out
}
