package kernels

import (
	"fmt"
	"math"
	"testing"

	"github.com/tsplit/tsplit/ir"
	"github.com/tsplit/tsplit/ir/irtest"
)

func ktCast(t *testing.T, x *Tensor, to ir.DType) *Tensor {
	t.Helper()
	return ktRun1(t, "Cast", []ktIn{ktR(x)}, irtest.Int("to", int64(to)))
}

func TestCast(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	cases := []struct {
		in, want *Tensor
	}{
		// floats truncate toward zero
		{ktF32(ktS(5), -1.7, -0.5, 0, 2.9, 1e9), ktI64(ktS(5), -1, 0, 0, 2, 1000000000)},
		{ktF32(ktS(3), -1.7, 2.9, 100), ktI32(ktS(3), -1, 2, 100)},
		{ktF64(ktS(2), -3.99, 255.5), ktT(ir.Int16, ktS(2), []int16{-3, 255})},
		{ktF32(ktS(2), 3.7, 200), ktU8(ktS(2), 3, 200)},
		// non-zero (NaN included) is true
		{ktF32(ktS(5), 0, -0.5, 2, nan, float32(math.Copysign(0, -1))), ktBool(ktS(5), false, true, true, true, false)},
		{ktI64(ktS(3), 0, -5, 1<<40), ktBool(ktS(3), false, true, true)},
		{ktBool(ktS(3), true, false, true), ktF32(ktS(3), 1, 0, 1)},
		{ktBool(ktS(2), true, false), ktI64(ktS(2), 1, 0)},
		// integers wrap into narrower integers
		{ktI64(ktS(3), 1<<32+5, -1, 1<<31), ktI32(ktS(3), 5, -1, math.MinInt32)},
		{ktI32(ktS(2), 300, -1), ktU8(ktS(2), 44, 255)},
		{ktT(ir.Int8, ktS(2), []int8{-128, 5}), ktI64(ktS(2), -128, 5)},
		{ktU8(ktS(2), 255, 0), ktT(ir.Int8, ktS(2), []int8{-1, 0})},
		{ktI64(ktS(2), 1<<53+1, -3), ktF64(ktS(2), 1<<53, -3)},
		{ktI64(ktS(2), 16777217, 7), ktF32(ktS(2), 16777216, 7)},
		{ktF64(ktS(3), 0.1, 1e300, -1e-50), ktF32(ktS(3), 0.1, inf, float32(math.Copysign(0, -1)))},
		{ktF32(ktS(2), 0.1, -2), ktF64(ktS(2), float64(float32(0.1)), -2)},
		{ktT(ir.Uint64, ktS(1), []uint64{1 << 63}), ktF64(ktS(1), 1<<63)},
		// float16: exact values, rounding to nearest even, overflow,
		// subnormals and underflow
		{ktF32(ktS(9), 1, -2, 65504, 70000, 0.5, 1+1.0/2048, 1+3.0/2048, 5.960464477539063e-08, 1e-8),
			ktT(ir.Float16, ktS(9), []uint16{0x3c00, 0xc000, 0x7bff, 0x7c00, 0x3800, 0x3c00, 0x3c02, 0x0001, 0x0000})},
		{ktT(ir.Float16, ktS(5), []uint16{0x3c00, 0xc000, 0x0001, 0x7c00, 0x3555}),
			ktF32(ktS(5), 1, -2, 5.960464477539063e-08, inf, 0.333251953125)},
		{ktT(ir.Float16, ktS(2), []uint16{0x4500, 0xbc00}), ktI64(ktS(2), 5, -1)},
		// bfloat16
		{ktF32(ktS(4), 1, -2.5, 1+1.0/256, 1+3.0/256), ktT(ir.BFloat16, ktS(4), []uint16{0x3f80, 0xc020, 0x3f80, 0x3f82})},
		{ktT(ir.BFloat16, ktS(2), []uint16{0x3f80, 0x4049}), ktF32(ktS(2), 1, 3.140625)},
		{ktT(ir.BFloat16, ktS(1), []uint16{0x4049}), ktT(ir.Float16, ktS(1), []uint16{0x4248})},
	}
	for _, tc := range cases {
		got := ktCast(t, tc.in, tc.want.DType)
		ktSame(t, fmt.Sprintf("Cast %v→%v", tc.in.DType, tc.want.DType), got, tc.want)
	}
	// NaN stays NaN through float16 and bfloat16.
	h := ktCast(t, ktF32(ktS(1), nan), ir.Float16)
	if v := viewAs[uint16](h)[0]; v&0x7c00 != 0x7c00 || v&0x3ff == 0 {
		t.Errorf("NaN → f16 is %#x", v)
	}
	b := ktCast(t, ktF32(ktS(1), nan), ir.BFloat16)
	if v := bf16ToF32(viewAs[uint16](b)[0]); !math.IsNaN(float64(v)) {
		t.Errorf("NaN → bf16 → f32 is %v", v)
	}
	// Same type: a copy.
	ktSame(t, "Cast f32→f32", ktCast(t, ktF32(ktS(2), 1, 2), ir.Float), ktF32(ktS(2), 1, 2))
}

func TestCastLike(t *testing.T) {
	got := ktRun1(t, "CastLike", []ktIn{ktR(ktF32(ktS(3), 1.5, -2.5, 0)), ktR(ktI32(ktS(1), 0))})
	ktSame(t, "CastLike f32→i32", got, ktI32(ktS(3), 1, -2, 0))
	got = ktRun1(t, "CastLike", []ktIn{ktR(ktI64(ktS(2), 3, 0)), ktR(ktBool(nil, true))})
	ktSame(t, "CastLike i64→bool", got, ktBool(ktS(2), true, false))
}

// Every float16 bit pattern survives f16 → f32 → f16 unchanged (NaN
// payloads aside), and f32 → f16 rounds like the reference formula.
func TestHalfRoundTrip(t *testing.T) {
	for h := 0; h < 1<<16; h++ {
		f := halfToF32(uint16(h))
		if f != f {
			continue
		}
		if back := f32ToHalf(f); back != uint16(h) {
			t.Fatalf("f16 %#04x → %v → %#04x", h, f, back)
		}
	}
	// Midpoints between consecutive halves round to the even one.
	for h := uint16(0x0400); h < 0x7bff; h += 97 {
		lo, hi := float64(halfToF32(h)), float64(halfToF32(h+1))
		mid := float32((lo + hi) / 2)
		want := h
		if h&1 == 1 {
			want = h + 1
		}
		if got := f32ToHalf(mid); got != want {
			t.Fatalf("midpoint of %#04x and %#04x → %#04x, want %#04x", h, h+1, got, want)
		}
	}
}

// Casts from bool and the 16-bit floats to other types go through a
// staging buffer in chunks; lengths that are not a multiple of it.
func TestCastChunked(t *testing.T) {
	const n = 3*1024 + 17
	h := make([]uint16, n)
	b := make([]bool, n)
	wantI := make([]int32, n)
	wantF := make([]float64, n)
	for i := range h {
		v := float32(i%200) - 100.5
		h[i] = f32ToHalf(v)
		wantI[i] = int32(v)
		b[i] = i%3 == 0
		if b[i] {
			wantF[i] = 1
		}
	}
	ktSame(t, "f16→i32", ktCast(t, ktT(ir.Float16, ktS(n), h), ir.Int32), ktI32(ktS(n), wantI...))
	ktSame(t, "bool→f64", ktCast(t, ktBool(ktS(n), b...), ir.Double), ktF64(ktS(n), wantF...))
	bf := ktCast(t, ktT(ir.Float16, ktS(n), h), ir.BFloat16)
	back := ktCast(t, bf, ir.Float)
	for i, v := range viewAs[float32](back) {
		if want := float32(i%200) - 100.5; v != want {
			t.Fatalf("f16→bf16→f32 element %d is %v, want %v", i, v, want)
		}
	}
}
