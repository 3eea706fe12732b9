package ir

import "testing"

func TestReduceShapes(t *testing.T) {
	withAxes := func(x Shape, axes ...int64) func(b *tgraph) []*Value {
		return func(b *tgraph) []*Value { return []*Value{b.f32(x...), b.ints(axes...)} }
	}
	runOpCases(t, []opCase{
		{name: "mean_attr_opset17", opset: 17, typ: "ReduceMean", ins: fIns(shp(2, 5, 64)), attrs: []Attr{attrIs("axes", -1)}, want: []Shape{shp(2, 5, 1)}},
		{name: "mean_attr_nokeep", opset: 17, typ: "ReduceMean", ins: fIns(shp(2, 5, 64)),
			attrs: []Attr{attrIs("axes", -1), attrI("keepdims", 0)}, want: []Shape{shp(2, 5)}},
		{name: "mean_input_opset18", opset: 18, typ: "ReduceMean", ins: withAxes(shp(2, 5, 64), 1, 2), want: []Shape{shp(2, 1, 1)}},
		{name: "sum_input_opset13", opset: 13, typ: "ReduceSum", ins: withAxes(shp(2, 5, 64), 0), attrs: []Attr{attrI("keepdims", 0)}, want: []Shape{shp(5, 64)}},
		{name: "sum_attr_opset11", opset: 11, typ: "ReduceSum", ins: fIns(shp(2, 5, 64)), attrs: []Attr{attrIs("axes", 0, 2)}, want: []Shape{shp(1, 5, 1)}},
		{name: "all_keep", opset: 13, typ: "ReduceSum", ins: fIns(shp(2, 5, 64)), want: []Shape{shp(1, 1, 1)}},
		{name: "all_nokeep", opset: 18, typ: "ReduceMax", ins: fIns(shp(2, 5, 64)), attrs: []Attr{attrI("keepdims", 0)}, want: []Shape{shp()}},
		{name: "noop_empty", opset: 18, typ: "ReduceL2", ins: fIns(shp(2, 5)), attrs: []Attr{attrI("noop_with_empty_axes", 1)}, want: []Shape{shp(2, 5)}},
		{name: "noop_empty_input", opset: 18, typ: "ReduceMin", ins: withAxes(shp(2, 5)), attrs: []Attr{attrI("noop_with_empty_axes", 1)}, want: []Shape{shp(2, 5)}},
		{name: "empty_input_reduces_all", opset: 18, typ: "ReduceProd", ins: withAxes(shp(2, 5)), want: []Shape{shp(1, 1)}},
		{name: "sumsquare", opset: 18, typ: "ReduceSumSquare", ins: withAxes(shp(3, 4), -2), want: []Shape{shp(1, 4)}},
		{name: "logsumexp", opset: 18, typ: "ReduceLogSumExp", ins: withAxes(shp(3, 4), 1), attrs: []Attr{attrI("keepdims", 0)}, want: []Shape{shp(3)}},
		{name: "err_nonconst", opset: 18, typ: "ReduceMean", ins: func(b *tgraph) []*Value { return []*Value{b.f32(2, 3), b.in(Int64, 1)} },
			err: "(axes) is not a compile-time constant"},
		{name: "err_range", opset: 13, typ: "ReduceSum", ins: withAxes(shp(2, 3), 2), err: "out of range"},
		{name: "err_repeat", opset: 13, typ: "ReduceSum", ins: withAxes(shp(2, 3), 1, -1), err: "repeats"},
		{name: "err_both", opset: 13, typ: "ReduceSum", ins: withAxes(shp(2, 3), 1), attrs: []Attr{attrIs("axes", 1)}, err: "both"},

		{name: "argmax", typ: "ArgMax", ins: fIns(shp(3, 4)), attrs: []Attr{attrI("axis", 1)}, want: []Shape{shp(3, 1)}, wantDT: []DType{Int64}},
		{name: "argmin_nokeep_last", typ: "ArgMin", ins: fIns(shp(3, 4)),
			attrs: []Attr{attrI("axis", -2), attrI("keepdims", 0), attrI("select_last_index", 1)}, want: []Shape{shp(4)}, wantDT: []DType{Int64}},
		{name: "argmax_err_axis", typ: "ArgMax", ins: fIns(shp(3, 4)), attrs: []Attr{attrI("axis", 2)}, err: "out of range"},
	})
}

func TestReduceFold(t *testing.T) {
	b := newTG(t, 18)
	// Product of a folded shape: the element count of a tensor.
	sh := b.must("Shape", []*Value{b.f32(2, 3, 4)})
	v := b.must("ReduceProd", []*Value{sh}, attrI("keepdims", 0))
	if got := foldedInts(t, v); !sameInts(got, []int64{24}) || !v.Shape.Equal(shp()) {
		t.Errorf("ReduceProd folded to %v%v", v.Shape, got)
	}
	m := b.init(TensorFromInt64s(Int64, Shape{2, 2}, []int64{1, 2, 3, 4}))
	if got := foldedInts(t, b.must("ReduceSum", []*Value{m, b.ints(0)})); !sameInts(got, []int64{4, 6}) {
		t.Errorf("ReduceSum folded to %v", got)
	}
	if got := foldedInts(t, b.must("ReduceMean", []*Value{m, b.ints(1)})); !sameInts(got, []int64{1, 3}) {
		t.Errorf("integer ReduceMean folded to %v", got)
	}
	if got := foldedInts(t, b.must("ReduceMax", []*Value{m})); !sameInts(got, []int64{4}) {
		t.Errorf("ReduceMax folded to %v", got)
	}
	f := b.fconst(Shape{2, 2}, 3, 4, -1, 0.5)
	if got := foldedFloats(t, b.must("ReduceL2", []*Value{f, b.ints(1)})); !closeFloats(got, []float64{5, 1.118033988749895}) {
		t.Errorf("ReduceL2 folded to %v", got)
	}
	if got := foldedFloats(t, b.must("ReduceMin", []*Value{f, b.ints(0)})); !closeFloats(got, []float64{-1, 0.5}) {
		t.Errorf("ReduceMin folded to %v", got)
	}
	if got := foldedFloats(t, b.must("ReduceMean", []*Value{f})); !closeFloats(got, []float64{1.625}) {
		t.Errorf("ReduceMean folded to %v", got)
	}
	// Opset-13 ReduceSum with the axes attribute form (opset 11 style).
	b11 := newTG(t, 11)
	m11 := b11.init(TensorFromInt64s(Int64, Shape{2, 2}, []int64{1, 2, 3, 4}))
	if got := foldedInts(t, b11.must("ReduceSum", []*Value{m11}, attrIs("axes", 1), attrI("keepdims", 0))); !sameInts(got, []int64{3, 7}) {
		t.Errorf("ReduceSum (attr axes) folded to %v", got)
	}
	// Big inputs are not folded.
	big := b.init(TensorFromInt64s(Int64, Shape{MaxFoldElements + 1}, make([]int64, MaxFoldElements+1)))
	if v := b.must("ReduceSum", []*Value{big}); v.Const != nil {
		t.Errorf("ReduceSum of a big constant was folded")
	}
}
