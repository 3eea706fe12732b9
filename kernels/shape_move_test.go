package kernels

import (
	"fmt"
	"testing"

	"github.com/tsplit/tsplit/ir"
	"github.com/tsplit/tsplit/ir/irtest"
)

func TestReshapeFamily(t *testing.T) {
	x := ktF32(ktS(2, 3, 4), ktSeq(24, 1, 0)...)
	flat := ktSeq(24, 1, 0)
	cases := []struct {
		name  string
		opset int64
		op    string
		ins   []ktIn
		attrs []ir.Attr
		shape []int64
	}{
		{"Reshape -1", 18, "Reshape", []ktIn{ktR(x), ktC(ktI64(ktS(2), 4, -1))}, nil, ktS(4, 6)},
		{"Reshape 0", 18, "Reshape", []ktIn{ktR(x), ktC(ktI64(ktS(3), 0, 0, -1))}, nil, ktS(2, 3, 4)},
		{"Flatten", 18, "Flatten", []ktIn{ktR(x)}, nil, ktS(2, 12)},
		{"Flatten axis 0", 18, "Flatten", []ktIn{ktR(x)}, []ir.Attr{irtest.Int("axis", 0)}, ktS(1, 24)},
		{"Flatten axis -1", 18, "Flatten", []ktIn{ktR(x)}, []ir.Attr{irtest.Int("axis", -1)}, ktS(6, 4)},
		{"Unsqueeze input", 18, "Unsqueeze", []ktIn{ktR(x), ktC(ktI64(ktS(2), 0, -1))}, nil, ktS(1, 2, 3, 4, 1)},
		{"Unsqueeze attr", 11, "Unsqueeze", []ktIn{ktR(x)}, []ir.Attr{irtest.Ints("axes", 1)}, ktS(2, 1, 3, 4)},
		{"Identity", 18, "Identity", []ktIn{ktR(x)}, nil, ktS(2, 3, 4)},
	}
	for _, tc := range cases {
		got := ktRun(t, tc.opset, tc.op, tc.ins, 1, tc.attrs...)[0]
		ktSame(t, tc.name, got, ktF32(tc.shape, flat...))
	}
	y := ktI64(ktS(1, 3, 1), 7, 8, 9)
	ktSame(t, "Squeeze all", ktRun1(t, "Squeeze", []ktIn{ktR(y)}), ktI64(ktS(3), 7, 8, 9))
	ktSame(t, "Squeeze input", ktRun1(t, "Squeeze", []ktIn{ktR(y), ktC(ktI64(ktS(1), -1))}), ktI64(ktS(1, 3), 7, 8, 9))
	ktSame(t, "Squeeze attr", ktRun(t, 11, "Squeeze", []ktIn{ktR(y)}, 1, irtest.Ints("axes", 0))[0], ktI64(ktS(3, 1), 7, 8, 9))
	b := ktBool(ktS(2), true, false)
	ktSame(t, "Identity bool", ktRun1(t, "Identity", []ktIn{ktR(b)}), b)
}

// ktTransposeRef is a naive transpose.
func ktTransposeRef(shape []int64, x []float32, perm []int64) ([]int64, []float32) {
	out := make([]int64, len(perm))
	for i, p := range perm {
		out[i] = shape[p]
	}
	y := make([]float32, len(x))
	src := make([]int64, len(shape))
	ktCoords(out, func(c []int64) {
		for i, p := range perm {
			src[p] = c[i]
		}
		y[ktFlat(out, c)] = x[ktFlat(shape, src)]
	})
	return out, y
}

func ktPerms(n int) [][]int64 {
	if n == 0 {
		return [][]int64{{}}
	}
	var out [][]int64
	for _, p := range ktPerms(n - 1) {
		for i := 0; i <= len(p); i++ {
			q := append(append(append([]int64{}, p[:i]...), int64(n-1)), p[i:]...)
			out = append(out, q)
		}
	}
	return out
}

func TestTranspose(t *testing.T) {
	for _, shape := range [][]int64{{2, 3, 4}, {3, 1, 5, 2}, {70, 45}, {5, 33, 34}, {2, 1}} {
		x := ktRand(ktNumel(shape), uint64(len(shape)))
		for _, perm := range ktPerms(len(shape)) {
			out, want := ktTransposeRef(shape, x, perm)
			got := ktRun1(t, "Transpose", []ktIn{ktR(ktF32(shape, x...))}, irtest.Ints("perm", perm...))
			ktSame(t, fmt.Sprintf("Transpose %v perm %v", shape, perm), got, ktF32(out, want...))
		}
	}
	// Default perm reverses; other element sizes.
	got := ktRun1(t, "Transpose", []ktIn{ktR(ktI64(ktS(2, 3), 1, 2, 3, 4, 5, 6))})
	ktSame(t, "Transpose default i64", got, ktI64(ktS(3, 2), 1, 4, 2, 5, 3, 6))
	got = ktRun1(t, "Transpose", []ktIn{ktR(ktU8(ktS(2, 3), 1, 2, 3, 4, 5, 6))}, irtest.Ints("perm", 1, 0))
	ktSame(t, "Transpose u8", got, ktU8(ktS(3, 2), 1, 4, 2, 5, 3, 6))
	got = ktRun1(t, "Transpose", []ktIn{ktR(ktT(ir.Float16, ktS(2, 2), []uint16{1, 2, 3, 4}))})
	ktSame(t, "Transpose f16", got, ktT(ir.Float16, ktS(2, 2), []uint16{1, 3, 2, 4}))
	// Large enough for the parallel tiled path.
	shape := ktS(4, 300, 257)
	x := ktRand(ktNumel(shape), 8)
	for _, perm := range [][]int64{{0, 2, 1}, {2, 1, 0}, {1, 0, 2}} {
		out, want := ktTransposeRef(shape, x, perm)
		got := ktRun1(t, "Transpose", []ktIn{ktR(ktF32(shape, x...))}, irtest.Ints("perm", perm...))
		ktSame(t, fmt.Sprintf("Transpose %v perm %v", shape, perm), got, ktF32(out, want...))
	}
}

func TestConcat(t *testing.T) {
	a := ktF32(ktS(2, 2), 1, 2, 3, 4)
	b := ktF32(ktS(2, 1), 5, 6)
	c := ktF32(ktS(2, 3), 7, 8, 9, 10, 11, 12)
	got := ktRun1(t, "Concat", []ktIn{ktR(a), ktR(b), ktR(c)}, irtest.Int("axis", 1))
	ktSame(t, "Concat axis 1", got, ktF32(ktS(2, 6), 1, 2, 5, 7, 8, 9, 3, 4, 6, 10, 11, 12))
	got = ktRun1(t, "Concat", []ktIn{ktR(a), ktR(ktF32(ktS(1, 2), 9, 9))}, irtest.Int("axis", -2))
	ktSame(t, "Concat axis -2", got, ktF32(ktS(3, 2), 1, 2, 3, 4, 9, 9))
	got = ktRun1(t, "Concat", []ktIn{ktR(ktI64(ktS(2), 1, 2)), ktR(ktI64(ktS(0))), ktR(ktI64(ktS(1), 3))}, irtest.Int("axis", 0))
	ktSame(t, "Concat i64 with empty", got, ktI64(ktS(3), 1, 2, 3))
}

func TestSplit(t *testing.T) {
	x := ktF32(ktS(2, 5), ktSeq(10, 1, 0)...)
	check := func(name string, got []*Tensor, want ...*Tensor) {
		t.Helper()
		for i := range want {
			ktSame(t, fmt.Sprintf("%s output %d", name, i), got[i], want[i])
		}
	}
	got := ktRun(t, 18, "Split", []ktIn{ktR(x), ktC(ktI64(ktS(2), 2, 3))}, 2, irtest.Int("axis", 1))
	check("Split input", got, ktF32(ktS(2, 2), 0, 1, 5, 6), ktF32(ktS(2, 3), 2, 3, 4, 7, 8, 9))
	got = ktRun(t, 11, "Split", []ktIn{ktR(x)}, 3, irtest.Int("axis", -1), irtest.Ints("split", 1, 0, 4))
	check("Split attr", got, ktF32(ktS(2, 1), 0, 5), ktF32(ktS(2, 0)), ktF32(ktS(2, 4), 1, 2, 3, 4, 6, 7, 8, 9))
	got = ktRun(t, 18, "Split", []ktIn{ktR(x)}, 3, irtest.Int("axis", 1), irtest.Int("num_outputs", 3))
	check("Split num_outputs", got, ktF32(ktS(2, 2), 0, 1, 5, 6), ktF32(ktS(2, 2), 2, 3, 7, 8), ktF32(ktS(2, 1), 4, 9))
	got = ktRun(t, 13, "Split", []ktIn{ktR(x)}, 2)
	check("Split even axis 0", got, ktF32(ktS(1, 5), 0, 1, 2, 3, 4), ktF32(ktS(1, 5), 5, 6, 7, 8, 9))
	got = ktRun(t, 18, "Split", []ktIn{ktR(ktI32(ktS(3), 1, 2, 3))}, 3)
	check("Split i32", got, ktI32(ktS(1), 1), ktI32(ktS(1), 2), ktI32(ktS(1), 3))
}
