package passes

import "github.com/tsplit/tsplit/ir"

// The split rules of the ops that are not elementwise (those share the
// split slot's default), registered per op: the FT-compatibility of each
// op is here and nowhere else. An op with no rule is opted out with the
// reason; the op registry's coverage test fails on an op that has
// neither.

func init() {
	set := func(rule func(b *ftBuilder), types ...string) {
		for _, t := range types {
			splitRules.Set("", t, splitRule{maps: rule})
		}
	}
	// tsplit's transfers copy their input: every dimension splits.
	for _, t := range []string{"SwapIn", "SwapOut"} {
		splitRules.Set(ir.Domain, t, splitRule{maps: func(b *ftBuilder) { b.elementwise() }})
	}
	set(func(b *ftBuilder) { b.elementwise(1) }, "CastLike") // input 1 only gives the type
	set((*ftBuilder).dropout, "Dropout")
	set((*ftBuilder).conv, "Conv")
	set((*ftBuilder).convTranspose, "ConvTranspose")
	set((*ftBuilder).pool, "MaxPool", "AveragePool", "LpPool")
	set((*ftBuilder).batchNorm, "BatchNormalization")
	set((*ftBuilder).gemm, "Gemm")
	set((*ftBuilder).matmul, "MatMul")
	set((*ftBuilder).channels, "GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool")
	set((*ftBuilder).instanceNorm, "InstanceNormalization")
	set((*ftBuilder).layerNorm, "LayerNormalization")
	set((*ftBuilder).softmax, "Softmax", "LogSoftmax", "Hardmax")
	for _, t := range []string{"Reshape", "Flatten", "Squeeze", "Unsqueeze"} {
		// A Reshape's micro-op gets its own shape input; the others
		// derive the micro-output's shape from their attributes.
		rewrite := t == "Reshape"
		splitRules.Set("", t, splitRule{maps: func(b *ftBuilder) { b.reshape(rewrite) }, reshape: true})
	}
	set((*ftBuilder).transpose, "Transpose")
	set((*ftBuilder).concatOp, "Concat")
	set((*ftBuilder).split, "Split")
	set((*ftBuilder).slice, "Slice")
	set((*ftBuilder).pad, "Pad")
	set((*ftBuilder).tile, "Tile")
	set((*ftBuilder).expand, "Expand")
	set((*ftBuilder).gather, "Gather")
	set((*ftBuilder).gatherElements, "GatherElements")
	set((*ftBuilder).scatterElements, "ScatterElements")
	set((*ftBuilder).oneHot, "OneHot")
	set(func(b *ftBuilder) { b.reduce(false) }, "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd",
		"ReduceL2", "ReduceLogSum", "ReduceLogSumExp")
	set(func(b *ftBuilder) { b.reduce(true) }, "ReduceSum", "ReduceSumSquare", "ReduceL1")
	set((*ftBuilder).arg, "ArgMax", "ArgMin")

	for _, g := range []struct {
		why   string
		types []string
	}{
		{"no input data to split: a constant, or computed from shapes", []string{"Constant", "ConstantOfShape", "Range", "Shape", "Size"}},
		{"not written (the data dimensions the indices do not address could split)", []string{"ScatterND"}},
	} {
		for _, t := range g.types {
			splitRules.OptOut("", t, g.why)
		}
	}
}

// channels: the batch and channel dimensions of a global pool.
func (b *ftBuilder) channels() {
	b.concat(0).Inputs[0] = ftFollow(0)
	b.concat(1).Inputs[0] = ftFollow(1)
}

// instanceNorm: the batch (X follows), and the channels (X, scale and B
// follow).
func (b *ftBuilder) instanceNorm() {
	b.concat(0).Inputs[0] = ftFollow(0)
	dm := b.concat(1)
	dm.Inputs[0], dm.Inputs[1], dm.Inputs[2] = ftFollow(1), ftFollow(0), ftFollow(0)
}

// layerNorm: every dimension before the normalised axis.
func (b *ftBuilder) layerNorm() {
	axis, ok := ftNormAxis(b.op.AttrInt("axis", -1), len(b.op.Input(0).Shape))
	if !ok {
		return
	}
	for d := 0; d < axis; d++ {
		b.concat(d).Inputs[0] = ftFollow(d)
	}
}

// softmax: every dimension but the normalised one.
func (b *ftBuilder) softmax() {
	r := len(b.op.Input(0).Shape)
	def := int64(-1)
	if b.opset < 13 {
		def = 1
	}
	axis, ok := ftNormAxis(b.op.AttrInt("axis", def), r)
	if !ok {
		return
	}
	for d := 0; d < r; d++ {
		// Before opset 13 the input is coerced to 2-D at axis: the
		// dimensions from axis on form one softmax row.
		if d == axis || (b.opset < 13 && d > axis) {
			continue
		}
		b.concat(d).Inputs[0] = ftFollow(d)
	}
}

// reshape: the leading output dimension of each group that splits
// (ftReshapeGroups); with rewrite the micro-op gets its own shape input.
func (b *ftBuilder) reshape(rewrite bool) {
	for _, gr := range ftReshapeGroups(b.op) {
		if gr.sigma == 0 {
			continue
		}
		dm := b.concat(gr.out[0])
		dm.Inputs[0] = InputMap{Dim: gr.in[0], Scale: gr.sigma, HaloHi: gr.sigma - 1}
		if rewrite {
			dm.Rewrite = RewriteShape
		}
	}
}

// transpose: every output dimension follows the input dimension perm
// maps it from.
func (b *ftBuilder) transpose() {
	y := b.op.Output(0)
	perm := b.op.AttrInts("perm", nil)
	for d := 0; d < len(y.Shape); d++ {
		p := len(y.Shape) - 1 - d
		if perm != nil {
			p = int(perm[d])
		}
		b.concat(d).Inputs[0] = ftFollow(p)
	}
}

// concatOp: every dimension but the axis; all inputs follow.
func (b *ftBuilder) concatOp() {
	y := b.op.Output(0)
	axis, ok := ftNormAxis(b.op.AttrInt("axis", 0), len(y.Shape))
	if !ok {
		return
	}
	for d := 0; d < len(y.Shape); d++ {
		if d == axis {
			continue
		}
		dm := b.concat(d)
		for j := range b.op.Inputs() {
			dm.Inputs[j] = ftFollow(d)
		}
	}
}

// split: every dimension but the axis.
func (b *ftBuilder) split() {
	axis, _, err := ir.SplitSizes(b.op, b.opset)
	if err != nil {
		return
	}
	for d := 0; d < len(b.op.Input(0).Shape); d++ {
		if d != axis {
			b.concat(d).Inputs[0] = ftFollow(d)
		}
	}
}

// slice: the dimensions the slice takes whole.
func (b *ftBuilder) slice() {
	x := b.op.Input(0)
	r := len(x.Shape)
	first, step, count, err := ir.SliceRanges(b.op)
	if err != nil || len(first) != r {
		return
	}
	for d := 0; d < r; d++ {
		if first[d] == 0 && step[d] == 1 && count[d] == x.Shape[d] {
			b.concat(d).Inputs[0] = ftFollow(d)
		}
	}
}

// pad: the dimensions without padding.
func (b *ftBuilder) pad() {
	r := len(b.op.Input(0).Shape)
	begin, end, err := ir.PadAmounts(b.op)
	if err != nil || len(begin) != r {
		return
	}
	for d := 0; d < r; d++ {
		if begin[d] == 0 && end[d] == 0 {
			b.concat(d).Inputs[0] = ftFollow(d)
		}
	}
}

// tile: the dimensions repeated once.
func (b *ftBuilder) tile() {
	r := len(b.op.Input(0).Shape)
	reps := ftConstInts(b.op.Input(1))
	if len(reps) != r {
		return
	}
	for d := 0; d < r; d++ {
		if reps[d] == 1 {
			b.concat(d).Inputs[0] = ftFollow(d)
		}
	}
}

// expand: the output dimensions the input already has at full extent;
// the micro-op gets its own shape input.
func (b *ftBuilder) expand() {
	x, y := b.op.Input(0), b.op.Output(0)
	r, ro := len(x.Shape), len(y.Shape)
	for d := 0; d < ro; d++ {
		e := d - (ro - r)
		if e >= 0 && x.Shape[e] == y.Shape[d] {
			dm := b.concat(d)
			dm.Inputs[0] = ftFollow(e)
			dm.Rewrite = RewriteShape
		}
	}
}

// gather: the data dimensions before and after the axis, and the index
// dimensions in between.
func (b *ftBuilder) gather() {
	r := len(b.op.Input(0).Shape)
	axis, ok := ftNormAxis(b.op.AttrInt("axis", 0), r)
	ind := b.op.Input(1)
	if !ok || ind == nil {
		return
	}
	q := len(ind.Shape)
	for d := 0; d < len(b.op.Output(0).Shape); d++ {
		dm := b.concat(d)
		switch {
		case d < axis:
			dm.Inputs[0] = ftFollow(d)
		case d < axis+q:
			dm.Inputs[1] = ftFollow(d - axis)
		default:
			dm.Inputs[0] = ftFollow(d - q + 1)
		}
	}
}

// gatherElements: every dimension but the axis; data and indices follow.
func (b *ftBuilder) gatherElements() {
	r := len(b.op.Input(0).Shape)
	axis, ok := ftNormAxis(b.op.AttrInt("axis", 0), r)
	if !ok {
		return
	}
	for d := 0; d < r; d++ {
		if d != axis {
			dm := b.concat(d)
			dm.Inputs[0], dm.Inputs[1] = ftFollow(d), ftFollow(d)
		}
	}
}

// scatterElements: updates land at their own position on every
// dimension but the axis, so a slice of the data takes the updates of
// the same slice where the indices span the data on that dimension.
func (b *ftBuilder) scatterElements() {
	x := b.op.Input(0)
	r := len(x.Shape)
	axis, ok := ftNormAxis(b.op.AttrInt("axis", 0), r)
	ind := b.op.Input(1)
	if !ok || ind == nil || len(ind.Shape) != r {
		return
	}
	for d := 0; d < r; d++ {
		if d != axis && ind.Shape[d] == x.Shape[d] {
			dm := b.concat(d)
			dm.Inputs[0], dm.Inputs[1], dm.Inputs[2] = ftFollow(d), ftFollow(d), ftFollow(d)
		}
	}
}

// oneHot: every output dimension but the new one, following the indices.
func (b *ftBuilder) oneHot() {
	r := len(b.op.Input(0).Shape)
	axis, ok := ftNormAxis(b.op.AttrInt("axis", -1), r+1)
	if !ok {
		return
	}
	for d := 0; d < len(b.op.Output(0).Shape); d++ {
		switch {
		case d < axis:
			b.concat(d).Inputs[0] = ftFollow(d)
		case d > axis:
			b.concat(d).Inputs[0] = ftFollow(d - 1)
		}
	}
}

// reduce: the kept dimensions; for an additive reduction the reduced
// ones too, as sums (partial sums over slices of a reduced axis add up).
func (b *ftBuilder) reduce(additive bool) {
	x := b.op.Input(0)
	r := len(x.Shape)
	red, noop, err := ir.ReduceAxes(b.op)
	if err != nil {
		return
	}
	if noop {
		for d := 0; d < r; d++ {
			b.concat(d).Inputs[0] = ftFollow(d)
		}
		return
	}
	keep := b.op.AttrInt("keepdims", 1) != 0
	o := 0
	for d := 0; d < r; d++ {
		if !red[d] {
			b.concat(o).Inputs[0] = ftFollow(d)
			o++
		} else if keep {
			o++
		}
	}
	if additive {
		for d := 0; d < r; d++ {
			if red[d] {
				b.sum(x.Shape[d]).Inputs[0] = ftFollow(d)
			}
		}
	}
}

// arg: every dimension but the axis.
func (b *ftBuilder) arg() {
	r := len(b.op.Input(0).Shape)
	axis, ok := ftNormAxis(b.op.AttrInt("axis", 0), r)
	if !ok {
		return
	}
	keep := b.op.AttrInt("keepdims", 1) != 0
	o := 0
	for d := 0; d < r; d++ {
		if d != axis {
			b.concat(o).Inputs[0] = ftFollow(d)
		}
		if d != axis || keep {
			o++
		}
	}
}
