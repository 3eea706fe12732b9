package ir

// Inference rules for ops that move data without computing on it:
// concatenation, splitting, slicing, padding, reshaping, transposition,
// gathering and scattering. Constant inputs are folded by moving element
// bytes, so folding works for every byte-sized dtype.

func init() {
	Register(&Schema{Type: "Concat", MinIn: 1, MaxIn: -1, MinOut: 1, MaxOut: 1,
		Attrs: map[string]AttrType{"axis": AttrInt}, Infer: inferConcat})
	// Split: the split sizes are an attribute up to opset 12 and an
	// optional input since 13; num_outputs exists since 18.
	Register(&Schema{Type: "Split", MinIn: 1, MaxIn: 2, MinOut: 1, MaxOut: -1,
		Attrs: map[string]AttrType{"axis": AttrInt, "split": AttrInts, "num_outputs": AttrInt}, Infer: inferSplit,
		NoGrad: []int{1}, ConstIn: []int{1}})
	// Slice: inputs since opset 10; the opset-1 attributes are accepted.
	Register(&Schema{Type: "Slice", MinIn: 1, MaxIn: 5, MinOut: 1, MaxOut: 1,
		Attrs: map[string]AttrType{"starts": AttrInts, "ends": AttrInts, "axes": AttrInts}, Infer: inferSlice,
		View: OffsetView, ViewAt: contiguousSlice, NoGrad: []int{1, 2, 3, 4}, ConstIn: []int{1, 2, 3, 4}})
	// Pad: pads and constant_value are inputs since opset 11, axes since
	// 18; the opset-2 attributes pads/value are accepted.
	Register(&Schema{Type: "Pad", MinIn: 1, MaxIn: 4, MinOut: 1, MaxOut: 1,
		Attrs: map[string]AttrType{"mode": AttrString, "pads": AttrInts, "value": AttrFloat}, Infer: inferPad,
		NoGrad: []int{1, 3}, ConstIn: []int{1, 3}}) // constant_value (2) has a gradient
	Register(&Schema{Type: "Reshape", MinIn: 2, MaxIn: 2, MinOut: 1, MaxOut: 1,
		Attrs: map[string]AttrType{"allowzero": AttrInt}, Infer: inferReshape, View: WholeView, NoGrad: []int{1}, ConstIn: []int{1}})
	Register(&Schema{Type: "Flatten", MinIn: 1, MaxIn: 1, MinOut: 1, MaxOut: 1,
		Attrs: map[string]AttrType{"axis": AttrInt}, Infer: inferFlatten, View: WholeView})
	Register(&Schema{Type: "Transpose", MinIn: 1, MaxIn: 1, MinOut: 1, MaxOut: 1,
		Attrs: map[string]AttrType{"perm": AttrInts}, Infer: inferTranspose})
	// Squeeze/Unsqueeze: axes attribute up to opset 12, input since 13.
	Register(&Schema{Type: "Squeeze", MinIn: 1, MaxIn: 2, MinOut: 1, MaxOut: 1,
		Attrs: map[string]AttrType{"axes": AttrInts}, Infer: inferSqueeze, View: WholeView, NoGrad: []int{1}, ConstIn: []int{1}})
	Register(&Schema{Type: "Unsqueeze", MinIn: 1, MaxIn: 2, MinOut: 1, MaxOut: 1,
		Attrs: map[string]AttrType{"axes": AttrInts}, Infer: inferUnsqueeze, View: WholeView, NoGrad: []int{1}, ConstIn: []int{1}})
	Register(&Schema{Type: "Expand", MinIn: 2, MaxIn: 2, MinOut: 1, MaxOut: 1, Infer: inferExpand,
		NoGrad: []int{1}, ConstIn: []int{1}, Since: 8})
	Register(&Schema{Type: "Tile", MinIn: 2, MaxIn: 2, MinOut: 1, MaxOut: 1, Infer: inferTile, NoGrad: []int{1}, ConstIn: []int{1}})
	Register(&Schema{Type: "Gather", MinIn: 2, MaxIn: 2, MinOut: 1, MaxOut: 1,
		Attrs: map[string]AttrType{"axis": AttrInt}, Infer: inferGather, NoGrad: []int{1}})
	Register(&Schema{Type: "GatherElements", MinIn: 2, MaxIn: 2, MinOut: 1, MaxOut: 1,
		Attrs: map[string]AttrType{"axis": AttrInt}, Infer: inferGatherElements, NoGrad: []int{1}, Since: 11})
	Register(&Schema{Type: "ScatterElements", MinIn: 3, MaxIn: 3, MinOut: 1, MaxOut: 1,
		Attrs: map[string]AttrType{"axis": AttrInt, "reduction": AttrString}, Infer: inferScatterElements,
		NoGrad: []int{1}, Since: 11})
	Register(&Schema{Type: "ScatterND", MinIn: 3, MaxIn: 3, MinOut: 1, MaxOut: 1,
		Attrs: map[string]AttrType{"reduction": AttrString}, Infer: inferScatterND, NoGrad: []int{1}, Since: 11})
	Register(&Schema{Type: "OneHot", MinIn: 3, MaxIn: 3, MinOut: 1, MaxOut: 1,
		Attrs: map[string]AttrType{"axis": AttrInt}, Infer: inferOneHot, NoGrad: []int{0, 1}, ConstIn: []int{1}, Since: 9})
	Register(&Schema{Type: "Where", MinIn: 3, MaxIn: 3, MinOut: 1, MaxOut: 1, Infer: inferWhere,
		Elementwise: true, NoGrad: []int{0}, Since: 9})
}

func inferConcat(c *InferCtx) error {
	a := c.Op.Attr("axis")
	if a == nil {
		return c.Errorf("attribute axis is required")
	}
	x0 := c.In(0)
	if x0 == nil {
		return c.Errorf("input 0 is missing")
	}
	r := len(x0.Shape)
	if r == 0 {
		return c.Errorf("input 0 is a scalar, Concat needs tensors of rank >= 1")
	}
	axis, err := normAxis(c, "attribute axis", a.Int, r)
	if err != nil {
		return err
	}
	out := x0.Shape.Clone()
	out[axis] = 0
	for i := 0; i < c.NumIn(); i++ {
		v := c.In(i)
		if v == nil {
			return c.Errorf("input %d is missing", i)
		}
		if v.DType != x0.DType {
			return c.Errorf("input %d has type %v, input 0 has %v", i, v.DType, x0.DType)
		}
		if len(v.Shape) != r {
			return c.Errorf("input %d has rank %d (shape %v), input 0 has rank %d; Concat needs equal ranks", i, len(v.Shape), v.Shape, r)
		}
		for d := 0; d < r; d++ {
			if d != axis && v.Shape[d] != x0.Shape[d] {
				return c.Errorf("input %d has shape %v, input 0 has %v; they may differ only on axis %d", i, v.Shape, x0.Shape, axis)
			}
		}
		if out[axis] > maxDim-v.Shape[axis] {
			return c.Errorf("concatenated dimension %d overflows", axis)
		}
		out[axis] += v.Shape[axis]
	}
	c.SetOut(0, x0.DType, out)
	if !foldSize(out) {
		return nil
	}
	ts := make([]*Tensor, c.NumIn())
	for i := range ts {
		if ts[i] = foldIn(c, i); ts[i] == nil {
			return nil
		}
	}
	eb := elemBytes(x0.DType)
	outer := numElems(out[:axis])
	inner := numElems(out[axis+1:])
	raw := make([]byte, 0, numElems(out)*int64(eb))
	for o := int64(0); o < outer; o++ {
		for _, t := range ts {
			chunk := t.Shape[axis] * inner * int64(eb)
			raw = append(raw, t.Raw[o*chunk:(o+1)*chunk]...)
		}
	}
	c.SetConst(0, &Tensor{DType: x0.DType, Shape: out, Raw: raw})
	return nil
}

// SplitSizes resolves a Split op at the given opset: the axis of input 0
// it splits (normalised) and the size of each output along it, from the
// split input (opset >= 13), the split attribute (opset < 13),
// num_outputs (opset >= 18) or an even split. Gradient rules use it so
// the Split semantics live in one place.
func SplitSizes(op *Op, opset int64) (axis int, sizes []int64, err error) {
	return splitSizes(&InferCtx{Op: op, Opset: opset})
}

func splitSizes(c *InferCtx) (int, []int64, error) {
	x := c.In(0)
	r := len(x.Shape)
	if r == 0 {
		return 0, nil, c.Errorf("input 0 is a scalar, Split needs a tensor of rank >= 1")
	}
	axis, err := normAxis(c, "attribute axis", c.Op.AttrInt("axis", 0), r)
	if err != nil {
		return 0, nil, err
	}
	dim := x.Shape[axis]
	n := c.NumOut()
	var sizes []int64
	switch {
	case c.In(1) != nil:
		if hasAttr(c, "split") {
			return 0, nil, c.Errorf("split sizes are given both as attribute (opset < 13) and as input 1 (opset >= 13)")
		}
		if sizes, err = constIntsInput(c, 1, "split sizes"); err != nil {
			return 0, nil, err
		}
		if len(sizes) == 0 { // an empty split input means "not given"
			sizes = chunkSizes(dim, int64(n))
		}
	case hasAttr(c, "split"):
		sizes = c.Op.AttrInts("split", nil)
	case hasAttr(c, "num_outputs"):
		k := c.Op.AttrInt("num_outputs", 0)
		if k != int64(n) {
			return 0, nil, c.Errorf("attribute num_outputs is %d but the node has %d outputs", k, n)
		}
		sizes = chunkSizes(dim, int64(n))
	default:
		if dim%int64(n) != 0 && c.Opset < 18 {
			return 0, nil, c.Errorf("dimension %d of size %d does not split evenly into %d outputs", axis, dim, n)
		}
		sizes = chunkSizes(dim, int64(n))
	}
	if len(sizes) != n {
		return 0, nil, c.Errorf("split sizes %v have %d entries, the node has %d outputs", sizes, len(sizes), n)
	}
	sum := int64(0)
	for _, s := range sizes {
		if s < 0 {
			return 0, nil, c.Errorf("split sizes %v: negative size (dimension %d of size %d into %d outputs)", sizes, axis, dim, n)
		}
		sum += s
	}
	if sum != dim {
		return 0, nil, c.Errorf("split sizes %v sum to %d, dimension %d has size %d", sizes, sum, axis, dim)
	}
	return axis, sizes, nil
}

func inferSplit(c *InferCtx) error {
	x := c.In(0)
	axis, sizes, err := splitSizes(c)
	if err != nil {
		return err
	}
	t := foldIn(c, 0)
	start := int64(0)
	for j, s := range sizes {
		out := x.Shape.Clone()
		out[axis] = s
		c.SetOut(j, x.DType, out)
		if t != nil && foldSize(out) {
			st := t.Shape.Strides()
			off := start
			c.SetConst(j, pickElems(t, out, mapIndex(out, func(co []int64) int {
				f := int64(0)
				for d, v := range co {
					if d == axis {
						v += off
					}
					f += v * st[d]
				}
				return int(f)
			})))
		}
		start += s
	}
	return nil
}

// chunkSizes splits dim into n chunks of ceil(dim/n), the last smaller.
func chunkSizes(dim, n int64) []int64 {
	chunk := ceilDiv(dim, n)
	out := make([]int64, n)
	for i := range out {
		out[i] = chunk
	}
	out[n-1] = dim - chunk*(n-1)
	return out
}

// SliceRanges resolves a Slice op (starts/ends/axes/steps as inputs
// since opset 10, or the opset-1 attributes) per axis of input 0: output
// element k along axis d is input element first[d] + k*step[d], for
// k < count[d] (count is the output dimension). Axes the op does not
// slice have first 0, step 1 and the full dimension. Gradient rules use
// it so the Slice semantics live in one place.
func SliceRanges(op *Op) (first, step, count []int64, err error) {
	return sliceRanges(&InferCtx{Op: op})
}

func sliceRanges(c *InferCtx) (first, step, count []int64, err error) {
	x := c.In(0)
	r := len(x.Shape)
	var starts, ends, axes, steps []int64
	switch {
	case c.NumIn() >= 3:
		if hasAttr(c, "starts") || hasAttr(c, "ends") || hasAttr(c, "axes") {
			return nil, nil, nil, c.Errorf("starts/ends/axes are given both as attributes (opset < 10) and as inputs (opset >= 10)")
		}
		if starts, err = constIntsInput(c, 1, "starts"); err != nil {
			return nil, nil, nil, err
		}
		if ends, err = constIntsInput(c, 2, "ends"); err != nil {
			return nil, nil, nil, err
		}
		if c.In(3) != nil {
			if axes, err = constIntsInput(c, 3, "axes"); err != nil {
				return nil, nil, nil, err
			}
		}
		if c.In(4) != nil {
			if steps, err = constIntsInput(c, 4, "steps"); err != nil {
				return nil, nil, nil, err
			}
		}
	case c.NumIn() == 1:
		if !hasAttr(c, "starts") || !hasAttr(c, "ends") {
			return nil, nil, nil, c.Errorf("has 1 input and no starts/ends attributes; Slice takes data, starts, ends[, axes, steps]")
		}
		starts, ends, axes = c.Op.AttrInts("starts", nil), c.Op.AttrInts("ends", nil), c.Op.AttrInts("axes", nil)
	default:
		return nil, nil, nil, c.Errorf("has %d inputs, Slice takes data, starts, ends[, axes, steps]", c.NumIn())
	}
	if len(starts) != len(ends) {
		return nil, nil, nil, c.Errorf("starts has %d values and ends has %d; they must match", len(starts), len(ends))
	}
	if axes == nil {
		if len(starts) > r {
			return nil, nil, nil, c.Errorf("starts has %d values, input 0 has rank %d", len(starts), r)
		}
		axes = make([]int64, len(starts))
		for i := range axes {
			axes[i] = int64(i)
		}
	}
	if len(axes) != len(starts) {
		return nil, nil, nil, c.Errorf("axes has %d values, starts has %d; they must match", len(axes), len(starts))
	}
	if steps == nil {
		steps = make([]int64, len(starts))
		for i := range steps {
			steps[i] = 1
		}
	}
	if len(steps) != len(starts) {
		return nil, nil, nil, c.Errorf("steps has %d values, starts has %d; they must match", len(steps), len(starts))
	}
	ax, err := normAxes(c, "axes", axes, r)
	if err != nil {
		return nil, nil, nil, err
	}
	count = x.Shape.Clone()
	first = make([]int64, r)
	step = make([]int64, r)
	for i := range step {
		step[i] = 1
	}
	for i, a := range ax {
		if steps[i] == 0 {
			return nil, nil, nil, c.Errorf("steps has 0 for axis %d", axes[i])
		}
		s, n := sliceRange(x.Shape[a], starts[i], ends[i], steps[i])
		count[a], first[a], step[a] = n, s, steps[i]
	}
	return first, step, count, nil
}

func inferSlice(c *InferCtx) error {
	x := c.In(0)
	first, step, count, err := sliceRanges(c)
	if err != nil {
		return err
	}
	out := Shape(count)
	c.SetOut(0, x.DType, out)
	if t := foldIn(c, 0); t != nil && foldSize(out) {
		st := t.Shape.Strides()
		c.SetConst(0, pickElems(t, out, mapIndex(out, func(co []int64) int {
			f := int64(0)
			for d, v := range co {
				f += (first[d] + v*step[d]) * st[d]
			}
			return int(f)
		})))
	}
	return nil
}

// sliceRange applies ONNX Slice semantics to one axis of size dim: it
// returns the first index taken and the number of elements.
func sliceRange(dim, start, end, step int64) (first, n int64) {
	if start < 0 {
		start += dim
	}
	if end < 0 {
		end += dim
	}
	if step > 0 {
		start = min(max(start, 0), dim)
		end = min(max(end, 0), dim)
		if end <= start {
			return 0, 0
		}
		return start, ceilDiv(end-start, step)
	}
	if dim == 0 {
		return 0, 0
	}
	start = min(max(start, 0), dim-1)
	end = min(max(end, -1), dim-1)
	if end >= start {
		return 0, 0
	}
	return start, ceilDiv(start-end, -step)
}

// PadAmounts resolves the pads of a Pad op (input 1 since opset 11, the
// opset-2 attribute before, restricted to input 3's axes since opset 18)
// per axis of input 0: begin[d] and end[d] elements are added before and
// after axis d (negative amounts crop). Gradient rules use it so the Pad
// semantics live in one place.
func PadAmounts(op *Op) (begin, end []int64, err error) {
	return padAmounts(&InferCtx{Op: op})
}

func padAmounts(c *InferCtx) (begin, end []int64, err error) {
	r := len(c.In(0).Shape)
	var pads []int64
	if c.NumIn() >= 2 {
		if hasAttr(c, "pads") {
			return nil, nil, c.Errorf("pads are given both as attribute (opset < 11) and as input 1 (opset >= 11)")
		}
		if pads, err = constIntsInput(c, 1, "pads"); err != nil {
			return nil, nil, err
		}
	} else {
		a := c.Op.Attr("pads")
		if a == nil {
			return nil, nil, c.Errorf("has no pads: Pad takes them as input 1 (or, before opset 11, as an attribute)")
		}
		pads = a.Ints
	}
	ax := make([]int, r)
	for i := range ax {
		ax[i] = i
	}
	if c.In(3) != nil {
		axes, err := constIntsInput(c, 3, "axes")
		if err != nil {
			return nil, nil, err
		}
		if ax, err = normAxes(c, "input 3 (axes)", axes, r); err != nil {
			return nil, nil, err
		}
	}
	if len(pads) != 2*len(ax) {
		return nil, nil, c.Errorf("pads has %d values, want %d (begin and end for each of %d axes)", len(pads), 2*len(ax), len(ax))
	}
	begin, end = make([]int64, r), make([]int64, r)
	n := len(ax)
	for i, a := range ax {
		begin[a], end[a] = pads[i], pads[i+n]
	}
	return begin, end, nil
}

func inferPad(c *InferCtx) error {
	x := c.In(0)
	switch mode := c.Op.AttrString("mode", "constant"); mode {
	case "constant", "reflect", "edge", "wrap":
	default:
		return c.Errorf("attribute mode is %q, want constant, reflect, edge or wrap", mode)
	}
	begin, end, err := padAmounts(c)
	if err != nil {
		return err
	}
	if v := c.In(2); v != nil {
		if v.DType != x.DType || numElems(v.Shape) != 1 || len(v.Shape) > 1 {
			return c.Errorf("input 2 (constant_value) is %v%v, want a scalar of the data type %v", v.DType, v.Shape, x.DType)
		}
	}
	out := x.Shape.Clone()
	for a := range out {
		d := out[a] + begin[a] + end[a]
		if d < 0 {
			return c.Errorf("pads (begin %d, end %d) make dimension %d negative (%d + %d + %d)", begin[a], end[a], a, out[a], begin[a], end[a])
		}
		out[a] = d
	}
	c.SetOut(0, x.DType, out)
	return nil
}

func inferReshape(c *InferCtx) error {
	x := c.In(0)
	if err := checkRank1(c, 1, "shape", false); err != nil {
		return err
	}
	shape, err := constIntsInput(c, 1, "target shape")
	if err != nil {
		return err
	}
	allowZero := c.Op.AttrInt("allowzero", 0) != 0
	out := make(Shape, len(shape))
	infer := -1
	for i, d := range shape {
		switch {
		case d == -1:
			if infer >= 0 {
				return c.Errorf("target shape %v has more than one -1", shape)
			}
			infer = i
		case d == 0 && !allowZero:
			if i >= len(x.Shape) {
				return c.Errorf("target shape %v copies dimension %d (0), input 0 has rank %d", shape, i, len(x.Shape))
			}
			out[i] = x.Shape[i]
		case d < 0:
			return c.Errorf("target shape %v has invalid dimension %d", shape, d)
		default:
			out[i] = d
		}
	}
	total := numElems(x.Shape)
	if infer >= 0 {
		if allowZero {
			for _, d := range shape {
				if d == 0 {
					return c.Errorf("target shape %v has both 0 and -1, invalid with allowzero=1", shape)
				}
			}
		}
		rest := int64(1)
		for i, d := range out {
			if i != infer {
				if rest, err = mulDims(c, rest, d); err != nil {
					return err
				}
			}
		}
		if rest == 0 || total%rest != 0 {
			return c.Errorf("cannot reshape input 0 of shape %v (%d elements) to %v: the -1 dimension cannot be inferred", x.Shape, total, shape)
		}
		out[infer] = total / rest
	}
	n, err := out.NumElements()
	if err != nil {
		return c.Errorf("target shape %v: %v", shape, err)
	}
	if n != total {
		return c.Errorf("cannot reshape input 0 of shape %v (%d elements) to %v (%d elements)", x.Shape, total, out, n)
	}
	c.SetOut(0, x.DType, out)
	if t := foldIn(c, 0); t != nil && foldSize(out) {
		c.SetConst(0, withShape(t, out))
	}
	return nil
}

func inferFlatten(c *InferCtx) error {
	x := c.In(0)
	r := len(x.Shape)
	axis := c.Op.AttrInt("axis", 1)
	if axis < -int64(r) || axis > int64(r) {
		return c.Errorf("attribute axis %d is out of range for an input of rank %d (allowed [%d, %d])", axis, r, -r, r)
	}
	if axis < 0 {
		axis += int64(r)
	}
	a, err := mulDims(c, x.Shape[:axis]...)
	if err != nil {
		return err
	}
	b, err := mulDims(c, x.Shape[axis:]...)
	if err != nil {
		return err
	}
	out := Shape{a, b}
	c.SetOut(0, x.DType, out)
	if t := foldIn(c, 0); t != nil && foldSize(out) {
		c.SetConst(0, withShape(t, out))
	}
	return nil
}

func inferTranspose(c *InferCtx) error {
	x := c.In(0)
	r := len(x.Shape)
	perm := c.Op.AttrInts("perm", nil)
	if perm == nil {
		perm = make([]int64, r)
		for i := range perm {
			perm[i] = int64(r - 1 - i)
		}
	}
	if len(perm) != r {
		return c.Errorf("attribute perm %v has %d values, input 0 has rank %d", perm, len(perm), r)
	}
	seen := make([]bool, r)
	out := make(Shape, r)
	for i, p := range perm {
		if p < 0 || p >= int64(r) || seen[p] {
			return c.Errorf("attribute perm %v is not a permutation of [0, %d)", perm, r)
		}
		seen[p] = true
		out[i] = x.Shape[p]
	}
	c.SetOut(0, x.DType, out)
	if t := foldIn(c, 0); t != nil && foldSize(out) {
		st := t.Shape.Strides()
		c.SetConst(0, pickElems(t, out, mapIndex(out, func(co []int64) int {
			f := int64(0)
			for i, v := range co {
				f += v * st[perm[i]]
			}
			return int(f)
		})))
	}
	return nil
}

// axesArg reads axes from input 1 (opset >= 13) or the axes attribute
// (opset < 13); ok is false when neither is given.
func axesArg(c *InferCtx) (axes []int64, ok bool, err error) {
	if c.In(1) != nil {
		if hasAttr(c, "axes") {
			return nil, false, c.Errorf("axes are given both as attribute (opset < 13) and as input 1 (opset >= 13)")
		}
		if err := checkRank1(c, 1, "axes", true); err != nil {
			return nil, false, err
		}
		axes, err := constIntsInput(c, 1, "axes")
		return axes, err == nil, err
	}
	if a := c.Op.Attr("axes"); a != nil {
		return a.Ints, true, nil
	}
	return nil, false, nil
}

func inferSqueeze(c *InferCtx) error {
	x := c.In(0)
	r := len(x.Shape)
	axes, ok, err := axesArg(c)
	if err != nil {
		return err
	}
	drop := make([]bool, r)
	if ok && len(axes) > 0 {
		ax, err := normAxes(c, "axes", axes, r)
		if err != nil {
			return err
		}
		for _, a := range ax {
			if x.Shape[a] != 1 {
				return c.Errorf("cannot squeeze axis %d of input 0 (shape %v): its size is %d, not 1", a, x.Shape, x.Shape[a])
			}
			drop[a] = true
		}
	} else {
		for i, d := range x.Shape {
			drop[i] = d == 1
		}
	}
	out := Shape{}
	for i, d := range x.Shape {
		if !drop[i] {
			out = append(out, d)
		}
	}
	c.SetOut(0, x.DType, out)
	if t := foldIn(c, 0); t != nil && foldSize(out) {
		c.SetConst(0, withShape(t, out))
	}
	return nil
}

func inferUnsqueeze(c *InferCtx) error {
	x := c.In(0)
	axes, ok, err := axesArg(c)
	if err != nil {
		return err
	}
	if !ok {
		return c.Errorf("has no axes: Unsqueeze takes them as input 1 (opset >= 13) or attribute axes (opset < 13)")
	}
	r := len(x.Shape) + len(axes)
	ax, err := normAxes(c, "axes", axes, r)
	if err != nil {
		return err
	}
	ins := make([]bool, r)
	for _, a := range ax {
		ins[a] = true
	}
	out := make(Shape, r)
	j := 0
	for i := range out {
		if ins[i] {
			out[i] = 1
		} else {
			out[i] = x.Shape[j]
			j++
		}
	}
	c.SetOut(0, x.DType, out)
	if t := foldIn(c, 0); t != nil && foldSize(out) {
		c.SetConst(0, withShape(t, out))
	}
	return nil
}

func inferExpand(c *InferCtx) error {
	x := c.In(0)
	if err := checkRank1(c, 1, "shape", false); err != nil {
		return err
	}
	shape, err := constIntsInput(c, 1, "target shape")
	if err != nil {
		return err
	}
	if err := checkDims(c, "input 1 (shape)", shape); err != nil {
		return err
	}
	out, err := Broadcast(x.Shape, Shape(shape))
	if err != nil {
		return c.Errorf("input 0 of shape %v cannot expand to %v: %v", x.Shape, shape, err)
	}
	c.SetOut(0, x.DType, out)
	if t := foldIn(c, 0); t != nil && foldSize(out) {
		c.SetConst(0, pickElems(t, out, broadcastIndex(t.Shape, out)))
	}
	return nil
}

func inferTile(c *InferCtx) error {
	x := c.In(0)
	if err := checkRank1(c, 1, "repeats", false); err != nil {
		return err
	}
	reps, err := constIntsInput(c, 1, "repeats")
	if err != nil {
		return err
	}
	if len(reps) != len(x.Shape) {
		return c.Errorf("input 1 (repeats) has %d values, input 0 has rank %d", len(reps), len(x.Shape))
	}
	out := make(Shape, len(reps))
	for i, rp := range reps {
		if rp < 0 {
			return c.Errorf("input 1 (repeats) has negative value %d at position %d", rp, i)
		}
		if out[i], err = mulDims(c, x.Shape[i], rp); err != nil {
			return err
		}
	}
	c.SetOut(0, x.DType, out)
	if t := foldIn(c, 0); t != nil && foldSize(out) {
		st := t.Shape.Strides()
		c.SetConst(0, pickElems(t, out, mapIndex(out, func(co []int64) int {
			f := int64(0)
			for d, v := range co {
				f += (v % t.Shape[d]) * st[d]
			}
			return int(f)
		})))
	}
	return nil
}

func checkIndexType(c *InferCtx, i int) error {
	if dt := c.In(i).DType; dt != Int64 && dt != Int32 {
		return c.Errorf("%s has type %v, indices must be int32 or int64", inName(c, i), dt)
	}
	return nil
}

func inferGather(c *InferCtx) error {
	x, ind := c.In(0), c.In(1)
	r := len(x.Shape)
	if r == 0 {
		return c.Errorf("input 0 is a scalar, Gather needs rank >= 1")
	}
	if err := checkIndexType(c, 1); err != nil {
		return err
	}
	axis, err := normAxis(c, "attribute axis", c.Op.AttrInt("axis", 0), r)
	if err != nil {
		return err
	}
	out := make(Shape, 0, r-1+len(ind.Shape))
	out = append(out, x.Shape[:axis]...)
	out = append(out, ind.Shape...)
	out = append(out, x.Shape[axis+1:]...)
	c.SetOut(0, x.DType, out)
	t, it := foldIn(c, 0), numIn(c, 1)
	if t == nil || it == nil || !foldSize(out) {
		return nil
	}
	idx, err := foldIndices(c, it, axis, x.Shape[axis])
	if err != nil {
		return err
	}
	st, ist := t.Shape.Strides(), it.Shape.Strides()
	q := len(it.Shape)
	c.SetConst(0, pickElems(t, out, mapIndex(out, func(co []int64) int {
		f := int64(0)
		for d := 0; d < axis; d++ {
			f += co[d] * st[d]
		}
		ii := int64(0)
		for d := 0; d < q; d++ {
			ii += co[axis+d] * ist[d]
		}
		f += idx[ii] * st[axis]
		for d := axis + 1; d < r; d++ {
			f += co[d-1+q] * st[d]
		}
		return int(f)
	})))
	return nil
}

func inferGatherElements(c *InferCtx) error {
	x, ind := c.In(0), c.In(1)
	r := len(x.Shape)
	if err := checkIndexType(c, 1); err != nil {
		return err
	}
	if r == 0 || len(ind.Shape) != r {
		return c.Errorf("inputs have ranks %d and %d, GatherElements needs equal ranks >= 1", r, len(ind.Shape))
	}
	axis, err := normAxis(c, "attribute axis", c.Op.AttrInt("axis", 0), r)
	if err != nil {
		return err
	}
	for d := 0; d < r; d++ {
		if d != axis && ind.Shape[d] > x.Shape[d] {
			return c.Errorf("input 1 (indices) has shape %v, larger than input 0 %v on dimension %d", ind.Shape, x.Shape, d)
		}
	}
	out := ind.Shape.Clone()
	c.SetOut(0, x.DType, out)
	t, it := foldIn(c, 0), numIn(c, 1)
	if t == nil || it == nil || !foldSize(out) {
		return nil
	}
	idx, err := foldIndices(c, it, axis, x.Shape[axis])
	if err != nil {
		return err
	}
	st := t.Shape.Strides()
	k := 0
	c.SetConst(0, pickElems(t, out, mapIndex(out, func(co []int64) int {
		f := int64(0)
		for d, v := range co {
			if d == axis {
				v = idx[k]
			}
			f += v * st[d]
		}
		k++
		return int(f)
	})))
	return nil
}

func checkReduction(c *InferCtx) error {
	switch red := c.Op.AttrString("reduction", "none"); red {
	case "none", "add", "mul", "max", "min":
		return nil
	default:
		return c.Errorf("attribute reduction is %q, want none, add, mul, max or min", red)
	}
}

func inferScatterElements(c *InferCtx) error {
	x, ind, upd := c.In(0), c.In(1), c.In(2)
	r := len(x.Shape)
	if err := checkIndexType(c, 1); err != nil {
		return err
	}
	if err := checkReduction(c); err != nil {
		return err
	}
	if r == 0 || len(ind.Shape) != r {
		return c.Errorf("inputs 0 and 1 have ranks %d and %d, ScatterElements needs equal ranks >= 1", r, len(ind.Shape))
	}
	if !ind.Shape.Equal(upd.Shape) {
		return c.Errorf("input 1 (indices) has shape %v and input 2 (updates) has %v; they must match", ind.Shape, upd.Shape)
	}
	if err := sameDType(c, 0, 2); err != nil {
		return err
	}
	if _, err := normAxis(c, "attribute axis", c.Op.AttrInt("axis", 0), r); err != nil {
		return err
	}
	c.SetOut(0, x.DType, x.Shape.Clone())
	return nil
}

func inferScatterND(c *InferCtx) error {
	x, ind, upd := c.In(0), c.In(1), c.In(2)
	if c.In(1).DType != Int64 {
		return c.Errorf("input 1 (indices) has type %v, ScatterND takes int64", c.In(1).DType)
	}
	if err := checkReduction(c); err != nil {
		return err
	}
	if err := sameDType(c, 0, 2); err != nil {
		return err
	}
	r, q := len(x.Shape), len(ind.Shape)
	if r == 0 || q == 0 {
		return c.Errorf("inputs 0 and 1 have ranks %d and %d, ScatterND needs both >= 1", r, q)
	}
	k := ind.Shape[q-1]
	if k > int64(r) {
		return c.Errorf("input 1 (indices) has last dimension %d, larger than the rank %d of input 0", k, r)
	}
	want := append(ind.Shape[:q-1].Clone(), x.Shape[k:]...)
	if !upd.Shape.Equal(want) {
		return c.Errorf("input 2 (updates) has shape %v, want %v (indices.shape[:-1] + data.shape[%d:])", upd.Shape, want, k)
	}
	c.SetOut(0, x.DType, x.Shape.Clone())
	return nil
}

func inferOneHot(c *InferCtx) error {
	ind, vals := c.In(0), c.In(2)
	if !ind.DType.IsInt() && !ind.DType.IsFloat() {
		return c.Errorf("input 0 (indices) has type %v, want a numeric tensor", ind.DType)
	}
	if len(vals.Shape) != 1 || vals.Shape[0] != 2 {
		return c.Errorf("input 2 (values) has shape %v, want [2] (off value, on value)", vals.Shape)
	}
	if d := c.In(1); numElems(d.Shape) != 1 || len(d.Shape) > 1 {
		return c.Errorf("input 1 (depth) has shape %v, want a scalar", d.Shape)
	}
	c.needConstIn(1)
	dt := numIn(c, 1)
	if dt == nil {
		return c.Errorf("%s (depth) is not a compile-time constant; OneHot needs it to infer static shapes", inName(c, 1))
	}
	depth := int64(dt.Float64s()[0])
	if depth <= 0 {
		return c.Errorf("input 1 (depth) is %d, must be positive", depth)
	}
	r := len(ind.Shape) + 1
	axis, err := normAxis(c, "attribute axis", c.Op.AttrInt("axis", -1), r)
	if err != nil {
		return err
	}
	out := make(Shape, 0, r)
	out = append(out, ind.Shape[:axis]...)
	out = append(out, depth)
	out = append(out, ind.Shape[axis:]...)
	c.SetOut(0, vals.DType, out)
	return nil
}

func inferWhere(c *InferCtx) error {
	cond, x, y := c.In(0), c.In(1), c.In(2)
	if cond.DType != Bool {
		return c.Errorf("input 0 (condition) has type %v, want bool", cond.DType)
	}
	if err := sameDType(c, 1, 2); err != nil {
		return err
	}
	out, err := Broadcast(cond.Shape, x.Shape, y.Shape)
	if err != nil {
		return c.Errorf("%v", err)
	}
	c.SetOut(0, x.DType, out)
	tc, tx, ty := numIn(c, 0), foldIn(c, 1), foldIn(c, 2)
	if tc == nil || tx == nil || ty == nil || !foldSize(out) || !foldSize(tc.Shape) {
		return nil
	}
	cv := tc.Int64s()
	ic, ix, iy := broadcastIndex(tc.Shape, out), broadcastIndex(tx.Shape, out), broadcastIndex(ty.Shape, out)
	eb := elemBytes(x.DType)
	raw := make([]byte, len(ic)*eb)
	for i := range ic {
		src, j := ty, iy[i]
		if cv[ic[i]] != 0 {
			src, j = tx, ix[i]
		}
		copy(raw[i*eb:(i+1)*eb], src.Raw[j*eb:(j+1)*eb])
	}
	c.SetConst(0, &Tensor{DType: x.DType, Shape: out, Raw: raw})
	return nil
}

// foldIndices reads constant Gather/GatherElements indices, checking
// them against the axis size and making negative ones positive.
func foldIndices(c *InferCtx, it *Tensor, axis int, dim int64) ([]int64, error) {
	idx := it.Int64s()
	for k, v := range idx {
		if v < -dim || v >= dim {
			return nil, c.Errorf("input 1 (indices) has %d at position %d, out of range for axis %d of size %d", v, k, axis, dim)
		}
		if v < 0 {
			idx[k] = v + dim
		}
	}
	return idx, nil
}

// contiguousSlice is Slice's ViewAt: it reports whether a Slice's output
// is one contiguous run of its input's bytes, and the byte offset where
// the run starts: the dimensions after the innermost cut axis are taken
// whole, the ones before it one element at a time, and the cut axis
// itself with step 1. A split along the outermost dimension that is not
// 1 always is. On the host such a slice needs no copy (TSPLIT §V-C): the
// runtime hands out a view of the input and the memory model and
// simulator charge it nothing (see View).
func contiguousSlice(op *Op) (int64, bool) {
	if op.Type != "Slice" || op.Domain != "" || len(op.Inputs()) == 0 || op.Input(0) == nil || op.Output(0) == nil {
		return 0, false
	}
	x := op.Input(0)
	bits := x.DType.Bits()
	if bits <= 0 || bits%8 != 0 {
		return 0, false
	}
	first, step, count, err := SliceRanges(op)
	if err != nil || len(first) != len(x.Shape) {
		return 0, false
	}
	cut := -1 // the innermost axis not taken whole
	for d := range x.Shape {
		if first[d] != 0 || count[d] != x.Shape[d] {
			cut = d
		}
	}
	if cut < 0 {
		return 0, true // the whole input
	}
	for d := 0; d < cut; d++ {
		if count[d] != 1 {
			return 0, false
		}
	}
	if count[cut] > 1 && step[cut] != 1 {
		return 0, false
	}
	var off, stride int64 = 0, 1
	for d := len(x.Shape) - 1; d >= 0; d-- {
		off += first[d] * stride
		stride *= x.Shape[d]
	}
	return off * int64(bits/8), true
}

// InPlaceConcat reports whether a host-placed Concat can be merged in
// place (TSPLIT §V-C): its output is contiguous pieces of its inputs in
// order (the output's dimensions before the axis are 1, or the axis is
// the outermost), every input is a distinct swap-out target, and no
// other in-place merge reads it. The runtime then lets each swap-out
// write straight into its part of the merged buffer, and the merge
// copies nothing; the memory model counts the merged buffer once.
func InPlaceConcat(op *Op) bool {
	if op.Type != "Concat" || op.Domain != "" || !op.Host || op.Output(0) == nil || len(op.Inputs()) == 0 {
		return false
	}
	y := op.Output(0)
	bits := y.DType.Bits()
	if bits <= 0 || bits%8 != 0 {
		return false
	}
	axis := op.AttrInt("axis", 0)
	if axis < 0 {
		axis += int64(len(y.Shape))
	}
	if axis < 0 || axis >= int64(len(y.Shape)) {
		return false
	}
	for d := int64(0); d < axis; d++ {
		if y.Shape[d] != 1 {
			return false
		}
	}
	seen := map[*Value]bool{}
	for _, v := range op.Inputs() {
		if v == nil || seen[v] || v.Def == nil || CopyOf(v.Def) != ToHost {
			return false
		}
		seen[v] = true
		for _, u := range v.Uses() {
			if u.Op != op && u.Op.Type == "Concat" && u.Op.Host {
				return false // another merge reads it too
			}
		}
	}
	return true
}
