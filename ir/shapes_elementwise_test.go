package ir

import "testing"

func TestElementwiseShapes(t *testing.T) {
	bools := func(shapes ...Shape) func(b *tgraph) []*Value {
		return func(b *tgraph) []*Value {
			out := make([]*Value, len(shapes))
			for i, s := range shapes {
				out[i] = b.in(Bool, s...)
			}
			return out
		}
	}
	runOpCases(t, []opCase{
		{name: "add_broadcast", typ: "Add", ins: fIns(shp(2, 1, 4), shp(3, 1)), want: []Shape{shp(2, 3, 4)}},
		{name: "add_err_broadcast", typ: "Add", ins: fIns(shp(2, 3), shp(4)), err: "cannot be broadcast"},
		{name: "equal_bool_out", typ: "Equal", ins: fIns(shp(2, 3), shp(3)), want: []Shape{shp(2, 3)}, wantDT: []DType{Bool}},
		{name: "not", typ: "Not", ins: bools(shp(2, 3)), want: []Shape{shp(2, 3)}, wantDT: []DType{Bool}},
		{name: "not_err_type", typ: "Not", ins: fIns(shp(2)), err: "Not takes bool"},
		{name: "and", typ: "And", ins: bools(shp(2, 1), shp(3)), want: []Shape{shp(2, 3)}, wantDT: []DType{Bool}},
		{name: "or", typ: "Or", ins: bools(shp(4), shp()), want: []Shape{shp(4)}, wantDT: []DType{Bool}},
		{name: "xor", typ: "Xor", ins: bools(shp(4), shp(4)), want: []Shape{shp(4)}},
		{name: "and_err_type", typ: "And", ins: fIns(shp(2), shp(2)), err: "And takes bool"},
		{name: "max_variadic", typ: "Max", ins: fIns(shp(2, 1), shp(3), shp(1, 1)), want: []Shape{shp(2, 3)}},
		{name: "min_single", typ: "Min", ins: fIns(shp(5)), want: []Shape{shp(5)}},
		{name: "sum4", typ: "Sum", ins: fIns(shp(2, 3), shp(3), shp(2, 1), shp()), want: []Shape{shp(2, 3)}},
		{name: "mean", typ: "Mean", ins: fIns(shp(4, 1), shp(1, 5)), want: []Shape{shp(4, 5)}},
		{name: "sum_err_types", typ: "Sum", ins: func(b *tgraph) []*Value { return []*Value{b.f32(2), b.in(Int64, 2)} }, err: "input types differ"},
		{name: "mod_int", typ: "Mod", ins: func(b *tgraph) []*Value { return []*Value{b.in(Int64, 2, 3), b.in(Int64, 3)} }, want: []Shape{shp(2, 3)}},
		{name: "mod_float_fmod", typ: "Mod", ins: fIns(shp(3), shp(3)), attrs: []Attr{attrI("fmod", 1)}, want: []Shape{shp(3)}},
		{name: "mod_err_float", typ: "Mod", ins: fIns(shp(3), shp(3)), err: "fmod=1"},
		{name: "pow_mixed", typ: "Pow", ins: func(b *tgraph) []*Value { return []*Value{b.f32(2, 3), b.in(Int64)} }, want: []Shape{shp(2, 3)}, wantDT: []DType{Float}},

		{name: "clip_inputs", opset: 13, typ: "Clip", ins: func(b *tgraph) []*Value { return []*Value{b.f32(2, 3), b.fconst(Shape{}, 0), b.fconst(Shape{}, 6)} },
			want: []Shape{shp(2, 3)}},
		{name: "clip_max_only", opset: 13, typ: "Clip", ins: func(b *tgraph) []*Value { return []*Value{b.f32(2, 3), nil, b.fconst(Shape{}, 6)} },
			want: []Shape{shp(2, 3)}},
		{name: "clip_legacy_attrs", opset: 11, typ: "Clip", ins: fIns(shp(2, 3)), attrs: []Attr{attrF("min", 0), attrF("max", 6)}, want: []Shape{shp(2, 3)}},
		{name: "clip_err_bound_shape", opset: 13, typ: "Clip", ins: fIns(shp(2, 3), shp(3)), err: "must be scalars"},
		{name: "clip_err_bound_type", opset: 13, typ: "Clip", ins: func(b *tgraph) []*Value { return []*Value{b.f32(2, 3), b.i64(0)} }, err: "must match"},

		{name: "softplus", typ: "Softplus", ins: fIns(shp(2, 3)), want: []Shape{shp(2, 3)}},
		{name: "hardsigmoid", typ: "HardSigmoid", ins: fIns(shp(2, 3)), attrs: []Attr{attrF("alpha", 0.2), attrF("beta", 0.5)}, want: []Shape{shp(2, 3)}},
		{name: "hardswish", opset: 14, typ: "HardSwish", ins: fIns(shp(2, 3)), want: []Shape{shp(2, 3)}},
		{name: "neg", typ: "Neg", ins: fIns(shp(7)), want: []Shape{shp(7)}},
		{name: "isinf", typ: "IsInf", ins: fIns(shp(7)), attrs: []Attr{attrI("detect_negative", 0)}, want: []Shape{shp(7)}, wantDT: []DType{Bool}},
		{name: "prelu", typ: "PRelu", ins: fIns(shp(2, 8, 4, 4), shp(8, 1, 1)), want: []Shape{shp(2, 8, 4, 4)}},
		{name: "prelu_err", typ: "PRelu", ins: fIns(shp(2, 8, 4, 4), shp(2, 8, 4, 4, 1)), err: "does not broadcast"},
		{name: "hardsigmoid_err_attr", typ: "HardSigmoid", ins: fIns(shp(2)), attrs: []Attr{attrI("alpha", 1)}, err: "attribute \"alpha\" is int, want float"},
	})
}

func TestElementwiseFolds(t *testing.T) {
	b := newTG(t, 13)
	i64s := func(v ...int64) *Value { return b.ints(v...) }
	bools := func(v ...int64) *Value { return b.init(TensorFromInt64s(Bool, Shape{int64(len(v))}, v)) }

	if got := foldedInts(t, b.must("Not", []*Value{bools(1, 0)})); !sameInts(got, []int64{0, 1}) {
		t.Errorf("Not folded to %v", got)
	}
	if got := foldedInts(t, b.must("And", []*Value{bools(1, 1, 0), bools(1, 0, 0)})); !sameInts(got, []int64{1, 0, 0}) {
		t.Errorf("And folded to %v", got)
	}
	if got := foldedInts(t, b.must("Or", []*Value{bools(1, 0, 0), bools(0, 0, 1)})); !sameInts(got, []int64{1, 0, 1}) {
		t.Errorf("Or folded to %v", got)
	}
	if got := foldedInts(t, b.must("Xor", []*Value{bools(1, 0, 1), bools(1, 0, 0)})); !sameInts(got, []int64{0, 0, 1}) {
		t.Errorf("Xor folded to %v", got)
	}
	if got := foldedInts(t, b.must("Max", []*Value{i64s(1, 5, 3), b.i64(2), i64s(0, 0, 4)})); !sameInts(got, []int64{2, 5, 4}) {
		t.Errorf("Max folded to %v", got)
	}
	if got := foldedInts(t, b.must("Min", []*Value{i64s(1, 5, 3), b.i64(2)})); !sameInts(got, []int64{1, 2, 2}) {
		t.Errorf("Min folded to %v", got)
	}
	if got := foldedInts(t, b.must("Sum", []*Value{i64s(1, 2), i64s(10, 20), b.i64(100)})); !sameInts(got, []int64{111, 122}) {
		t.Errorf("Sum folded to %v", got)
	}
	if got := foldedFloats(t, b.must("Mean", []*Value{b.fconst(Shape{2}, 1, 2), b.fconst(Shape{2}, 2, 5)})); !closeFloats(got, []float64{1.5, 3.5}) {
		t.Errorf("Mean folded to %v", got)
	}
	// Mod: fmod=0 takes the divisor's sign, fmod=1 the dividend's.
	if got := foldedInts(t, b.must("Mod", []*Value{i64s(-7, 7, 7, -7), i64s(3, -3, 3, -3)})); !sameInts(got, []int64{2, -2, 1, -1}) {
		t.Errorf("Mod folded to %v", got)
	}
	if got := foldedInts(t, b.must("Mod", []*Value{i64s(-7, 7), i64s(3, -3)}, attrI("fmod", 1))); !sameInts(got, []int64{-1, 1}) {
		t.Errorf("Mod fmod=1 folded to %v", got)
	}
	if got := foldedFloats(t, b.must("Mod", []*Value{b.fconst(Shape{1}, -7.5), b.fconst(Shape{}, 2)}, attrI("fmod", 1))); !closeFloats(got, []float64{-1.5}) {
		t.Errorf("float Mod folded to %v", got)
	}
	if _, err := b.op("Mod", []*Value{i64s(1), i64s(0)}, 1); err == nil {
		t.Errorf("Mod by zero folded without error")
	}
	if got := foldedInts(t, b.must("Equal", []*Value{i64s(1, 2, 3), b.i64(2)})); !sameInts(got, []int64{0, 1, 0}) {
		t.Errorf("Equal folded to %v", got)
	}
	if got := foldedInts(t, b.must("Neg", []*Value{i64s(1, -2)})); !sameInts(got, []int64{-1, 2}) {
		t.Errorf("Neg folded to %v", got)
	}
	if got := foldedInts(t, b.must("Clip", []*Value{i64s(-5, 3, 9), b.i64(0), b.i64(6)})); !sameInts(got, []int64{0, 3, 6}) {
		t.Errorf("Clip folded to %v", got)
	}
	if got := foldedFloats(t, b.must("Clip", []*Value{b.fconst(Shape{3}, -1, 0.5, 7), nil, b.fconst(Shape{}, 6)})); !closeFloats(got, []float64{-1, 0.5, 6}) {
		t.Errorf("Clip (max only) folded to %v", got)
	}
	if got := foldedFloats(t, b.must("Pow", []*Value{b.fconst(Shape{2}, 2, 3), b.i64(2)})); !closeFloats(got, []float64{4, 9}) {
		t.Errorf("Pow folded to %v", got)
	}
	// A float16 constant passes through Identity byte for byte (it used to
	// be decoded through float64 and came out as zeros).
	h := b.init(&Tensor{DType: Float16, Shape: Shape{2}, Raw: []byte{0x00, 0x3c, 0x00, 0xc0}})
	if v := b.must("Identity", []*Value{h}); v.Const == nil || string(v.Const.Raw) != "\x00\x3c\x00\xc0" {
		t.Errorf("Identity of float16 folded to %v", v.Const)
	}
	if v := b.must("Neg", []*Value{h}); v.Const != nil {
		t.Errorf("Neg of float16 was folded (float16 arithmetic is not supported): %v", v.Const)
	}
	if v := b.must("Add", []*Value{h, h}); v.Const != nil {
		t.Errorf("Add of float16 was folded: %v", v.Const)
	}
}
