package kernels

import (
	"testing"

	"github.com/tsplit/tsplit/ir"
	"github.com/tsplit/tsplit/ir/irtest"
)

func TestShapeSize(t *testing.T) {
	x := ktF32(ktS(2, 3, 4, 5))
	for _, tc := range []struct {
		attrs []ir.Attr
		want  []int64
	}{
		{nil, []int64{2, 3, 4, 5}},
		{[]ir.Attr{irtest.Int("start", 1)}, []int64{3, 4, 5}},
		{[]ir.Attr{irtest.Int("start", -3), irtest.Int("end", -1)}, []int64{3, 4}},
		{[]ir.Attr{irtest.Int("start", -10), irtest.Int("end", 2)}, []int64{2, 3}},
		{[]ir.Attr{irtest.Int("start", 3), irtest.Int("end", 1)}, []int64{}},
	} {
		got := ktRun1(t, "Shape", []ktIn{ktR(x)}, tc.attrs...)
		ktSame(t, "Shape", got, ktI64(ktS(int64(len(tc.want))), tc.want...))
	}
	ktSame(t, "Size", ktRun1(t, "Size", []ktIn{ktR(x)}), ktI64(ktS(), 120))
	ktSame(t, "Size scalar", ktRun1(t, "Size", []ktIn{ktR(ktBool(nil, true))}), ktI64(ktS(), 1))
}

func TestConstant(t *testing.T) {
	val := ktI32(ktS(2, 2), 1, -2, 3, -4)
	tensor := ir.Attr{Name: "value", Type: ir.AttrTensor, Tensor: &ir.Tensor{DType: ir.Int32, Shape: ir.Shape{2, 2}, Raw: val.Data}}
	ktSame(t, "Constant value", ktRun1(t, "Constant", nil, tensor), val)
	ktSame(t, "Constant value_float", ktRun1(t, "Constant", nil, irtest.Float("value_float", 2.5)), ktF32(ktS(), 2.5))
	ktSame(t, "Constant value_floats", ktRun1(t, "Constant", nil, ir.Attr{Name: "value_floats", Type: ir.AttrFloats, Floats: []float32{1, 2}}), ktF32(ktS(2), 1, 2))
	ktSame(t, "Constant value_int", ktRun1(t, "Constant", nil, irtest.Int("value_int", -7)), ktI64(ktS(), -7))
	ktSame(t, "Constant value_ints", ktRun1(t, "Constant", nil, irtest.Ints("value_ints", 4, 5, 6)), ktI64(ktS(3), 4, 5, 6))
	// A constant too large to fold is still produced by the kernel.
	big := ktF32(ktS(5000), ktSeq(5000, 0.5, 1)...)
	bigAttr := ir.Attr{Name: "value", Type: ir.AttrTensor, Tensor: &ir.Tensor{DType: ir.Float, Shape: ir.Shape{5000}, Raw: big.Data}}
	ktSame(t, "Constant big", ktRun1(t, "Constant", nil, bigAttr), big)
}

func TestConstantOfShape(t *testing.T) {
	got := ktRun1(t, "ConstantOfShape", []ktIn{ktC(ktI64(ktS(2), 2, 3))})
	ktSame(t, "ConstantOfShape default", got, ktF32(ktS(2, 3)))
	v := ir.Attr{Name: "value", Type: ir.AttrTensor, Tensor: ir.TensorFromInt64s(ir.Int64, ir.Shape{1}, []int64{-3})}
	got = ktRun1(t, "ConstantOfShape", []ktIn{ktC(ktI64(ktS(1), 3))}, v)
	ktSame(t, "ConstantOfShape i64", got, ktI64(ktS(3), -3, -3, -3))
	// Big enough not to be folded.
	f := ir.Attr{Name: "value", Type: ir.AttrTensor, Tensor: ir.TensorFromFloat64s(ir.Float, ir.Shape{1}, []float64{1.5})}
	got = ktRun1(t, "ConstantOfShape", []ktIn{ktC(ktI64(ktS(2), 100, 70))}, f)
	want := make([]float32, 7000)
	for i := range want {
		want[i] = 1.5
	}
	ktSame(t, "ConstantOfShape big", got, ktF32(ktS(100, 70), want...))
	got = ktRun1(t, "ConstantOfShape", []ktIn{ktC(ktI64(ktS(1), 0))})
	ktSame(t, "ConstantOfShape empty", got, ktF32(ktS(0)))
}

func TestRange(t *testing.T) {
	got := ktRun1(t, "Range", []ktIn{ktC(ktI64(nil, 3)), ktC(ktI64(nil, 10)), ktC(ktI64(nil, 3))})
	ktSame(t, "Range i64", got, ktI64(ktS(3), 3, 6, 9))
	got = ktRun1(t, "Range", []ktIn{ktC(ktI32(nil, 10)), ktC(ktI32(nil, 4)), ktC(ktI32(nil, -2))})
	ktSame(t, "Range i32 down", got, ktI32(ktS(3), 10, 8, 6))
	got = ktRun1(t, "Range", []ktIn{ktC(ktI64(nil, 5)), ktC(ktI64(nil, 1)), ktC(ktI64(nil, 1))})
	ktSame(t, "Range empty", got, ktI64(ktS(0)))
	// Float values accumulate in float32, as the spec's loop does.
	got = ktRun1(t, "Range", []ktIn{ktC(ktF32(nil, 0.1)), ktC(ktF32(nil, 1)), ktC(ktF32(nil, 0.3))})
	a := float32(0.1)
	var want []float32
	for i := 0; i < 3; i++ {
		want = append(want, a)
		a += 0.3
	}
	ktSame(t, "Range f32", got, ktF32(ktS(3), want...))
	// Too long to fold.
	got = ktRun1(t, "Range", []ktIn{ktC(ktI64(nil, 0)), ktC(ktI64(nil, 10000)), ktC(ktI64(nil, 2))})
	if v := viewAs[int64](got); len(v) != 5000 || v[4999] != 9998 {
		t.Fatalf("Range big: %d values, last %d", len(v), v[len(v)-1])
	}
}
