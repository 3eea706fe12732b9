package ir

import (
	"math"
	"strings"
	"testing"
)

func TestShapeSizeFold(t *testing.T) {
	cases := []struct {
		name  string
		attrs []Attr
		want  []int64
	}{
		{"all", nil, []int64{2, 3, 4}},
		{"start1", []Attr{attrI("start", 1)}, []int64{3, 4}},
		{"end_neg", []Attr{attrI("end", -1)}, []int64{2, 3}},
		{"start_clamped", []Attr{attrI("start", -10), attrI("end", 10)}, []int64{2, 3, 4}},
		{"empty", []Attr{attrI("start", 2), attrI("end", 1)}, []int64{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := newTG(t, 15)
			v := b.must("Shape", []*Value{b.f32(2, 3, 4)}, tc.attrs...)
			if v.DType != Int64 || !v.Shape.Equal(shp(int64(len(tc.want)))) {
				t.Fatalf("Shape gave %v%v", v.DType, v.Shape)
			}
			if got := foldedInts(t, v); !sameInts(got, tc.want) {
				t.Errorf("Shape folded to %v, want %v", got, tc.want)
			}
		})
	}
	b := newTG(t, 13)
	v := b.must("Shape", []*Value{b.f32()})
	if !v.Shape.Equal(shp(0)) || v.Const == nil {
		t.Errorf("Shape of a scalar gave %v const %v", v.Shape, v.Const)
	}
	v = b.must("Size", []*Value{b.f32(2, 3, 4)})
	if !v.Shape.Equal(shp()) || v.DType != Int64 || !sameInts(foldedInts(t, v), []int64{24}) {
		t.Errorf("Size gave %v%v %v", v.DType, v.Shape, v.Const)
	}
}

func TestConstantShapes(t *testing.T) {
	none := func(*tgraph) []*Value { return nil }
	runOpCases(t, []opCase{
		{name: "value", typ: "Constant", ins: none, attrs: []Attr{attrT("value", TensorFromInt64s(Int32, Shape{2, 2}, []int64{1, 2, 3, 4}))},
			want: []Shape{shp(2, 2)}, wantDT: []DType{Int32}},
		{name: "value_float", typ: "Constant", ins: none, attrs: []Attr{attrF("value_float", 1.5)}, want: []Shape{shp()}, wantDT: []DType{Float}},
		{name: "value_floats", typ: "Constant", ins: none, attrs: []Attr{{Name: "value_floats", Type: AttrFloats, Floats: []float32{1, 2, 3}}},
			want: []Shape{shp(3)}, wantDT: []DType{Float}},
		{name: "value_int", typ: "Constant", ins: none, attrs: []Attr{attrI("value_int", 7)}, want: []Shape{shp()}, wantDT: []DType{Int64}},
		{name: "value_ints", typ: "Constant", ins: none, attrs: []Attr{attrIs("value_ints", 1, 2)}, want: []Shape{shp(2)}, wantDT: []DType{Int64}},
		{name: "value_string", typ: "Constant", ins: none, attrs: []Attr{attrS("value_string", "hi")}, want: []Shape{shp()}, wantDT: []DType{String}},
		{name: "value_strings", typ: "Constant", ins: none, attrs: []Attr{{Name: "value_strings", Type: AttrStrings, Strings: []string{"a", "b"}}},
			want: []Shape{shp(2)}, wantDT: []DType{String}},
		{name: "err_sparse", typ: "Constant", ins: none, attrs: []Attr{{Name: "sparse_value", Type: AttrSparseTensor}}, err: "sparse"},
		{name: "err_two", typ: "Constant", ins: none, attrs: []Attr{attrI("value_int", 7), attrF("value_float", 1)}, err: "exactly one"},
		{name: "err_none", typ: "Constant", ins: none, err: "exactly one"},
		{name: "err_nil_tensor", typ: "Constant", ins: none, attrs: []Attr{{Name: "value", Type: AttrTensor}}, err: "no tensor data"},
		{name: "err_short_raw", typ: "Constant", ins: none, attrs: []Attr{attrT("value", &Tensor{DType: Float, Shape: Shape{4}, Raw: make([]byte, 8)})},
			err: "do not match"},

		{name: "cos_default", typ: "ConstantOfShape", ins: func(b *tgraph) []*Value { return []*Value{b.ints(2, 3)} },
			want: []Shape{shp(2, 3)}, wantDT: []DType{Float}},
		{name: "cos_int", typ: "ConstantOfShape", ins: func(b *tgraph) []*Value { return []*Value{b.ints(4)} },
			attrs: []Attr{attrT("value", TensorFromInt64s(Int64, Shape{1}, []int64{7}))}, want: []Shape{shp(4)}, wantDT: []DType{Int64}},
		{name: "cos_scalar", typ: "ConstantOfShape", ins: func(b *tgraph) []*Value { return []*Value{b.ints()} },
			want: []Shape{shp()}},
		{name: "cos_err_nonconst", typ: "ConstantOfShape", ins: func(b *tgraph) []*Value { return []*Value{b.in(Int64, 2)} },
			err: "not a compile-time constant"},
		{name: "cos_err_value", typ: "ConstantOfShape", ins: func(b *tgraph) []*Value { return []*Value{b.ints(2)} },
			attrs: []Attr{attrT("value", TensorFromInt64s(Int64, Shape{2}, []int64{7, 8}))}, err: "one-element"},
		{name: "cos_err_negative", typ: "ConstantOfShape", ins: func(b *tgraph) []*Value { return []*Value{b.ints(2, -1)} },
			err: "negative"},

		{name: "cast", typ: "Cast", ins: fIns(shp(2, 3)), attrs: []Attr{attrI("to", int64(Float16))}, want: []Shape{shp(2, 3)}, wantDT: []DType{Float16}},
		{name: "cast_saturate_opset19", opset: 19, typ: "Cast", ins: fIns(shp(2)),
			attrs: []Attr{attrI("to", int64(Float8E4M3FN)), attrI("saturate", 0)}, want: []Shape{shp(2)}, wantDT: []DType{Float8E4M3FN}},
		{name: "cast_err_to", typ: "Cast", ins: fIns(shp(2)), attrs: []Attr{attrI("to", 99)}, err: "attribute to is 99"},
		{name: "cast_err_missing", typ: "Cast", ins: fIns(shp(2)), err: "to is required"},
		{name: "castlike", typ: "CastLike", ins: func(b *tgraph) []*Value { return []*Value{b.f32(2, 3), b.in(Int32)} },
			want: []Shape{shp(2, 3)}, wantDT: []DType{Int32}},

		{name: "range_err_nonconst", typ: "Range", ins: func(b *tgraph) []*Value { return []*Value{b.i64(0), b.in(Int64), b.i64(1)} },
			err: "input 1 (\"x2\") (limit) is not a compile-time constant"},
		{name: "range_err_delta0", typ: "Range", ins: func(b *tgraph) []*Value { return []*Value{b.i64(0), b.i64(5), b.i64(0)} },
			err: "delta) is 0"},
		{name: "range_err_types", typ: "Range", ins: func(b *tgraph) []*Value { return []*Value{b.i64(0), b.fconst(Shape{}, 5), b.i64(1)} },
			err: "must match"},
		{name: "range_err_shape", typ: "Range", ins: func(b *tgraph) []*Value { return []*Value{b.i64(0), b.ints(5, 6), b.i64(1)} },
			err: "want a scalar"},
	})
}

func TestConstFolds(t *testing.T) {
	b := newTG(t, 17)
	v := b.must("Constant", nil, attrIs("value_ints", 3, 4))
	if got := foldedInts(t, v); !sameInts(got, []int64{3, 4}) {
		t.Errorf("Constant folded to %v", got)
	}
	v = b.must("ConstantOfShape", []*Value{b.ints(2, 2)}, attrT("value", TensorFromInt64s(Int32, Shape{1}, []int64{-3})))
	if got := foldedInts(t, v); v.DType != Int32 || !sameInts(got, []int64{-3, -3, -3, -3}) {
		t.Errorf("ConstantOfShape folded to %v %v", v.DType, got)
	}
	v = b.must("ConstantOfShape", []*Value{b.ints(3)})
	if got := foldedFloats(t, v); !closeFloats(got, []float64{0, 0, 0}) {
		t.Errorf("ConstantOfShape default folded to %v", got)
	}

	// Cast folds.
	iv := b.init(TensorFromInt64s(Int64, Shape{3}, []int64{1, 0, -2}))
	v = b.must("Cast", []*Value{iv}, attrI("to", int64(Float)))
	if got := foldedFloats(t, v); v.DType != Float || !closeFloats(got, []float64{1, 0, -2}) {
		t.Errorf("Cast to float folded to %v %v", v.DType, got)
	}
	fv := b.fconst(Shape{3}, 1.7, -1.7, 0)
	v = b.must("Cast", []*Value{fv}, attrI("to", int64(Int64)))
	if got := foldedInts(t, v); !sameInts(got, []int64{1, -1, 0}) {
		t.Errorf("Cast to int64 folded to %v", got)
	}
	v = b.must("Cast", []*Value{fv}, attrI("to", int64(Bool)))
	if got := foldedInts(t, v); v.DType != Bool || !sameInts(got, []int64{1, 1, 0}) {
		t.Errorf("Cast to bool folded to %v %v", v.DType, got)
	}
	v = b.must("Cast", []*Value{iv}, attrI("to", int64(Uint8)))
	if got := foldedInts(t, v); !sameInts(got, []int64{1, 0, 254}) {
		t.Errorf("Cast to uint8 folded to %v", got)
	}
	v = b.must("CastLike", []*Value{iv, b.in(Int32)})
	if got := foldedInts(t, v); v.DType != Int32 || !sameInts(got, []int64{1, 0, -2}) {
		t.Errorf("CastLike folded to %v %v", v.DType, got)
	}
	// A float16 constant is not decoded: Cast keeps only the shape.
	h := b.init(&Tensor{DType: Float16, Shape: Shape{1}, Raw: []byte{0x00, 0x3c}})
	if v = b.must("Cast", []*Value{h}, attrI("to", int64(Float))); v.Const != nil || !v.Shape.Equal(shp(1)) {
		t.Errorf("Cast of float16 gave %v const %v", v.Shape, v.Const)
	}
	// Same-type Cast copies any dtype.
	if v = b.must("Cast", []*Value{h}, attrI("to", int64(Float16))); v.Const == nil || string(v.Const.Raw) != "\x00\x3c" {
		t.Errorf("identity Cast of float16 gave const %v", v.Const)
	}

	// Range.
	rng := func(dt DType, s, l, d float64) *Value {
		mk := func(x float64) *Value { return b.init(TensorFromFloat64s(dt, Shape{}, []float64{x})) }
		return b.must("Range", []*Value{mk(s), mk(l), mk(d)})
	}
	if v = rng(Int64, 0, 10, 3); !sameInts(foldedInts(t, v), []int64{0, 3, 6, 9}) || v.DType != Int64 {
		t.Errorf("Range(0,10,3) gave %v %v", v.DType, v.Const)
	}
	if v = rng(Int32, 10, 0, -3); !sameInts(foldedInts(t, v), []int64{10, 7, 4, 1}) || v.DType != Int32 {
		t.Errorf("Range(10,0,-3) gave %v %v", v.DType, v.Const)
	}
	if v = rng(Int64, 5, 0, 1); !v.Shape.Equal(shp(0)) {
		t.Errorf("empty Range gave shape %v", v.Shape)
	}
	if v = rng(Float, 1, 2, 0.25); !closeFloats(foldedFloats(t, v), []float64{1, 1.25, 1.5, 1.75}) {
		t.Errorf("float Range gave %v", v.Const)
	}
	if v = rng(Int64, 0, 100000, 1); !v.Shape.Equal(shp(100000)) || v.Const != nil {
		t.Errorf("big Range gave %v (const %v): shape only, too big to fold", v.Shape, v.Const != nil)
	}
}

func TestRangeOverflow(t *testing.T) {
	b := newTG(t, 17)
	_, err := b.op("Range", []*Value{b.i64(math.MinInt64 + 1), b.i64(math.MaxInt64), b.i64(1)}, 1)
	if err == nil || !strings.Contains(err.Error(), "overflow") {
		t.Errorf("want overflow error, got %v", err)
	}
}
