package ir

import (
	"math"
	"strings"
	"testing"
)

func TestConcatSplitShapes(t *testing.T) {
	runOpCases(t, []opCase{
		{name: "concat", typ: "Concat", ins: fIns(shp(2, 3), shp(2, 5), shp(2, 1)), attrs: []Attr{attrI("axis", 1)}, want: []Shape{shp(2, 9)}},
		{name: "concat_neg_axis", typ: "Concat", ins: fIns(shp(2, 3, 4), shp(2, 3, 1)), attrs: []Attr{attrI("axis", -1)}, want: []Shape{shp(2, 3, 5)}},
		{name: "concat_empty_input", typ: "Concat", ins: fIns(shp(0, 3), shp(2, 3)), attrs: []Attr{attrI("axis", 0)}, want: []Shape{shp(2, 3)}},
		{name: "concat_err_rank", typ: "Concat", ins: fIns(shp(2, 3), shp(2, 3, 1)), attrs: []Attr{attrI("axis", 1)}, err: "equal ranks"},
		{name: "concat_err_dims", typ: "Concat", ins: fIns(shp(2, 3), shp(3, 3)), attrs: []Attr{attrI("axis", 1)}, err: "only on axis 1"},
		{name: "concat_err_no_axis", typ: "Concat", ins: fIns(shp(2, 3), shp(2, 3)), err: "axis is required"},
		{name: "concat_err_axis", typ: "Concat", ins: fIns(shp(2, 3), shp(2, 3)), attrs: []Attr{attrI("axis", 2)}, err: "out of range"},
		{name: "concat_err_dtype", typ: "Concat", ins: func(b *tgraph) []*Value { return []*Value{b.f32(2), b.in(Int64, 2)} },
			attrs: []Attr{attrI("axis", 0)}, err: "has type i64"},

		{name: "split_attr_opset11", opset: 11, typ: "Split", ins: fIns(shp(4, 10)),
			attrs: []Attr{attrI("axis", 1), attrIs("split", 2, 3, 5)}, want: []Shape{shp(4, 2), shp(4, 3), shp(4, 5)}},
		{name: "split_input_opset13", opset: 13, typ: "Split", ins: func(b *tgraph) []*Value { return []*Value{b.f32(4, 10), b.ints(4, 6)} },
			attrs: []Attr{attrI("axis", -1)}, want: []Shape{shp(4, 4), shp(4, 6)}},
		{name: "split_equal", opset: 13, typ: "Split", ins: fIns(shp(4, 10)), attrs: []Attr{attrI("axis", 1)}, want: []Shape{shp(4, 5), shp(4, 5)}},
		{name: "split_num_outputs_uneven", opset: 18, typ: "Split", ins: fIns(shp(2, 8)),
			attrs: []Attr{attrI("axis", 1), attrI("num_outputs", 3)}, want: []Shape{shp(2, 3), shp(2, 3), shp(2, 2)}},
		{name: "split_uneven_opset18_default", opset: 18, typ: "Split", ins: fIns(shp(7)),
			want: []Shape{shp(4), shp(3)}},
		{name: "split_err_uneven_opset17", opset: 17, typ: "Split", ins: fIns(shp(2, 8)), nout: 3,
			attrs: []Attr{attrI("axis", 1)}, err: "does not split evenly into 3 outputs"},
		{name: "split_err_sum", opset: 11, typ: "Split", ins: fIns(shp(5)), nout: 2,
			attrs: []Attr{attrIs("split", 2, 2)}, err: "sum to 4"},
		{name: "split_err_count", opset: 11, typ: "Split", ins: fIns(shp(5)), nout: 3,
			attrs: []Attr{attrIs("split", 2, 3)}, err: "the node has 3 outputs"},
		{name: "split_err_num_outputs", opset: 18, typ: "Split", ins: fIns(shp(6)), nout: 2,
			attrs: []Attr{attrI("num_outputs", 3)}, err: "num_outputs is 3"},
		{name: "split_err_num_outputs_too_many", opset: 18, typ: "Split", ins: fIns(shp(5)), nout: 4,
			attrs: []Attr{attrI("num_outputs", 4)}, err: "negative size"},
		{name: "split_err_nonconst", opset: 13, typ: "Split", ins: func(b *tgraph) []*Value { return []*Value{b.f32(4, 10), b.in(Int64, 2)} },
			nout: 2, err: "not a compile-time constant"},
	})
}

func TestSplitFold(t *testing.T) {
	b := newTG(t, 13)
	x := b.init(TensorFromInt64s(Int64, Shape{2, 3}, []int64{0, 1, 2, 3, 4, 5}))
	op, err := b.op("Split", []*Value{x, b.ints(1, 2)}, 2, attrI("axis", 1))
	if err != nil {
		t.Fatal(err)
	}
	if got := foldedInts(t, op.Output(0)); !sameInts(got, []int64{0, 3}) {
		t.Errorf("first part %v", got)
	}
	if got := foldedInts(t, op.Output(1)); !sameInts(got, []int64{1, 2, 4, 5}) {
		t.Errorf("second part %v", got)
	}
}

func TestConcatFold(t *testing.T) {
	b := newTG(t, 17)
	a := b.init(TensorFromInt64s(Int64, Shape{2, 2}, []int64{1, 2, 3, 4}))
	c := b.init(TensorFromInt64s(Int64, Shape{2, 1}, []int64{5, 6}))
	v := b.must("Concat", []*Value{a, c}, attrI("axis", 1))
	if got := foldedInts(t, v); !sameInts(got, []int64{1, 2, 5, 3, 4, 6}) || !v.Shape.Equal(shp(2, 3)) {
		t.Errorf("folded %v%v", v.Shape, got)
	}
	// float16 constants fold by moving bytes, not through float64.
	h := b.init(&Tensor{DType: Float16, Shape: Shape{2}, Raw: []byte{0x00, 0x3c, 0x00, 0x40}}) // 1.0, 2.0
	v = b.must("Concat", []*Value{h, h}, attrI("axis", 0))
	if v.Const == nil || string(v.Const.Raw) != string([]byte{0x00, 0x3c, 0x00, 0x40, 0x00, 0x3c, 0x00, 0x40}) {
		t.Errorf("float16 concat folded to %v", v.Const)
	}
}

func TestSliceShapes(t *testing.T) {
	sl := func(data Shape, starts, ends, axes, steps []int64) func(b *tgraph) []*Value {
		return func(b *tgraph) []*Value {
			ins := []*Value{b.f32(data...), b.ints(starts...), b.ints(ends...)}
			if axes != nil {
				ins = append(ins, b.ints(axes...))
			}
			if steps != nil {
				if axes == nil {
					ins = append(ins, nil)
				}
				ins = append(ins, b.ints(steps...))
			}
			return ins
		}
	}
	i64 := func(v ...int64) []int64 { return v }
	runOpCases(t, []opCase{
		{name: "neg_and_clamped", typ: "Slice", ins: sl(shp(10, 20, 30), i64(1, -5), i64(8, 1000), i64(0, 2), nil), want: []Shape{shp(7, 20, 5)}},
		{name: "default_axes", typ: "Slice", ins: sl(shp(10, 20), i64(2, 3), i64(4, 20), nil, nil), want: []Shape{shp(2, 17)}},
		{name: "steps", typ: "Slice", ins: sl(shp(10, 20), i64(0), i64(10), i64(1), i64(3)), want: []Shape{shp(10, 4)}},
		{name: "steps_no_axes", typ: "Slice", ins: sl(shp(10, 20), i64(1), i64(10), nil, i64(2)), want: []Shape{shp(5, 20)}},
		{name: "neg_step_reverse", typ: "Slice", ins: sl(shp(10), i64(-1), i64(math.MinInt64), i64(0), i64(-1)), want: []Shape{shp(10)}},
		{name: "neg_step_2", typ: "Slice", ins: sl(shp(10), i64(8), i64(1), i64(0), i64(-2)), want: []Shape{shp(4)}},
		{name: "neg_axis", typ: "Slice", ins: sl(shp(4, 6), i64(1), i64(math.MaxInt64), i64(-1), nil), want: []Shape{shp(4, 5)}},
		{name: "empty", typ: "Slice", ins: sl(shp(10), i64(5), i64(2), nil, nil), want: []Shape{shp(0)}},
		{name: "start_past_end", typ: "Slice", ins: sl(shp(10), i64(100), i64(200), nil, nil), want: []Shape{shp(0)}},
		{name: "neg_step_empty_dim", typ: "Slice", ins: sl(shp(0, 3), i64(-1), i64(math.MinInt64), i64(0), i64(-1)), want: []Shape{shp(0, 3)}},
		{name: "legacy_attrs", opset: 11, typ: "Slice", ins: fIns(shp(10, 20)),
			attrs: []Attr{attrIs("starts", 0, 5), attrIs("ends", 3, -1), attrIs("axes", 0, 1)}, want: []Shape{shp(3, 14)}},
		{name: "err_nonconst", typ: "Slice", ins: func(b *tgraph) []*Value {
			return []*Value{b.f32(10), b.in(Int64, 1), b.ints(5)}
		}, err: "input 1 (\"x2\") (starts) is not a compile-time constant"},
		{name: "err_step0", typ: "Slice", ins: sl(shp(10), i64(0), i64(5), i64(0), i64(0)), err: "steps has 0"},
		{name: "err_repeated_axes", typ: "Slice", ins: sl(shp(10, 10), i64(0, 0), i64(5, 5), i64(1, -1), nil), err: "repeats"},
		{name: "err_axis_range", typ: "Slice", ins: sl(shp(10, 10), i64(0), i64(5), i64(2), nil), err: "out of range"},
		{name: "err_lengths", typ: "Slice", ins: sl(shp(10, 10), i64(0, 1), i64(5), nil, nil), err: "must match"},
		{name: "err_two_inputs", typ: "Slice", ins: func(b *tgraph) []*Value { return []*Value{b.f32(10), b.ints(1)} }, err: "Slice takes"},
	})
}

func TestSliceFold(t *testing.T) {
	b := newTG(t, 17)
	x := b.init(TensorFromInt64s(Int64, Shape{5}, []int64{10, 11, 12, 13, 14}))
	v := b.must("Slice", []*Value{x, b.ints(-1), b.ints(math.MinInt64), b.ints(0), b.ints(-2)})
	if got := foldedInts(t, v); !sameInts(got, []int64{14, 12, 10}) {
		t.Errorf("reverse slice folded to %v", got)
	}
	m := b.init(TensorFromInt64s(Int64, Shape{3, 4}, []int64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}))
	v = b.must("Slice", []*Value{m, b.ints(1, 1), b.ints(3, 100), b.ints(0, 1), b.ints(1, 2)})
	if got := foldedInts(t, v); !sameInts(got, []int64{5, 7, 9, 11}) || !v.Shape.Equal(shp(2, 2)) {
		t.Errorf("2-D slice folded to %v%v", v.Shape, got)
	}
}

func TestPadShapes(t *testing.T) {
	runOpCases(t, []opCase{
		{name: "pads_input", opset: 13, typ: "Pad", ins: func(b *tgraph) []*Value {
			return []*Value{b.f32(1, 3, 4, 4), b.ints(0, 0, 1, 1, 0, 0, 1, 1)}
		}, want: []Shape{shp(1, 3, 6, 6)}},
		{name: "reflect_constant_value", opset: 13, typ: "Pad", ins: func(b *tgraph) []*Value {
			return []*Value{b.f32(2, 4), b.ints(0, 1, 0, 2), b.fconst(Shape{}, 0)}
		}, attrs: []Attr{attrS("mode", "reflect")}, want: []Shape{shp(2, 7)}},
		{name: "negative_crop", opset: 13, typ: "Pad", ins: func(b *tgraph) []*Value {
			return []*Value{b.f32(4, 4), b.ints(0, -1, 0, -1)}
		}, want: []Shape{shp(4, 2)}},
		{name: "axes_opset18", opset: 18, typ: "Pad", ins: func(b *tgraph) []*Value {
			return []*Value{b.f32(2, 5), b.ints(2, 3), nil, b.ints(-1)}
		}, want: []Shape{shp(2, 10)}},
		{name: "wrap_opset19", opset: 19, typ: "Pad", ins: func(b *tgraph) []*Value {
			return []*Value{b.f32(2, 5), b.ints(1, 1, 1, 1)}
		}, attrs: []Attr{attrS("mode", "wrap")}, want: []Shape{shp(4, 7)}},
		{name: "legacy_attr", opset: 11, typ: "Pad", ins: fIns(shp(2, 5)),
			attrs: []Attr{attrIs("pads", 1, 0, 1, 0), attrF("value", 1), attrS("mode", "edge")}, want: []Shape{shp(4, 5)}},
		{name: "err_len", opset: 13, typ: "Pad", ins: func(b *tgraph) []*Value { return []*Value{b.f32(2, 5), b.ints(1, 1)} },
			err: "pads has 2 values, want 4"},
		{name: "err_mode", opset: 13, typ: "Pad", ins: func(b *tgraph) []*Value { return []*Value{b.f32(2, 5), b.ints(1, 1, 1, 1)} },
			attrs: []Attr{attrS("mode", "symmetric")}, err: "mode"},
		{name: "err_too_negative", opset: 13, typ: "Pad", ins: func(b *tgraph) []*Value { return []*Value{b.f32(2, 5), b.ints(0, -3, 0, -3)} },
			err: "negative"},
		{name: "err_nonconst", opset: 13, typ: "Pad", ins: func(b *tgraph) []*Value { return []*Value{b.f32(2, 5), b.in(Int64, 4)} },
			err: "not a compile-time constant"},
		{name: "err_value_dtype", opset: 13, typ: "Pad", ins: func(b *tgraph) []*Value {
			return []*Value{b.f32(2, 5), b.ints(1, 1, 1, 1), b.i64(0)}
		}, err: "constant_value"},
	})
}

func TestReshapeFamilyShapes(t *testing.T) {
	rs := func(data Shape, shape ...int64) func(b *tgraph) []*Value {
		return func(b *tgraph) []*Value { return []*Value{b.f32(data...), b.ints(shape...)} }
	}
	runOpCases(t, []opCase{
		{name: "reshape_copy_and_infer", typ: "Reshape", ins: rs(shp(2, 3, 4), 0, -1), want: []Shape{shp(2, 12)}},
		{name: "reshape_flat", typ: "Reshape", ins: rs(shp(2, 3, 4), -1), want: []Shape{shp(24)}},
		{name: "reshape_copy_middle", typ: "Reshape", ins: rs(shp(2, 3, 4), 4, 0, 2), want: []Shape{shp(4, 3, 2)}},
		{name: "reshape_heads", typ: "Reshape", ins: rs(shp(8, 128, 768), 8, 128, 12, 64), want: []Shape{shp(8, 128, 12, 64)}},
		{name: "reshape_to_scalar", typ: "Reshape", ins: rs(shp(1, 1)), want: []Shape{shp()}},
		{name: "reshape_allowzero", opset: 14, typ: "Reshape", ins: rs(shp(0, 3), 0, 3), attrs: []Attr{attrI("allowzero", 1)}, want: []Shape{shp(0, 3)}},
		{name: "reshape_err_allowzero_infer", opset: 14, typ: "Reshape", ins: rs(shp(0, 3), 0, -1), attrs: []Attr{attrI("allowzero", 1)}, err: "both 0 and -1"},
		{name: "reshape_err_two_infer", typ: "Reshape", ins: rs(shp(2, 3, 4), -1, -1), err: "more than one -1"},
		{name: "reshape_err_count", typ: "Reshape", ins: rs(shp(2, 3, 4), 5, 5), err: "(24 elements) to [5,5] (25 elements)"},
		{name: "reshape_err_infer", typ: "Reshape", ins: rs(shp(2, 3, 4), 5, -1), err: "cannot be inferred"},
		{name: "reshape_err_copy_rank", typ: "Reshape", ins: rs(shp(24), 4, 0), err: "copies dimension 1"},
		{name: "reshape_err_negative", typ: "Reshape", ins: rs(shp(24), -2, 12), err: "invalid dimension -2"},
		{name: "reshape_err_nonconst", typ: "Reshape", ins: func(b *tgraph) []*Value { return []*Value{b.f32(2, 3), b.in(Int64, 2)} },
			err: "input 1 (\"x2\") (target shape) is not a compile-time constant"},

		{name: "flatten_axis2", typ: "Flatten", ins: fIns(shp(2, 3, 4, 5)), attrs: []Attr{attrI("axis", 2)}, want: []Shape{shp(6, 20)}},
		{name: "flatten_default", typ: "Flatten", ins: fIns(shp(2, 3, 4, 5)), want: []Shape{shp(2, 60)}},
		{name: "flatten_axis0", typ: "Flatten", ins: fIns(shp(2, 3, 4, 5)), attrs: []Attr{attrI("axis", 0)}, want: []Shape{shp(1, 120)}},
		{name: "flatten_axis_rank", typ: "Flatten", ins: fIns(shp(2, 3, 4, 5)), attrs: []Attr{attrI("axis", 4)}, want: []Shape{shp(120, 1)}},
		{name: "flatten_neg", typ: "Flatten", ins: fIns(shp(2, 3, 4, 5)), attrs: []Attr{attrI("axis", -1)}, want: []Shape{shp(24, 5)}},
		{name: "flatten_err", typ: "Flatten", ins: fIns(shp(2, 3)), attrs: []Attr{attrI("axis", 3)}, err: "out of range"},

		{name: "transpose_default", typ: "Transpose", ins: fIns(shp(2, 3, 4)), want: []Shape{shp(4, 3, 2)}},
		{name: "transpose_perm", typ: "Transpose", ins: fIns(shp(8, 128, 12, 64)), attrs: []Attr{attrIs("perm", 0, 2, 1, 3)}, want: []Shape{shp(8, 12, 128, 64)}},
		{name: "transpose_err_perm", typ: "Transpose", ins: fIns(shp(2, 3, 4)), attrs: []Attr{attrIs("perm", 0, 0, 1)}, err: "not a permutation"},
		{name: "transpose_err_len", typ: "Transpose", ins: fIns(shp(2, 3, 4)), attrs: []Attr{attrIs("perm", 1, 0)}, err: "has 2 values"},

		{name: "squeeze_attr_opset11", opset: 11, typ: "Squeeze", ins: fIns(shp(1, 3, 1, 5)), attrs: []Attr{attrIs("axes", 0, 2)}, want: []Shape{shp(3, 5)}},
		{name: "squeeze_input_opset13", opset: 13, typ: "Squeeze", ins: rs(shp(1, 3, 1, 5), -2), want: []Shape{shp(1, 3, 5)}},
		{name: "squeeze_all", opset: 13, typ: "Squeeze", ins: fIns(shp(1, 3, 1, 5)), want: []Shape{shp(3, 5)}},
		{name: "squeeze_to_scalar", opset: 13, typ: "Squeeze", ins: fIns(shp(1, 1)), want: []Shape{shp()}},
		{name: "squeeze_err_not1", opset: 13, typ: "Squeeze", ins: rs(shp(1, 3), 1), err: "its size is 3"},
		{name: "squeeze_err_nonconst", opset: 13, typ: "Squeeze", ins: func(b *tgraph) []*Value { return []*Value{b.f32(1, 3), b.in(Int64, 1)} },
			err: "not a compile-time constant"},

		{name: "unsqueeze_attr_opset11", opset: 11, typ: "Unsqueeze", ins: fIns(shp(3)), attrs: []Attr{attrIs("axes", 0)}, want: []Shape{shp(1, 3)}},
		{name: "unsqueeze_input_opset13", opset: 13, typ: "Unsqueeze", ins: rs(shp(3, 4), 0, -1), want: []Shape{shp(1, 3, 4, 1)}},
		{name: "unsqueeze_interleaved", opset: 13, typ: "Unsqueeze", ins: rs(shp(3, 4), 3, 1), want: []Shape{shp(3, 1, 4, 1)}},
		{name: "unsqueeze_scalar", opset: 13, typ: "Unsqueeze", ins: rs(shp(), 0), want: []Shape{shp(1)}},
		{name: "unsqueeze_err_no_axes", opset: 11, typ: "Unsqueeze", ins: fIns(shp(3)), err: "has no axes"},
		{name: "unsqueeze_err_dup", opset: 13, typ: "Unsqueeze", ins: rs(shp(3), 0, -3), err: "repeats"},
		{name: "unsqueeze_err_range", opset: 13, typ: "Unsqueeze", ins: rs(shp(3), 2), err: "out of range"},
		{name: "unsqueeze_err_both", opset: 13, typ: "Unsqueeze", ins: rs(shp(3), 0), attrs: []Attr{attrIs("axes", 0)}, err: "both"},
	})
}

func TestIndexingShapes(t *testing.T) {
	runOpCases(t, []opCase{
		{name: "expand", typ: "Expand", ins: func(b *tgraph) []*Value { return []*Value{b.f32(3, 1), b.ints(2, 1, 6)} }, want: []Shape{shp(2, 3, 6)}},
		{name: "expand_smaller_shape", typ: "Expand", ins: func(b *tgraph) []*Value { return []*Value{b.f32(2, 3), b.ints(1)} }, want: []Shape{shp(2, 3)}},
		{name: "expand_err", typ: "Expand", ins: func(b *tgraph) []*Value { return []*Value{b.f32(2, 3), b.ints(4)} }, err: "cannot expand"},
		{name: "expand_err_neg", typ: "Expand", ins: func(b *tgraph) []*Value { return []*Value{b.f32(2, 3), b.ints(-1, 3)} }, err: "negative"},

		{name: "tile", typ: "Tile", ins: func(b *tgraph) []*Value { return []*Value{b.f32(2, 3), b.ints(2, 3)} }, want: []Shape{shp(4, 9)}},
		{name: "tile_err_len", typ: "Tile", ins: func(b *tgraph) []*Value { return []*Value{b.f32(2, 3), b.ints(2)} }, err: "has 1 values"},
		{name: "tile_err_nonconst", typ: "Tile", ins: func(b *tgraph) []*Value { return []*Value{b.f32(2, 3), b.in(Int64, 2)} }, err: "not a compile-time constant"},

		{name: "gather", typ: "Gather", ins: func(b *tgraph) []*Value { return []*Value{b.f32(5, 4, 3), b.in(Int64, 2, 7)} },
			attrs: []Attr{attrI("axis", 1)}, want: []Shape{shp(5, 2, 7, 3)}},
		{name: "gather_scalar_index", typ: "Gather", ins: func(b *tgraph) []*Value { return []*Value{b.f32(5, 4, 3), b.i64(2)} },
			want: []Shape{shp(4, 3)}},
		{name: "gather_neg_axis_int32", typ: "Gather", ins: func(b *tgraph) []*Value { return []*Value{b.f32(5, 4, 3), b.in(Int32, 6)} },
			attrs: []Attr{attrI("axis", -1)}, want: []Shape{shp(5, 4, 6)}},
		{name: "gather_embedding", typ: "Gather", ins: func(b *tgraph) []*Value { return []*Value{b.f32(30000, 768), b.in(Int64, 8, 128)} },
			want: []Shape{shp(8, 128, 768)}},
		{name: "gather_err_axis", typ: "Gather", ins: func(b *tgraph) []*Value { return []*Value{b.f32(5, 4), b.i64(2)} },
			attrs: []Attr{attrI("axis", 2)}, err: "out of range"},
		{name: "gather_err_index_type", typ: "Gather", ins: func(b *tgraph) []*Value { return []*Value{b.f32(5, 4), b.f32(2)} }, err: "int32 or int64"},
		{name: "gather_err_fold_range", typ: "Gather", ins: func(b *tgraph) []*Value { return []*Value{b.ints(1, 2, 3), b.ints(3)} }, err: "out of range for axis 0 of size 3"},

		{name: "gather_elements", typ: "GatherElements", ins: func(b *tgraph) []*Value { return []*Value{b.f32(3, 4), b.in(Int64, 3, 2)} },
			attrs: []Attr{attrI("axis", 1)}, want: []Shape{shp(3, 2)}},
		{name: "gather_elements_err_rank", typ: "GatherElements", ins: func(b *tgraph) []*Value { return []*Value{b.f32(3, 4), b.in(Int64, 3)} }, err: "equal ranks"},

		{name: "scatter_elements", opset: 18, typ: "ScatterElements", ins: func(b *tgraph) []*Value {
			return []*Value{b.f32(3, 4), b.in(Int64, 2, 4), b.f32(2, 4)}
		}, attrs: []Attr{attrI("axis", 0), attrS("reduction", "max")}, want: []Shape{shp(3, 4)}},
		{name: "scatter_elements_err_updates", typ: "ScatterElements", ins: func(b *tgraph) []*Value {
			return []*Value{b.f32(3, 4), b.in(Int64, 2, 4), b.f32(2, 3)}
		}, err: "must match"},
		{name: "scatter_elements_err_reduction", typ: "ScatterElements", ins: func(b *tgraph) []*Value {
			return []*Value{b.f32(3, 4), b.in(Int64, 2, 4), b.f32(2, 4)}
		}, attrs: []Attr{attrS("reduction", "avg")}, err: "reduction"},
		{name: "scatter_nd", typ: "ScatterND", ins: func(b *tgraph) []*Value {
			return []*Value{b.f32(4, 5, 6), b.in(Int64, 2, 2), b.f32(2, 6)}
		}, attrs: []Attr{attrS("reduction", "add")}, want: []Shape{shp(4, 5, 6)}},
		{name: "scatter_nd_err_updates", typ: "ScatterND", ins: func(b *tgraph) []*Value {
			return []*Value{b.f32(4, 5, 6), b.in(Int64, 2, 2), b.f32(2, 5)}
		}, err: "want [2,6]"},

		{name: "onehot", typ: "OneHot", ins: func(b *tgraph) []*Value {
			return []*Value{b.in(Int64, 3, 4), b.i64(10), b.fconst(Shape{2}, 0, 1)}
		}, want: []Shape{shp(3, 4, 10)}, wantDT: []DType{Float}},
		{name: "onehot_axis0", typ: "OneHot", ins: func(b *tgraph) []*Value {
			return []*Value{b.in(Int64, 3, 4), b.fconst(Shape{1}, 10), b.ints(0, 1)}
		}, attrs: []Attr{attrI("axis", 0)}, want: []Shape{shp(10, 3, 4)}, wantDT: []DType{Int64}},
		{name: "onehot_err_depth", typ: "OneHot", ins: func(b *tgraph) []*Value {
			return []*Value{b.in(Int64, 3), b.in(Int64), b.ints(0, 1)}
		}, err: "depth"},

		{name: "where", typ: "Where", ins: func(b *tgraph) []*Value { return []*Value{b.in(Bool, 2, 1), b.f32(1, 3), b.f32()} }, want: []Shape{shp(2, 3)}},
		{name: "where_err_cond", typ: "Where", ins: fIns(shp(2), shp(2), shp(2)), err: "want bool"},
		{name: "where_err_types", typ: "Where", ins: func(b *tgraph) []*Value { return []*Value{b.in(Bool, 2), b.f32(2), b.in(Int64, 2)} }, err: "must match"},
		{name: "where_err_broadcast", typ: "Where", ins: func(b *tgraph) []*Value { return []*Value{b.in(Bool, 2), b.f32(3), b.f32(3)} }, err: "cannot be broadcast"},
	})
}

func TestDataMovementFolds(t *testing.T) {
	b := newTG(t, 13)
	m := b.init(TensorFromInt64s(Int64, Shape{2, 3}, []int64{0, 1, 2, 3, 4, 5}))

	if got := foldedInts(t, b.must("Transpose", []*Value{m})); !sameInts(got, []int64{0, 3, 1, 4, 2, 5}) {
		t.Errorf("Transpose folded to %v", got)
	}
	if got := foldedInts(t, b.must("Tile", []*Value{m, b.ints(1, 2)})); !sameInts(got, []int64{0, 1, 2, 0, 1, 2, 3, 4, 5, 3, 4, 5}) {
		t.Errorf("Tile folded to %v", got)
	}
	col := b.init(TensorFromInt64s(Int64, Shape{2, 1}, []int64{7, 8}))
	if got := foldedInts(t, b.must("Expand", []*Value{col, b.ints(2, 3)})); !sameInts(got, []int64{7, 7, 7, 8, 8, 8}) {
		t.Errorf("Expand folded to %v", got)
	}
	if got := foldedInts(t, b.must("Gather", []*Value{m, b.ints(-1, 0)}, attrI("axis", 1))); !sameInts(got, []int64{2, 0, 5, 3}) {
		t.Errorf("Gather folded to %v", got)
	}
	ge := b.init(TensorFromInt64s(Int64, Shape{2, 2}, []int64{2, 0, 1, 1}))
	if got := foldedInts(t, b.must("GatherElements", []*Value{m, ge}, attrI("axis", 1))); !sameInts(got, []int64{2, 0, 4, 4}) {
		t.Errorf("GatherElements folded to %v", got)
	}
	if v := b.must("Reshape", []*Value{m, b.ints(3, -1)}); !sameInts(foldedInts(t, v), []int64{0, 1, 2, 3, 4, 5}) || !v.Shape.Equal(shp(3, 2)) {
		t.Errorf("Reshape folded to %v", v.Const)
	}
	if v := b.must("Flatten", []*Value{m}, attrI("axis", 0)); v.Const == nil || !v.Shape.Equal(shp(1, 6)) {
		t.Errorf("Flatten folded to %v%v", v.Shape, v.Const)
	}
	u := b.must("Unsqueeze", []*Value{m, b.ints(0)})
	if !u.Shape.Equal(shp(1, 2, 3)) || u.Const == nil {
		t.Fatalf("Unsqueeze gave %v const %v", u.Shape, u.Const)
	}
	if v := b.must("Squeeze", []*Value{u, b.ints(0)}); !v.Shape.Equal(shp(2, 3)) || v.Const == nil {
		t.Errorf("Squeeze gave %v const %v", v.Shape, v.Const)
	}
	cond := b.init(TensorFromInt64s(Bool, Shape{3}, []int64{1, 0, 1}))
	if got := foldedInts(t, b.must("Where", []*Value{cond, m, b.i64(-1)})); !sameInts(got, []int64{0, -1, 2, 3, -1, 5}) {
		t.Errorf("Where folded to %v", got)
	}
	// Non-constant data: shape only.
	x := b.f32(2, 3)
	if v := b.must("Transpose", []*Value{x}); v.Const != nil {
		t.Errorf("non-constant Transpose was folded")
	}
	// Folded Gather of an out-of-range constant index names the node.
	_, err := b.op("Gather", []*Value{m, b.ints(3)}, 1, attrI("axis", 1))
	if err == nil || !strings.Contains(err.Error(), "out of range") {
		t.Errorf("want out-of-range error, got %v", err)
	}
}

// A slice is a view exactly when its output is one contiguous run of the
// input: cut along the first dimension that is not 1, the rest whole.
func TestSliceView(t *testing.T) {
	for _, c := range []struct {
		name                     string
		data                     Shape
		starts, ends, axes, step []int64
		off                      int64
		ok                       bool
	}{
		{"rows", shp(4, 6), []int64{1}, []int64{3}, []int64{0}, nil, 1 * 6 * 4, true},
		{"columns", shp(4, 6), []int64{2}, []int64{4}, []int64{1}, nil, 0, false},
		{"after_unit_dim", shp(1, 6, 5), []int64{2}, []int64{4}, []int64{1}, nil, 2 * 5 * 4, true},
		{"one_row_part", shp(4, 6), []int64{2, 1}, []int64{3, 4}, []int64{0, 1}, nil, (2*6 + 1) * 4, true},
		{"two_rows_part", shp(4, 6), []int64{2, 1}, []int64{4, 4}, []int64{0, 1}, nil, 0, false},
		{"strided", shp(8, 2), []int64{0}, []int64{8}, []int64{0}, []int64{2}, 0, false},
		{"whole", shp(3, 2), []int64{0}, []int64{3}, []int64{0}, nil, 0, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := newTG(t, 0)
			ins := []*Value{b.f32(c.data...), b.ints(c.starts...), b.ints(c.ends...), b.ints(c.axes...)}
			if c.step != nil {
				ins = append(ins, b.ints(c.step...))
			}
			op, err := b.op("Slice", ins, 1)
			if err != nil {
				t.Fatal(err)
			}
			off, ok := ViewOf(op)
			if ok != c.ok || (ok && off != c.off) {
				t.Fatalf("ViewOf = %d, %v; want %d, %v", off, ok, c.off, c.ok)
			}
		})
	}
}
