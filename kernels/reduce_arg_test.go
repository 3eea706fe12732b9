package kernels

import (
	"fmt"
	"math"
	"testing"

	"github.com/tsplit/tsplit/ir/irtest"
)

func TestArgMaxMin(t *testing.T) {
	// 2x3 with ties: row 0 has max 5 at 0 and 2, min 1 at 1.
	x := ktF32(ktS(2, 3), 5, 1, 5, -1, 7, -1)
	cases := []struct {
		op         string
		axis, keep int64
		last       int64
		shape      []int64
		want       []int64
	}{
		{"ArgMax", 1, 1, 0, ktS(2, 1), []int64{0, 1}},
		{"ArgMax", -1, 0, 1, ktS(2), []int64{2, 1}},
		{"ArgMax", 0, 1, 0, ktS(1, 3), []int64{0, 1, 0}},
		{"ArgMin", 1, 0, 0, ktS(2), []int64{1, 0}},
		{"ArgMin", 1, 0, 1, ktS(2), []int64{1, 2}},
		{"ArgMin", 0, 0, 0, ktS(3), []int64{1, 0, 1}},
	}
	for _, tc := range cases {
		got := ktRun1(t, tc.op, []ktIn{ktR(x)}, irtest.Int("axis", tc.axis), irtest.Int("keepdims", tc.keep), irtest.Int("select_last_index", tc.last))
		ktSame(t, fmt.Sprintf("%s axis=%d keep=%d last=%d", tc.op, tc.axis, tc.keep, tc.last), got, ktI64(tc.shape, tc.want...))
	}
	got := ktRun1(t, "ArgMax", []ktIn{ktR(ktI64(ktS(4), 3, 9, -2, 9))})
	ktSame(t, "ArgMax i64", got, ktI64(ktS(1), 1))
}

// ArgMax over a middle axis of a larger tensor against a naive loop.
func TestArgMaxNaive(t *testing.T) {
	shape := ktS(3, 50, 300)
	x := ktRand(ktNumel(shape), 21)
	for axis := int64(0); axis < 3; axis++ {
		out := append([]int64{}, shape...)
		out[axis] = 1
		want := make([]int64, ktNumel(out))
		best := make([]float32, len(want))
		for i := range best {
			best[i] = float32(math.Inf(-1))
		}
		ktCoords(shape, func(c []int64) {
			k := append([]int64{}, c...)
			k[axis] = 0
			j := ktFlat(out, k)
			if v := x[ktFlat(shape, c)]; v > best[j] {
				best[j], want[j] = v, c[axis]
			}
		})
		got := ktRun1(t, "ArgMax", []ktIn{ktR(ktF32(shape, x...))}, irtest.Int("axis", axis))
		ktSame(t, fmt.Sprintf("ArgMax axis %d", axis), got, ktI64(out, want...))
	}
}

func TestHardmax(t *testing.T) {
	x := ktF32(ktS(2, 3), 1, 3, 3, -1, -5, -2)
	got := ktRun(t, 13, "Hardmax", []ktIn{ktR(x)}, 1)[0]
	ktSame(t, "Hardmax axis -1", got, ktF32(ktS(2, 3), 0, 1, 0, 1, 0, 0))
	got = ktRun(t, 13, "Hardmax", []ktIn{ktR(x)}, 1, irtest.Int("axis", 0))[0]
	ktSame(t, "Hardmax axis 0", got, ktF32(ktS(2, 3), 1, 1, 1, 0, 0, 0))
	got = ktRun(t, 13, "Hardmax", []ktIn{ktR(ktF64(ktS(2, 2, 2), 1, 2, 4, 3, 0, 0, -1, 9))}, 1, irtest.Int("axis", 1))[0]
	ktSame(t, "Hardmax f64 axis 1", got, ktF64(ktS(2, 2, 2), 0, 0, 1, 1, 1, 0, 0, 1))
}

func TestInstanceNormalization(t *testing.T) {
	shape := ktS(2, 3, 4, 5)
	x := ktRand(ktNumel(shape), 4)
	scale := []float32{1, 0.5, -2}
	bias := []float32{0, 1, -0.25}
	eps := 1e-3
	want := make([]float64, len(x))
	sz := 20
	for p := 0; p < 6; p++ {
		var m, v float64
		for _, e := range x[p*sz : (p+1)*sz] {
			m += float64(e)
		}
		m /= float64(sz)
		for _, e := range x[p*sz : (p+1)*sz] {
			v += (float64(e) - m) * (float64(e) - m)
		}
		v /= float64(sz)
		for i := p * sz; i < (p+1)*sz; i++ {
			want[i] = float64(scale[p%3])*(float64(x[i])-m)/math.Sqrt(v+eps) + float64(bias[p%3])
		}
	}
	got := ktRun1(t, "InstanceNormalization", []ktIn{ktR(ktF32(shape, x...)), ktR(ktF32(ktS(3), scale...)), ktR(ktF32(ktS(3), bias...))},
		irtest.Float("epsilon", float32(eps)))
	ktClose(t, "InstanceNormalization", got, shape, want, 1e-5)
}
