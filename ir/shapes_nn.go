package ir

// Inference rules for neural-network layers: convolution, pooling,
// normalisation, softmax, dropout and matrix products.

func init() {
	convAttrs := map[string]AttrType{
		"auto_pad": AttrString, "dilations": AttrInts, "group": AttrInt,
		"kernel_shape": AttrInts, "pads": AttrInts, "strides": AttrInts,
	}
	Register(&Schema{Type: "Conv", MinIn: 2, MaxIn: 3, MinOut: 1, MaxOut: 1, Attrs: convAttrs, Infer: inferConv})
	Register(&Schema{Type: "ConvTranspose", MinIn: 2, MaxIn: 3, MinOut: 1, MaxOut: 1,
		Attrs: map[string]AttrType{
			"auto_pad": AttrString, "dilations": AttrInts, "group": AttrInt, "kernel_shape": AttrInts,
			"output_padding": AttrInts, "output_shape": AttrInts, "pads": AttrInts, "strides": AttrInts,
		}, Infer: inferConvTranspose})

	Register(&Schema{Type: "MaxPool", MinIn: 1, MaxIn: 1, MinOut: 1, MaxOut: 2,
		Attrs: map[string]AttrType{
			"auto_pad": AttrString, "ceil_mode": AttrInt, "dilations": AttrInts, "kernel_shape": AttrInts,
			"pads": AttrInts, "storage_order": AttrInt, "strides": AttrInts,
		}, Infer: inferPool})
	// AveragePool gained dilations in opset 19.
	Register(&Schema{Type: "AveragePool", MinIn: 1, MaxIn: 1, MinOut: 1, MaxOut: 1,
		Attrs: map[string]AttrType{
			"auto_pad": AttrString, "ceil_mode": AttrInt, "count_include_pad": AttrInt, "dilations": AttrInts,
			"kernel_shape": AttrInts, "pads": AttrInts, "strides": AttrInts,
		}, Infer: inferPool})
	// LpPool gained dilations and ceil_mode in opset 18.
	Register(&Schema{Type: "LpPool", MinIn: 1, MaxIn: 1, MinOut: 1, MaxOut: 1,
		Attrs: map[string]AttrType{
			"auto_pad": AttrString, "ceil_mode": AttrInt, "dilations": AttrInts, "kernel_shape": AttrInts,
			"p": AttrInt, "pads": AttrInts, "strides": AttrInts,
		}, Infer: inferPool})
	Register(&Schema{Type: "GlobalAveragePool", MinIn: 1, MaxIn: 1, MinOut: 1, MaxOut: 1, Infer: inferGlobalPool})
	Register(&Schema{Type: "GlobalMaxPool", MinIn: 1, MaxIn: 1, MinOut: 1, MaxOut: 1, Infer: inferGlobalPool})
	Register(&Schema{Type: "GlobalLpPool", MinIn: 1, MaxIn: 1, MinOut: 1, MaxOut: 1,
		Attrs: map[string]AttrType{"p": AttrInt}, Infer: inferGlobalPool})

	// BatchNormalization: opset 9-13 has up to 5 outputs (Y, mean, var,
	// saved_mean, saved_var); opset 14+ has up to 3 (Y, running_mean,
	// running_var) and the training_mode attribute.
	Register(&Schema{Type: "BatchNormalization", MinIn: 5, MaxIn: 5, MinOut: 1, MaxOut: 5,
		Attrs: map[string]AttrType{"epsilon": AttrFloat, "momentum": AttrFloat, "training_mode": AttrInt},
		Infer: inferBatchNorm, NoGrad: []int{3, 4}}) // the running statistics get none
	Register(&Schema{Type: "InstanceNormalization", MinIn: 3, MaxIn: 3, MinOut: 1, MaxOut: 1,
		Attrs: map[string]AttrType{"epsilon": AttrFloat}, Infer: inferInstanceNorm})
	Register(&Schema{Type: "LayerNormalization", MinIn: 2, MaxIn: 3, MinOut: 1, MaxOut: 3,
		Attrs: map[string]AttrType{"axis": AttrInt, "epsilon": AttrFloat, "stash_type": AttrInt},
		Infer: inferLayerNorm, Since: 17})

	for _, t := range []string{"Softmax", "LogSoftmax", "Hardmax"} {
		Register(&Schema{Type: t, MinIn: 1, MaxIn: 1, MinOut: 1, MaxOut: 1,
			Attrs: map[string]AttrType{"axis": AttrInt}, Infer: inferSoftmax})
	}
	// Dropout: opset 10-11 has the ratio attribute and one input; opset
	// 12+ takes ratio and training_mode as inputs and has a seed.
	Register(&Schema{Type: "Dropout", MinIn: 1, MaxIn: 3, MinOut: 1, MaxOut: 2,
		Attrs: map[string]AttrType{"ratio": AttrFloat, "seed": AttrInt}, Infer: inferDropout,
		Random: true, NoGrad: []int{1, 2}})

	Register(&Schema{Type: "Gemm", MinIn: 2, MaxIn: 3, MinOut: 1, MaxOut: 1,
		Attrs: map[string]AttrType{"alpha": AttrFloat, "beta": AttrFloat, "transA": AttrInt, "transB": AttrInt},
		Infer: inferGemm})
	Register(&Schema{Type: "MatMul", MinIn: 2, MaxIn: 2, MinOut: 1, MaxOut: 1, Infer: inferMatMul})
}

// spatialInput checks that input 0 is (N, C, D1, ..., Dn) with n >= 1.
func spatialInput(c *InferCtx) (Shape, error) {
	x := c.In(0)
	if len(x.Shape) < 3 {
		return nil, c.Errorf("input 0 has rank %d, %s needs at least 3 dimensions (N, C, D1, ...)", len(x.Shape), c.Op.Type)
	}
	return x.Shape, nil
}

// Window is the resolved geometry of a Conv or pooling op over its
// input's spatial dimensions, as shape inference derives it: strides and
// dilations (default 1) and the begin and end padding (pads[i],
// pads[i+n]) with auto_pad applied.
type Window struct {
	Kernel, Strides, Dilations, Pads []int64
}

// WindowOf resolves the window of a Conv (kernel from W's spatial
// dimensions) or a MaxPool, AveragePool or LpPool (kernel_shape) op.
// Gradient rules use it so the padding rules live in one place.
func WindowOf(op *Op) (*Window, error) {
	c := &InferCtx{Op: op}
	xs, err := spatialInput(c)
	if err != nil {
		return nil, err
	}
	var kernel []int64
	if op.Type == "Conv" {
		if w := c.In(1); w == nil || len(w.Shape) != len(xs) {
			return nil, c.Errorf("input 1 (W) must have the rank of input 0")
		}
		kernel = c.In(1).Shape[2:]
	} else {
		a := op.Attr("kernel_shape")
		if a == nil || len(a.Ints) != len(xs)-2 {
			return nil, c.Errorf("attribute kernel_shape must give %d spatial dimensions", len(xs)-2)
		}
		kernel = a.Ints
	}
	st, dil, _, pads, err := windowPads(c, xs[2:], kernel)
	if err != nil {
		return nil, err
	}
	return &Window{Kernel: append([]int64(nil), kernel...), Strides: st, Dilations: dil, Pads: pads}, nil
}

// windowPads resolves strides, dilations, effective kernel sizes
// (k-1)*d+1 and padding (explicit, or from auto_pad) of a sliding window
// over input spatial dimensions in.
func windowPads(c *InferCtx, in, kernel []int64) (st, dil, ek, pads []int64, err error) {
	n := len(in)
	for i, k := range kernel {
		if k <= 0 {
			return nil, nil, nil, nil, c.Errorf("kernel dimension %d is %d, must be positive", i, k)
		}
	}
	st, err = attrIntsLen(c, "strides", n, 1)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	dil, err = attrIntsLen(c, "dilations", n, 1)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	for i := 0; i < n; i++ {
		if st[i] <= 0 {
			return nil, nil, nil, nil, c.Errorf("attribute strides has %d at position %d, must be positive", st[i], i)
		}
		if dil[i] <= 0 {
			return nil, nil, nil, nil, c.Errorf("attribute dilations has %d at position %d, must be positive", dil[i], i)
		}
	}
	ek = make([]int64, n)
	for i := range ek {
		ek[i] = (kernel[i]-1)*dil[i] + 1
	}
	pads, err = attrIntsLen(c, "pads", 2*n, 0)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	for i, p := range pads {
		if p < 0 {
			return nil, nil, nil, nil, c.Errorf("attribute pads has %d at position %d, must be >= 0", p, i)
		}
	}
	autoPad := c.Op.AttrString("auto_pad", "NOTSET")
	switch autoPad {
	case "", "NOTSET":
	case "VALID", "SAME_UPPER", "SAME_LOWER":
		for _, p := range pads {
			if p != 0 {
				return nil, nil, nil, nil, c.Errorf("attributes pads %v and auto_pad=%s cannot be used together", pads, autoPad)
			}
		}
		if autoPad != "VALID" {
			for i := 0; i < n; i++ {
				outSame := ceilDiv(in[i], st[i])
				total := max(0, (outSame-1)*st[i]+ek[i]-in[i])
				small := total / 2
				if autoPad == "SAME_UPPER" {
					pads[i], pads[i+n] = small, total-small
				} else {
					pads[i], pads[i+n] = total-small, small
				}
			}
		}
	default:
		return nil, nil, nil, nil, c.Errorf("attribute auto_pad is %q, want NOTSET, SAME_UPPER, SAME_LOWER or VALID", autoPad)
	}
	return st, dil, ek, pads, nil
}

// windowOut computes the spatial output dimensions of a sliding window
// (Conv, pooling) following ONNX's convPoolShapeInference: explicit pads
// or auto_pad, strides, dilations (effective kernel (k-1)*d+1), and
// ceil_mode, under which a window that would start in the right padding
// is dropped (as PyTorch and onnxruntime do).
func windowOut(c *InferCtx, in, kernel []int64, ceilMode bool) ([]int64, error) {
	n := len(in)
	st, dil, ek, pads, err := windowPads(c, in, kernel)
	if err != nil {
		return nil, err
	}
	out := make([]int64, n)
	for i := 0; i < n; i++ {
		span := in[i] + pads[i] + pads[i+n] - ek[i]
		if span < 0 {
			return nil, c.Errorf("spatial dimension %d: effective kernel size %d (kernel %d, dilation %d) exceeds the padded input size %d",
				i, ek[i], kernel[i], dil[i], in[i]+pads[i]+pads[i+n])
		}
		if ceilMode {
			o := ceilDiv(span, st[i]) + 1
			if (o-1)*st[i] >= in[i]+pads[i] {
				o--
			}
			out[i] = o
		} else {
			out[i] = span/st[i] + 1
		}
	}
	return out, nil
}

// kernelFromWeight takes the kernel from W's spatial dimensions and
// checks the optional kernel_shape attribute against it.
func kernelFromWeight(c *InferCtx, w Shape) ([]int64, error) {
	k := []int64(w[2:])
	if a := c.Op.Attr("kernel_shape"); a != nil {
		if !Shape(a.Ints).Equal(Shape(k)) {
			return nil, c.Errorf("attribute kernel_shape %v does not match the spatial dimensions %v of input 1 (W)", a.Ints, k)
		}
	}
	return k, nil
}

func inferConv(c *InferCtx) error {
	xs, err := spatialInput(c)
	if err != nil {
		return err
	}
	w := c.In(1)
	if len(w.Shape) != len(xs) {
		return c.Errorf("input 1 (W) has rank %d, input 0 has rank %d; Conv needs them equal", len(w.Shape), len(xs))
	}
	if err := sameDType(c, 0, 1, 2); err != nil {
		return err
	}
	group := c.Op.AttrInt("group", 1)
	if group <= 0 {
		return c.Errorf("attribute group is %d, must be positive", group)
	}
	cin, m := xs[1], w.Shape[0]
	if w.Shape[1]*group != cin {
		return c.Errorf("input 0 has %d channels but input 1 (W) has %d input channels per group × group %d = %d",
			cin, w.Shape[1], group, w.Shape[1]*group)
	}
	if m%group != 0 {
		return c.Errorf("input 1 (W) has %d output channels, not divisible by group %d", m, group)
	}
	if b := c.In(2); b != nil && (len(b.Shape) != 1 || b.Shape[0] != m) {
		return c.Errorf("input 2 (B) has shape %v, want [%d] (one bias per output channel)", b.Shape, m)
	}
	k, err := kernelFromWeight(c, w.Shape)
	if err != nil {
		return err
	}
	sp, err := windowOut(c, xs[2:], k, false)
	if err != nil {
		return err
	}
	c.SetOut(0, c.In(0).DType, append(Shape{xs[0], m}, sp...))
	return nil
}

func inferConvTranspose(c *InferCtx) error {
	xs, err := spatialInput(c)
	if err != nil {
		return err
	}
	w := c.In(1)
	if len(w.Shape) != len(xs) {
		return c.Errorf("input 1 (W) has rank %d, input 0 has rank %d; ConvTranspose needs them equal", len(w.Shape), len(xs))
	}
	if err := sameDType(c, 0, 1, 2); err != nil {
		return err
	}
	group := c.Op.AttrInt("group", 1)
	if group <= 0 {
		return c.Errorf("attribute group is %d, must be positive", group)
	}
	if w.Shape[0] != xs[1] {
		return c.Errorf("input 0 has %d channels but input 1 (W) has %d (W is C × M/group × k...)", xs[1], w.Shape[0])
	}
	if xs[1]%group != 0 {
		return c.Errorf("input 0 has %d channels, not divisible by group %d", xs[1], group)
	}
	m, err := mulDims(c, w.Shape[1], group)
	if err != nil {
		return err
	}
	if b := c.In(2); b != nil && (len(b.Shape) != 1 || b.Shape[0] != m) {
		return c.Errorf("input 2 (B) has shape %v, want [%d] (one bias per output channel)", b.Shape, m)
	}
	k, err := kernelFromWeight(c, w.Shape)
	if err != nil {
		return err
	}
	n := len(k)
	in := xs[2:]
	for i, kk := range k {
		if kk <= 0 {
			return c.Errorf("kernel dimension %d is %d, must be positive", i, kk)
		}
	}
	st, err := attrIntsLen(c, "strides", n, 1)
	if err != nil {
		return err
	}
	dil, err := attrIntsLen(c, "dilations", n, 1)
	if err != nil {
		return err
	}
	opad, err := attrIntsLen(c, "output_padding", n, 0)
	if err != nil {
		return err
	}
	pads, err := attrIntsLen(c, "pads", 2*n, 0)
	if err != nil {
		return err
	}
	for i := 0; i < n; i++ {
		if st[i] <= 0 || dil[i] <= 0 {
			return c.Errorf("spatial dimension %d: strides (%d) and dilations (%d) must be positive", i, st[i], dil[i])
		}
		if opad[i] < 0 || (opad[i] >= st[i] && opad[i] >= dil[i]) {
			return c.Errorf("attribute output_padding has %d at position %d, must be >= 0 and less than the stride (%d) or dilation (%d)",
				opad[i], i, st[i], dil[i])
		}
	}
	for i, p := range pads {
		if p < 0 {
			return c.Errorf("attribute pads has %d at position %d, must be >= 0", p, i)
		}
	}
	autoPad := c.Op.AttrString("auto_pad", "NOTSET")
	switch autoPad {
	case "", "NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER":
	default:
		return c.Errorf("attribute auto_pad is %q, want NOTSET, SAME_UPPER, SAME_LOWER or VALID", autoPad)
	}
	if autoPad != "" && autoPad != "NOTSET" && hasAttr(c, "pads") {
		for _, p := range pads {
			if p != 0 {
				return c.Errorf("attributes pads %v and auto_pad=%s cannot be used together", pads, autoPad)
			}
		}
	}
	out := make(Shape, 0, len(xs))
	out = append(out, xs[0], m)
	if a := c.Op.Attr("output_shape"); a != nil {
		os := a.Ints
		switch len(os) {
		case n:
		case n + 2: // older exporters write the full (N, C, D...) shape
			os = os[2:]
		default:
			return c.Errorf("attribute output_shape has %d values, want %d (the spatial dimensions)", len(a.Ints), n)
		}
		if err := checkDims(c, "attribute output_shape", os); err != nil {
			return err
		}
		c.SetOut(0, c.In(0).DType, append(out, os...))
		return nil
	}
	for i := 0; i < n; i++ {
		var d int64
		switch autoPad {
		case "SAME_UPPER", "SAME_LOWER":
			d = in[i] * st[i]
		default:
			ek := (k[i]-1)*dil[i] + 1
			d = st[i]*(in[i]-1) + opad[i] + ek - pads[i] - pads[i+n]
			if autoPad == "VALID" {
				d = st[i]*(in[i]-1) + opad[i] + ek
			}
		}
		if d < 0 {
			return c.Errorf("spatial dimension %d: output size %d is negative (pads %v too large)", i, d, pads)
		}
		out = append(out, d)
	}
	c.SetOut(0, c.In(0).DType, out)
	return nil
}

func inferPool(c *InferCtx) error {
	xs, err := spatialInput(c)
	if err != nil {
		return err
	}
	a := c.Op.Attr("kernel_shape")
	if a == nil {
		return c.Errorf("attribute kernel_shape is required")
	}
	if len(a.Ints) != len(xs)-2 {
		return c.Errorf("attribute kernel_shape has %d values, input 0 has %d spatial dimensions", len(a.Ints), len(xs)-2)
	}
	ceilMode := c.Op.AttrInt("ceil_mode", 0)
	if ceilMode != 0 && ceilMode != 1 {
		return c.Errorf("attribute ceil_mode is %d, want 0 or 1", ceilMode)
	}
	if so := c.Op.AttrInt("storage_order", 0); so != 0 && so != 1 {
		return c.Errorf("attribute storage_order is %d, want 0 or 1", so)
	}
	if p := c.Op.AttrInt("p", 2); p <= 0 {
		return c.Errorf("attribute p is %d, must be positive", p)
	}
	sp, err := windowOut(c, xs[2:], a.Ints, ceilMode == 1)
	if err != nil {
		return err
	}
	out := append(Shape{xs[0], xs[1]}, sp...)
	c.SetOut(0, c.In(0).DType, out)
	c.SetOut(1, Int64, out.Clone()) // MaxPool's Indices
	return nil
}

func inferGlobalPool(c *InferCtx) error {
	x := c.In(0)
	if len(x.Shape) < 2 {
		return c.Errorf("input 0 has rank %d, %s needs at least 2 dimensions (N, C, ...)", len(x.Shape), c.Op.Type)
	}
	out := make(Shape, len(x.Shape))
	out[0], out[1] = x.Shape[0], x.Shape[1]
	for i := 2; i < len(out); i++ {
		out[i] = 1
	}
	c.SetOut(0, x.DType, out)
	return nil
}

// channelParams checks that inputs idx are 1-D vectors of length ch.
func channelParams(c *InferCtx, ch int64, names []string, idx ...int) error {
	for k, i := range idx {
		v := c.In(i)
		if len(v.Shape) != 1 || v.Shape[0] != ch {
			return c.Errorf("input %d (%s) has shape %v, want [%d] (one value per channel of input 0)", i, names[k], v.Shape, ch)
		}
	}
	return nil
}

// BatchNormTraining reports whether a BatchNormalization op normalises
// with the statistics of its batch rather than its running ones:
// training_mode=1 (opset 14+), or, without that attribute, an output
// beyond Y (opset 9-13, whose extra outputs exist only in training;
// inferBatchNorm rejects them at opset 14+ without training_mode=1, so
// the test needs no opset). The kernel, the gradient rule and the split
// rule all ask this one function.
func BatchNormTraining(op *Op) bool {
	if a := op.Attr("training_mode"); a != nil {
		return a.Int == 1
	}
	for _, v := range op.Outputs()[min(1, len(op.Outputs())):] {
		if v != nil {
			return true
		}
	}
	return false
}

func inferBatchNorm(c *InferCtx) error {
	x := c.In(0)
	if len(x.Shape) < 2 {
		return c.Errorf("input 0 has rank %d, BatchNormalization needs at least 2 dimensions (N, C, ...)", len(x.Shape))
	}
	ch := x.Shape[1]
	if err := channelParams(c, ch, []string{"scale", "B", "mean", "var"}, 1, 2, 3, 4); err != nil {
		return err
	}
	training := c.Op.AttrInt("training_mode", 0)
	if training != 0 && training != 1 {
		return c.Errorf("attribute training_mode is %d, want 0 or 1", training)
	}
	if c.Opset >= 14 {
		if c.NumOut() > 3 {
			return c.Errorf("has %d outputs; since opset 14 BatchNormalization has at most 3 (Y, running_mean, running_var)", c.NumOut())
		}
		if training == 0 && (c.HasOut(1) || c.HasOut(2)) {
			return c.Errorf("outputs running_mean and running_var exist only with training_mode=1")
		}
	} else if hasAttr(c, "training_mode") {
		return c.Errorf("attribute training_mode needs opset 14 or later (model opset %d)", c.Opset)
	}
	c.SetOut(0, x.DType, x.Shape.Clone())
	for i := 1; i < c.NumOut(); i++ {
		c.SetOut(i, c.In(3).DType, Shape{ch})
	}
	return nil
}

func inferInstanceNorm(c *InferCtx) error {
	x := c.In(0)
	if len(x.Shape) < 3 {
		return c.Errorf("input 0 has rank %d, InstanceNormalization needs at least 3 dimensions (N, C, D1, ...)", len(x.Shape))
	}
	if err := channelParams(c, x.Shape[1], []string{"scale", "B"}, 1, 2); err != nil {
		return err
	}
	c.SetOut(0, x.DType, x.Shape.Clone())
	return nil
}

func inferLayerNorm(c *InferCtx) error {
	x := c.In(0)
	r := len(x.Shape)
	if r == 0 {
		return c.Errorf("input 0 is a scalar, LayerNormalization needs at least 1 dimension")
	}
	axis, err := normAxis(c, "attribute axis", c.Op.AttrInt("axis", -1), r)
	if err != nil {
		return err
	}
	norm := x.Shape[axis:]
	for i := 1; i <= 2; i++ {
		v := c.In(i)
		if v == nil {
			continue
		}
		if s, err := Broadcast(norm, v.Shape); err != nil || !s.Equal(norm) {
			return c.Errorf("%s has shape %v, which does not broadcast to the normalized dimensions %v", inName(c, i), v.Shape, norm)
		}
	}
	if err := sameDType(c, 0, 1, 2); err != nil {
		return err
	}
	stash := DType(c.Op.AttrInt("stash_type", int64(Float)))
	if !stash.IsFloat() {
		return c.Errorf("attribute stash_type is %d, want a floating-point type", int64(stash))
	}
	c.SetOut(0, x.DType, x.Shape.Clone())
	red := x.Shape.Clone()
	for i := axis; i < r; i++ {
		red[i] = 1
	}
	c.SetOut(1, stash, red)
	c.SetOut(2, stash, red.Clone())
	return nil
}

// inferSoftmax: the axis default is -1 since opset 13 and 1 before (when
// the input is coerced to 2-D); the output shape is the input's either
// way, but the axis must be valid.
func inferSoftmax(c *InferCtx) error {
	x := c.In(0)
	def := int64(-1)
	if c.Opset < 13 {
		def = 1
	}
	r := len(x.Shape)
	if r == 0 {
		return c.Errorf("input 0 is a scalar, %s needs at least 1 dimension", c.Op.Type)
	}
	if _, err := normAxis(c, "attribute axis", c.Op.AttrInt("axis", def), r); err != nil {
		return err
	}
	c.SetOut(0, x.DType, x.Shape.Clone())
	return nil
}

func inferDropout(c *InferCtx) error {
	x := c.In(0)
	if v := c.In(1); v != nil {
		if !v.DType.IsFloat() || numElems(v.Shape) != 1 || len(v.Shape) > 1 {
			return c.Errorf("input 1 (ratio) is %v%v, want a floating-point scalar", v.DType, v.Shape)
		}
		if hasAttr(c, "ratio") {
			return c.Errorf("ratio is given both as attribute (opset < 12) and as input 1 (opset >= 12)")
		}
	}
	training := false
	if v := c.In(2); v != nil {
		if v.DType != Bool || numElems(v.Shape) != 1 || len(v.Shape) > 1 {
			return c.Errorf("input 2 (training_mode) is %v%v, want a bool scalar", v.DType, v.Shape)
		}
		t := numIn(c, 2)
		training = t == nil || t.Int64s()[0] != 0
	}
	if r := c.Op.AttrFloat("ratio", 0.5); r < 0 || r >= 1 {
		return c.Errorf("attribute ratio is %v, must be in [0, 1)", r)
	}
	c.SetOut(0, x.DType, x.Shape.Clone())
	c.SetOut(1, Bool, x.Shape.Clone())
	if !training {
		// Inference mode is the identity.
		if t := foldIn(c, 0); t != nil && foldSize(t.Shape) {
			c.SetConst(0, cloneTensor(t))
		}
	}
	return nil
}

func inferGemm(c *InferCtx) error {
	a, b := c.In(0), c.In(1)
	if len(a.Shape) != 2 || len(b.Shape) != 2 {
		return c.Errorf("inputs have ranks %d and %d, Gemm needs 2-D A and B", len(a.Shape), len(b.Shape))
	}
	if err := sameDType(c, 0, 1, 2); err != nil {
		return err
	}
	m, k := a.Shape[0], a.Shape[1]
	if c.Op.AttrInt("transA", 0) != 0 {
		m, k = k, m
	}
	k2, n := b.Shape[0], b.Shape[1]
	if c.Op.AttrInt("transB", 0) != 0 {
		k2, n = n, k2
	}
	if k != k2 {
		return c.Errorf("inner dimensions differ: A %v (transA=%d) gives K=%d, B %v (transB=%d) gives K=%d",
			a.Shape, c.Op.AttrInt("transA", 0), k, b.Shape, c.Op.AttrInt("transB", 0), k2)
	}
	out := Shape{m, n}
	if cv := c.In(2); cv != nil {
		if s, err := Broadcast(out, cv.Shape); err != nil || !s.Equal(out) {
			return c.Errorf("input 2 (C) has shape %v, which does not broadcast to the output shape %v", cv.Shape, out)
		}
	}
	c.SetOut(0, a.DType, out)
	return nil
}

// inferMatMul follows numpy.matmul: a 1-D operand is promoted to a
// matrix (and the added dimension removed), batch dimensions broadcast.
func inferMatMul(c *InferCtx) error {
	a, b := c.In(0), c.In(1)
	if err := sameDType(c, 0, 1); err != nil {
		return err
	}
	as, bs := a.Shape, b.Shape
	if len(as) == 0 || len(bs) == 0 {
		return c.Errorf("inputs have ranks %d and %d, MatMul needs at least 1-D operands", len(as), len(bs))
	}
	aVec, bVec := len(as) == 1, len(bs) == 1
	if aVec {
		as = Shape{1, as[0]}
	}
	if bVec {
		bs = Shape{bs[0], 1}
	}
	ka, kb := as[len(as)-1], bs[len(bs)-2]
	if ka != kb {
		return c.Errorf("input 0 has shape %v and input 1 has shape %v, MatMul needs matching inner dimensions: %d vs %d",
			a.Shape, b.Shape, ka, kb)
	}
	batch, err := Broadcast(as[:len(as)-2], bs[:len(bs)-2])
	if err != nil {
		return c.Errorf("batch dimensions of inputs %v and %v do not broadcast: %v", a.Shape, b.Shape, err)
	}
	out := append(Shape{}, batch...)
	if !aVec {
		out = append(out, as[len(as)-2])
	}
	if !bVec {
		out = append(out, bs[len(bs)-1])
	}
	c.SetOut(0, a.DType, out)
	return nil
}
