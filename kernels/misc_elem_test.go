package kernels

import (
	"math"
	"slices"
	"testing"

	"github.com/tsplit/tsplit/ir"
)

func ktLimits[T elemNum](t *testing.T, lo, hi T, float bool) {
	t.Helper()
	gl, gh := elemLimits[T]()
	if gl != lo || gh != hi {
		t.Errorf("elemLimits[%T] = %v, %v; want %v, %v", lo, gl, gh, lo, hi)
	}
	if isFloat[T]() != float {
		t.Errorf("isFloat[%T] = %v", lo, !float)
	}
}

// elemLimits and isFloat derive from T's arithmetic what a table by
// type would list; check them against the math package's constants.
func TestElemLimits(t *testing.T) {
	inf := math.Inf(1)
	ktLimits(t, float32(-inf), float32(inf), true)
	ktLimits(t, -inf, inf, true)
	ktLimits[int64](t, math.MinInt64, math.MaxInt64, false)
	ktLimits[int32](t, math.MinInt32, math.MaxInt32, false)
	ktLimits[int16](t, math.MinInt16, math.MaxInt16, false)
	ktLimits[int8](t, math.MinInt8, math.MaxInt8, false)
	ktLimits[uint64](t, 0, math.MaxUint64, false)
	ktLimits[uint32](t, 0, math.MaxUint32, false)
	ktLimits[uint16](t, 0, math.MaxUint16, false)
	ktLimits[uint8](t, 0, math.MaxUint8, false)
}

// ewRem's integer remainder, x - (x/y)*y, is Go's x % y for every pair
// of 8-bit operands and at the 64-bit extremes.
func TestEwIntRem(t *testing.T) {
	for x := math.MinInt8; x <= math.MaxInt8; x++ {
		for y := math.MinInt8; y <= math.MaxInt8; y++ {
			if y == 0 {
				continue
			}
			if got, want := ewRem(ewFMod, int8(x), int8(y)), int8(x)%int8(y); got != want {
				t.Fatalf("int8 %d rem %d = %d, want %d", x, y, got, want)
			}
			if ux, uy := uint8(x), uint8(y); ewRem(ewFMod, ux, uy) != ux%uy {
				t.Fatalf("uint8 %d rem %d = %d, want %d", ux, uy, ewRem(ewFMod, ux, uy), ux%uy)
			}
		}
	}
	for _, p := range [][2]int64{{math.MinInt64, -1}, {math.MinInt64, 3}, {math.MaxInt64, -7}, {-9, math.MaxInt64}, {math.MinInt64, math.MinInt64}} {
		if got, want := ewRem(ewFMod, p[0], p[1]), p[0]%p[1]; got != want {
			t.Errorf("int64 %d rem %d = %d, want %d", p[0], p[1], got, want)
		}
	}
	if got := ewRem(ewFMod, uint64(math.MaxUint64), 10); got != 5 {
		t.Errorf("uint64 max rem 10 = %d, want 5", got)
	}
}

// numOf, floatOf and wordOf cover exactly the element types the
// kernels' type lists name.
func TestElemDispatchCoversTypeLists(t *testing.T) {
	for _, dt := range byteTypes {
		num := numOf(dt) != nil
		if want := slices.Contains(numTypes, dt); num != want {
			t.Errorf("numOf(%v) != nil is %v, want %v", dt, num, want)
		}
		if flt, want := floatOf(dt) != nil, slices.Contains(floatTypes, dt); flt != want {
			t.Errorf("floatOf(%v) != nil is %v, want %v", dt, flt, want)
		}
		if wordOf(esize(dt)) == nil {
			t.Errorf("wordOf(%d) (for %v) is nil", esize(dt), dt)
		}
	}
	if wordOf(3) != nil || wordOf(0) != nil || numOf(ir.String) != nil {
		t.Error("a dispatch answers for a type it does not hold")
	}
}
