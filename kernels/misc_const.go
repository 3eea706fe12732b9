package kernels

import (
	"encoding/binary"
	"math"
	"slices"

	"github.com/tsplit/tsplit/ir"
)

// Ops that make tensors from shapes and attributes: Shape, Size,
// Constant, ConstantOfShape and Range. The IR folds them when small;
// these kernels compute them for real (large ConstantOfShape or Range
// outputs, or graphs executed without folding).

func init() {
	regOp("Shape", 1, 1, nil, miscShapeRun)
	regOp("Size", 1, 1, nil, miscSizeRun)
	regOp("Constant", 0, 1, nil, miscConstantRun)
	regOp("ConstantOfShape", 1, 1, []ir.DType{ir.Int64}, miscConstantOfShapeRun)
	regOp("Range", 3, 1, miscRangeTypes, miscRangeRun)
}

// miscShapeRun: the dimensions start:end of the input shape (opset 15
// start/end: negative counts from the end, then clamped to [0, rank]).
func miscShapeRun(c *Ctx) error {
	x, y := c.In[0], c.Out[0]
	r := int64(len(x.Shape))
	clamp := func(a int64) int64 {
		if a < 0 {
			a += r
		}
		return min(max(a, 0), r)
	}
	start, end := clamp(c.Op.AttrInt("start", 0)), clamp(c.Op.AttrInt("end", r))
	dims := x.Shape[start:max(start, end)]
	if y.DType != ir.Int64 || !y.Shape.Equal(ir.Shape{int64(len(dims))}) {
		return c.Errorf("output is %v%v, want i64[%d]", y.DType, y.Shape, len(dims))
	}
	copy(viewAs[int64](y), dims)
	return nil
}

func miscSizeRun(c *Ctx) error {
	y := c.Out[0]
	if y.DType != ir.Int64 || y.Len() != 1 {
		return c.Errorf("output is %v%v, want an int64 scalar", y.DType, y.Shape)
	}
	n, err := c.In[0].Shape.NumElements()
	if err != nil {
		return c.Errorf("input: %v", err)
	}
	viewAs[int64](y)[0] = n
	return nil
}

// miscConstantRun writes the value attribute (value, value_float(s),
// value_int(s)); string constants have no tensor representation here.
func miscConstantRun(c *Ctx) error {
	y := c.Out[0]
	if len(c.Op.Attrs) != 1 {
		return c.Errorf("has %d attributes, want exactly one value attribute", len(c.Op.Attrs))
	}
	a := &c.Op.Attrs[0]
	var dt ir.DType
	var shape ir.Shape
	var raw []byte
	switch a.Name {
	case "value":
		if a.Tensor == nil {
			return c.Errorf("attribute value carries no tensor")
		}
		dt, shape, raw = a.Tensor.DType, a.Tensor.Shape, a.Tensor.Raw
	case "value_float":
		dt, shape = ir.Float, ir.Shape{}
		raw = binary.LittleEndian.AppendUint32(nil, math.Float32bits(a.Float))
	case "value_floats":
		dt, shape = ir.Float, ir.Shape{int64(len(a.Floats))}
		for _, f := range a.Floats {
			raw = binary.LittleEndian.AppendUint32(raw, math.Float32bits(f))
		}
	case "value_int":
		dt, shape = ir.Int64, ir.Shape{}
		raw = binary.LittleEndian.AppendUint64(nil, uint64(a.Int))
	case "value_ints":
		dt, shape = ir.Int64, ir.Shape{int64(len(a.Ints))}
		for _, v := range a.Ints {
			raw = binary.LittleEndian.AppendUint64(raw, uint64(v))
		}
	default:
		return c.Errorf("attribute %s is not supported (string and sparse constants have no tensor kernel)", a.Name)
	}
	if dt != y.DType || !shape.Equal(y.Shape) || len(raw) != len(y.Data) {
		return c.Errorf("constant %v%v (%d bytes) does not match the output %v%v", dt, shape, len(raw), y.DType, y.Shape)
	}
	copy(y.Data, raw)
	return nil
}

// miscConstantOfShapeRun fills the output with the one-element value
// attribute (float32 0 by default).
func miscConstantOfShapeRun(c *Ctx) error {
	y := c.Out[0]
	dims, err := readInts(c, c.In[0], "input 0 (shape)")
	if err != nil {
		return err
	}
	if !ir.Shape(dims).Equal(y.Shape) {
		return c.Errorf("input 0 asks for shape %v, the output has %v", dims, y.Shape)
	}
	dt, val := ir.Float, make([]byte, 4)
	if a := c.Op.Attr("value"); a != nil {
		if a.Tensor == nil || a.Tensor.Len() != 1 {
			return c.Errorf("attribute value must be a one-element tensor")
		}
		dt, val = a.Tensor.DType, a.Tensor.Raw
	}
	if es := esize(dt); dt != y.DType || es == 0 || len(val) != es {
		return c.Errorf("value %v (%d bytes) does not match the output type %v", dt, len(val), y.DType)
	}
	shFill(y.Data, val)
	return nil
}

// miscRangeRun: start, start+delta, ... while below limit (above, for a
// negative delta). Values accumulate in the element type as in the
// spec's reference loop (onnxruntime does the same).
func miscRangeRun(c *Ctx) error {
	y := c.Out[0]
	for i, t := range c.In[:3] {
		if t.DType != y.DType || t.Len() != 1 {
			return c.Errorf("input %d is %v%v, want a scalar of type %v", i, t.DType, t.Shape, y.DType)
		}
	}
	if len(y.Shape) != 1 {
		return c.Errorf("output has shape %v, want 1-D", y.Shape)
	}
	if !slices.Contains(miscRangeTypes, y.DType) {
		return c.Errorf("element type %v is not supported", y.DType)
	}
	return numOf(y.DType).rangeFill(c)
}

// miscRangeTypes are the element types of Range.
var miscRangeTypes = []ir.DType{ir.Float, ir.Double, ir.Int16, ir.Int32, ir.Int64}

// miscNumKernels are the typed bodies of the misc_* files' numeric
// kernels.
type miscNumKernels interface {
	rangeFill(c *Ctx) error
}

func (numK[T, A]) rangeFill(c *Ctx) error {
	start, limit, delta := viewAs[T](c.In[0])[0], viewAs[T](c.In[1])[0], viewAs[T](c.In[2])[0]
	if delta == 0 {
		return c.Errorf("input 2 (delta) is 0")
	}
	// Expected count, in float64 (exact for every count that fits memory).
	want := math.Ceil((float64(limit) - float64(start)) / float64(delta))
	y := viewAs[T](c.Out[0])
	if math.IsNaN(want) || int64(len(y)) != int64(max(want, 0)) {
		return c.Errorf("range from %v to %v by %v has %v elements, the output %d", start, limit, delta, max(want, 0), len(y))
	}
	v := start
	for i := range y {
		y[i] = v
		v += delta
	}
	return nil
}
