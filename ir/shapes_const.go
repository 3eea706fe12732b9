package ir

import "math"

// Inference rules for ops that create or convert constants: Shape and
// Size (always constant, since shapes are static: the root of shape
// folding), Constant, ConstantOfShape, Range, Cast and CastLike.

func init() {
	// Shape gained start/end in opset 15.
	Register(&Schema{Type: "Shape", MinIn: 1, MaxIn: 1, MinOut: 1, MaxOut: 1,
		Attrs: map[string]AttrType{"start": AttrInt, "end": AttrInt}, Infer: inferShape})
	Register(&Schema{Type: "Size", MinIn: 1, MaxIn: 1, MinOut: 1, MaxOut: 1, Infer: inferSize})
	// Constant: value and sparse_value since opset 9, value_float(s),
	// value_int(s) and value_string(s) since 12.
	Register(&Schema{Type: "Constant", MinIn: 0, MaxIn: 0, MinOut: 1, MaxOut: 1,
		Attrs: map[string]AttrType{
			"value": AttrTensor, "sparse_value": AttrSparseTensor,
			"value_float": AttrFloat, "value_floats": AttrFloats,
			"value_int": AttrInt, "value_ints": AttrInts,
			"value_string": AttrString, "value_strings": AttrStrings,
		}, Infer: inferConstant})
	Register(&Schema{Type: "ConstantOfShape", MinIn: 1, MaxIn: 1, MinOut: 1, MaxOut: 1,
		Attrs: map[string]AttrType{"value": AttrTensor}, Infer: inferConstantOfShape, ConstIn: []int{0}, Since: 9})
	Register(&Schema{Type: "Range", MinIn: 3, MaxIn: 3, MinOut: 1, MaxOut: 1, Infer: inferRange, ConstIn: []int{0, 1, 2}, Since: 11})
	// Cast and CastLike gained saturate (float8 targets) in opset 19.
	Register(&Schema{Type: "Cast", MinIn: 1, MaxIn: 1, MinOut: 1, MaxOut: 1,
		Attrs: map[string]AttrType{"to": AttrInt, "saturate": AttrInt}, Infer: inferCast, Elementwise: true})
	// CastLike reads input 1 for its type only: not elementwise in it.
	Register(&Schema{Type: "CastLike", MinIn: 2, MaxIn: 2, MinOut: 1, MaxOut: 1,
		Attrs: map[string]AttrType{"saturate": AttrInt}, Infer: inferCast, NoGrad: []int{1}, Since: 15})
}

func inferShape(c *InferCtx) error {
	x := c.In(0)
	r := int64(len(x.Shape))
	clamp := func(a int64) int64 {
		if a < 0 {
			a += r
		}
		return min(max(a, 0), r)
	}
	start := clamp(c.Op.AttrInt("start", 0))
	end := clamp(c.Op.AttrInt("end", r))
	dims := []int64{}
	if end > start {
		dims = append(dims, x.Shape[start:end]...)
	}
	out := Shape{int64(len(dims))}
	c.SetOut(0, Int64, out)
	c.SetConst(0, TensorFromInt64s(Int64, out, dims))
	return nil
}

func inferSize(c *InferCtx) error {
	n, err := c.In(0).Shape.NumElements()
	if err != nil {
		return c.Errorf("input 0: %v", err)
	}
	c.SetOut(0, Int64, Shape{})
	c.SetConst(0, TensorFromInt64s(Int64, Shape{}, []int64{n}))
	return nil
}

// tensorOK checks that an attribute tensor's bytes match its shape.
func tensorOK(t *Tensor) bool {
	if t.DType == String {
		return true
	}
	if !t.DType.Valid() {
		return false
	}
	n, err := t.Shape.Bytes(t.DType)
	return err == nil && int64(len(t.Raw)) == n
}

func inferConstant(c *InferCtx) error {
	if len(c.Op.Attrs) != 1 {
		return c.Errorf("has %d attributes, Constant needs exactly one of value, value_float(s), value_int(s), value_string(s)", len(c.Op.Attrs))
	}
	a := &c.Op.Attrs[0]
	var t *Tensor
	switch a.Name {
	case "value":
		if a.Tensor == nil {
			return c.Errorf("attribute value carries no tensor data")
		}
		if !tensorOK(a.Tensor) {
			return c.Errorf("attribute value is %v%v with %d data bytes, which do not match its shape", a.Tensor.DType, a.Tensor.Shape, len(a.Tensor.Raw))
		}
		t = a.Tensor
	case "value_float":
		t = TensorFromFloat64s(Float, Shape{}, []float64{float64(a.Float)})
	case "value_floats":
		f := make([]float64, len(a.Floats))
		for i, v := range a.Floats {
			f[i] = float64(v)
		}
		t = TensorFromFloat64s(Float, Shape{int64(len(f))}, f)
	case "value_int":
		t = TensorFromInt64s(Int64, Shape{}, []int64{a.Int})
	case "value_ints":
		t = TensorFromInt64s(Int64, Shape{int64(len(a.Ints))}, a.Ints)
	case "value_string":
		c.SetOut(0, String, Shape{})
		return nil
	case "value_strings":
		c.SetOut(0, String, Shape{int64(len(a.Strings))})
		return nil
	case "sparse_value":
		return c.Errorf("attribute sparse_value: sparse constants are not supported")
	}
	c.SetOut(0, t.DType, t.Shape.Clone())
	if t.DType != String && elemBytes(t.DType) > 0 && foldSize(t.Shape) {
		c.SetConst(0, cloneTensor(t))
	}
	return nil
}

func inferConstantOfShape(c *InferCtx) error {
	if err := checkRank1(c, 0, "shape", false); err != nil {
		return err
	}
	dims, err := constIntsInput(c, 0, "output shape")
	if err != nil {
		return err
	}
	if err := checkDims(c, "input 0 (shape)", dims); err != nil {
		return err
	}
	val := TensorFromFloat64s(Float, Shape{1}, []float64{0})
	if a := c.Op.Attr("value"); a != nil {
		if a.Tensor == nil {
			return c.Errorf("attribute value carries no tensor data")
		}
		val = a.Tensor
		if val.Len() != 1 || len(val.Shape) > 1 {
			return c.Errorf("attribute value has shape %v, want a one-element tensor", val.Shape)
		}
		if val.DType == String || !tensorOK(val) || elemBytes(val.DType) == 0 {
			return c.Errorf("attribute value has unsupported type %v", val.DType)
		}
	}
	out := Shape(dims).Clone()
	if _, err := out.Bytes(val.DType); err != nil {
		return c.Errorf("output shape %v: %v", out, err)
	}
	c.SetOut(0, val.DType, out)
	if foldSize(out) {
		eb := elemBytes(val.DType)
		n := int(numElems(out))
		raw := make([]byte, n*eb)
		for i := 0; i < n; i++ {
			copy(raw[i*eb:], val.Raw[:eb])
		}
		c.SetConst(0, &Tensor{DType: val.DType, Shape: out, Raw: raw})
	}
	return nil
}

func inferRange(c *InferCtx) error {
	dt := c.In(0).DType
	switch dt {
	case Float, Double, Int16, Int32, Int64:
	default:
		return c.Errorf("input 0 (start) has type %v, Range takes float, double, int16, int32 or int64", dt)
	}
	if err := sameDType(c, 0, 1, 2); err != nil {
		return err
	}
	names := []string{"start", "limit", "delta"}
	ts := make([]*Tensor, 3)
	for i := range ts {
		v := c.In(i)
		if len(v.Shape) > 1 || numElems(v.Shape) != 1 {
			return c.Errorf("%s (%s) has shape %v, want a scalar", inName(c, i), names[i], v.Shape)
		}
		c.needConstIn(i)
		if ts[i] = numIn(c, i); ts[i] == nil {
			return c.Errorf("%s (%s) is not a compile-time constant; Range needs constant inputs to infer its static output size", inName(c, i), names[i])
		}
	}
	var n int64
	if dt.IsFloat() {
		s, l, d := ts[0].Float64s()[0], ts[1].Float64s()[0], ts[2].Float64s()[0]
		if d == 0 || math.IsNaN(s) || math.IsNaN(l) || math.IsNaN(d) {
			return c.Errorf("start %v, limit %v, delta %v do not define a range", s, l, d)
		}
		f := math.Ceil((l - s) / d)
		if f > float64(maxDim) {
			return c.Errorf("range from %v to %v by %v has too many elements", s, l, d)
		}
		n = max(int64(f), 0)
		out := Shape{n}
		c.SetOut(0, dt, out)
		if foldSize(out) {
			// Accumulate in the element type, as the ONNX definition (and
			// ONNX Runtime) do: start, start+delta, (start+delta)+delta, …
			vals := make([]float64, n)
			acc32, acc := float32(s), s
			for i := range vals {
				if dt == Float {
					vals[i] = float64(acc32)
					acc32 += float32(d)
				} else {
					vals[i] = acc
					acc += d
				}
			}
			c.SetConst(0, TensorFromFloat64s(dt, out, vals))
		}
		return nil
	}
	s, l, d := ts[0].Int64s()[0], ts[1].Int64s()[0], ts[2].Int64s()[0]
	if d == 0 {
		return c.Errorf("input 2 (delta) is 0")
	}
	// int16/int32/int64 differences cannot overflow int64 except for
	// extreme int64 inputs; compute with care.
	diff := l - s
	if (l > s) != (diff > 0) && l != s {
		return c.Errorf("range from %d to %d overflows", s, l)
	}
	if d > 0 {
		n = ceilDiv(diff, d)
	} else {
		n = ceilDiv(-diff, -d)
	}
	n = max(n, 0)
	out := Shape{n}
	c.SetOut(0, dt, out)
	if foldSize(out) {
		vals := make([]int64, n)
		for i := range vals {
			vals[i] = s + int64(i)*d
		}
		c.SetConst(0, TensorFromInt64s(dt, out, vals))
	}
	return nil
}

// inferCast serves Cast (target from attribute to) and CastLike (target
// from input 1's type). Constants of numeric and bool types are folded.
func inferCast(c *InferCtx) error {
	x := c.In(0)
	var to DType
	if c.Op.Type == "CastLike" {
		to = c.In(1).DType
	} else {
		a := c.Op.Attr("to")
		if a == nil {
			return c.Errorf("attribute to is required")
		}
		to = DType(a.Int)
		if !to.Valid() {
			return c.Errorf("attribute to is %d, not a known element type", a.Int)
		}
	}
	if s := c.Op.AttrInt("saturate", 1); s != 0 && s != 1 {
		return c.Errorf("attribute saturate is %d, want 0 or 1", s)
	}
	c.SetOut(0, to, x.Shape.Clone())
	if !foldSize(x.Shape) {
		return nil
	}
	if to == x.DType {
		if t := foldIn(c, 0); t != nil {
			c.SetConst(0, cloneTensor(t))
		}
		return nil
	}
	t := numIn(c, 0)
	if t == nil || !numericDType(to) {
		return nil
	}
	switch {
	case to.IsFloat() || to == Bool:
		c.SetConst(0, TensorFromFloat64s(to, t.Shape, t.Float64s()))
	case t.DType == Uint64 && (to == Int64 || to == Uint64):
		c.SetConst(0, &Tensor{DType: to, Shape: t.Shape.Clone(), Raw: append([]byte(nil), t.Raw...)})
	case t.DType.IsFloat():
		f := t.Float64s()
		iv := make([]int64, len(f))
		for i, v := range f {
			if math.IsNaN(v) || math.IsInf(v, 0) || math.Abs(v) >= 1<<63 {
				return nil // undefined in C; leave it to the runtime
			}
			iv[i] = int64(v)
		}
		c.SetConst(0, TensorFromInt64s(to, t.Shape, iv))
	default:
		c.SetConst(0, TensorFromInt64s(to, t.Shape, t.Int64s()))
	}
	return nil
}
