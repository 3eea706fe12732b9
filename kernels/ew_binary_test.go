package kernels

import (
	"fmt"
	"math"
	"testing"

	"github.com/tsplit/tsplit/ir"
	"github.com/tsplit/tsplit/ir/irtest"
)

// ktBcast is a naive numpy broadcast: the output shape and, for an
// output coordinate, the flat index into each input.
func ktBcast(shapes ...[]int64) ([]int64, func(in int, c []int64) int) {
	r := 0
	for _, s := range shapes {
		r = max(r, len(s))
	}
	out := make([]int64, r)
	for i := range out {
		out[i] = 1
	}
	for _, s := range shapes {
		for i, d := range s {
			j := r - len(s) + i
			if d != 1 {
				out[j] = d
			}
		}
	}
	return out, func(in int, c []int64) int {
		s := shapes[in]
		f := int64(0)
		for i, d := range s {
			x := c[r-len(s)+i]
			if d == 1 {
				x = 0
			}
			f = f*d + x
		}
		return int(f)
	}
}

var ktBinShapes = [][2][]int64{
	{{2, 3}, {2, 3}},
	{{2, 3}, {}},
	{{}, {4}},
	{{2, 3}, {3}},
	{{2, 3}, {2, 1}},
	{{2, 1, 4}, {3, 1}},
	{{1, 3, 1}, {2, 1, 5}},
	{{4, 1, 2, 1}, {1, 3, 1, 2}},
	{{0, 3}, {3}},
}

func TestBinaryArithFloat(t *testing.T) {
	ops := map[string]func(a, b float64) float64{
		"Add": func(a, b float64) float64 { return a + b },
		"Sub": func(a, b float64) float64 { return a - b },
		"Mul": func(a, b float64) float64 { return a * b },
		"Div": func(a, b float64) float64 { return a / b },
		"Pow": func(a, b float64) float64 { return math.Pow(math.Abs(a), b) },
		"Max": math.Max,
		"Min": math.Min,
		"Sum": func(a, b float64) float64 { return a + b },
		"Mean": func(a, b float64) float64 {
			return (a + b) / 2
		},
	}
	for op, f := range ops {
		for k, sh := range ktBinShapes {
			out, idx := ktBcast(sh[0], sh[1])
			a := ktRand(ktNumel(sh[0]), uint64(3*k+1))
			b := ktRand(ktNumel(sh[1]), uint64(3*k+2))
			if op == "Pow" {
				for i := range a {
					a[i] = float32(math.Abs(float64(a[i])))
				}
			}
			for i := range b {
				if b[i] == 0 {
					b[i] = 0.5
				}
			}
			want := make([]float64, ktNumel(out))
			ktCoords(out, func(c []int64) {
				want[ktFlat(out, c)] = float64(float32(f(float64(a[idx(0, c)]), float64(b[idx(1, c)]))))
			})
			got := ktRun1(t, op, []ktIn{ktR(ktF32(sh[0], a...)), ktR(ktF32(sh[1], b...))})
			ktClose(t, fmt.Sprintf("%s %v %v", op, sh[0], sh[1]), got, out, want, 1e-6)
		}
	}
}

func TestBinaryArithInt(t *testing.T) {
	a := ktI64(ktS(2, 3), -7, 7, -7, 7, 100, math.MinInt64)
	b := ktI64(ktS(3), 2, -2, 3)
	cases := []struct {
		op    string
		attrs []ir.Attr
		want  []int64
	}{
		{"Add", nil, []int64{-5, 5, -4, 9, 98, math.MinInt64 + 3}},
		{"Sub", nil, []int64{-9, 9, -10, 5, 102, math.MaxInt64 - 2}},
		{"Mul", nil, []int64{-14, -14, -21, 14, -200, math.MinInt64}},
		{"Div", nil, []int64{-3, -3, -2, 3, -50, -3074457345618258602}},
		// fmod=0: the result has the divisor's sign (Python %).
		{"Mod", nil, []int64{1, -1, 2, 1, 0, 1}},
		// fmod=1: C remainder, the dividend's sign.
		{"Mod", []ir.Attr{irtest.Int("fmod", 1)}, []int64{-1, 1, -1, 1, 0, -2}},
		{"Pow", nil, []int64{49, 0, -343, 49, 0, 0}},
		{"Max", nil, []int64{2, 7, 3, 7, 100, 3}},
		{"Min", nil, []int64{-7, -2, -7, 2, -2, math.MinInt64}},
	}
	for _, tc := range cases {
		got := ktRun1(t, tc.op, []ktIn{ktR(a), ktR(b)}, tc.attrs...)
		if tc.op == "Pow" {
			// 7^-2 truncates to 0; MinInt64^3 is out of range: skip that one.
			got.Data = got.Data[:40]
			got.Shape = ir.Shape{5}
			ktSame(t, "Pow i64", got, ktI64(ktS(5), tc.want[:5]...))
			continue
		}
		ktSame(t, tc.op+fmt.Sprint(tc.attrs), got, ktI64(ktS(2, 3), tc.want...))
	}
	got := ktRun1(t, "Div", []ktIn{ktR(ktI32(ktS(3), 9, -9, 1)), ktR(ktI32(nil, 4))})
	ktSame(t, "Div i32", got, ktI32(ktS(3), 2, -2, 0))
	got = ktRun1(t, "Mod", []ktIn{ktR(ktU8(ktS(3), 9, 200, 1)), ktR(ktU8(nil, 7))})
	ktSame(t, "Mod u8", got, ktU8(ktS(3), 2, 4, 1))

	// Integer division by zero is an error, not a panic.
	ktErr(t, 18, "Div", []ktIn{ktR(ktI64(ktS(2), 1, 2)), ktR(ktI64(ktS(2), 1, 0))}, 1)
	ktErr(t, 18, "Mod", []ktIn{ktR(ktI32(ktS(2), 1, 2)), ktR(ktI32(nil, 0))}, 1)
}

func TestFloatModAndPowMixed(t *testing.T) {
	got := ktRun1(t, "Mod", []ktIn{ktR(ktF32(ktS(4), -7.5, 7.5, 5, -1)), ktR(ktF32(ktS(1), 2))}, irtest.Int("fmod", 1))
	ktClose(t, "fmod", got, ktS(4), []float64{-1.5, 1.5, 1, -1}, 0)
	// Exponents of another type than the base.
	got = ktRun1(t, "Pow", []ktIn{ktR(ktF32(ktS(3), 2, -3, 0.5)), ktR(ktI64(ktS(3), 3, 2, -1))})
	ktClose(t, "Pow f32^i64", got, ktS(3), []float64{8, 9, 2}, 0)
	got = ktRun1(t, "Pow", []ktIn{ktR(ktI64(ktS(3), 2, 9, 4)), ktR(ktF32(ktS(1), 0.5))})
	ktSame(t, "Pow i64^f32", got, ktI64(ktS(3), 1, 3, 2))
	got = ktRun1(t, "Pow", []ktIn{ktR(ktF32(ktS(3), 1.5, -2, 3)), ktR(ktF32(nil, 2))})
	ktClose(t, "Pow square", got, ktS(3), []float64{2.25, 4, 9}, 0)
}

func TestCompareAndLogic(t *testing.T) {
	a := ktF32(ktS(2, 3), 1, 2, 3, 4, 5, 6)
	b := ktF32(ktS(3), 2, 2, 7)
	for op, want := range map[string][]bool{
		"Equal":          {false, true, false, false, false, false},
		"Less":           {true, false, true, false, false, true},
		"Greater":        {false, false, false, true, true, false},
		"LessOrEqual":    {true, true, true, false, false, true},
		"GreaterOrEqual": {false, true, false, true, true, false},
	} {
		ktSame(t, op, ktRun1(t, op, []ktIn{ktR(a), ktR(b)}), ktBool(ktS(2, 3), want...))
		ai := ktI64(ktS(2, 3), 1, 2, 3, 4, 5, 6)
		bi := ktI64(ktS(3), 2, 2, 7)
		ktSame(t, op+" i64", ktRun1(t, op, []ktIn{ktR(ai), ktR(bi)}), ktBool(ktS(2, 3), want...))
	}
	x := ktBool(ktS(2, 2), false, false, true, true)
	y := ktBool(ktS(2), false, true)
	for op, want := range map[string][]bool{
		"And":   {false, false, false, true},
		"Or":    {false, true, true, true},
		"Xor":   {false, true, true, false},
		"Equal": {true, false, false, true},
	} {
		ktSame(t, op, ktRun1(t, op, []ktIn{ktR(x), ktR(y)}), ktBool(ktS(2, 2), want...))
	}
	nan := float32(math.NaN())
	got := ktRun1(t, "Equal", []ktIn{ktR(ktF32(ktS(2), nan, 1)), ktR(ktF32(ktS(2), nan, 1))})
	ktSame(t, "Equal NaN", got, ktBool(ktS(2), false, true))
}

func TestVariadic(t *testing.T) {
	a := ktF32(ktS(2, 3), 1, 2, 3, 4, 5, 6)
	b := ktF32(ktS(3), 10, -20, 30)
	c := ktF32(ktS(2, 1), 100, -100)
	ins := []ktIn{ktR(a), ktR(b), ktR(c)}
	ktClose(t, "Sum", ktRun1(t, "Sum", ins), ktS(2, 3), []float64{111, 82, 133, -86, -115, -64}, 1e-6)
	ktClose(t, "Mean", ktRun1(t, "Mean", ins), ktS(2, 3), []float64{37, 82.0 / 3, 133.0 / 3, -86.0 / 3, -115.0 / 3, -64.0 / 3}, 1e-6)
	ktClose(t, "Max", ktRun1(t, "Max", ins), ktS(2, 3), []float64{100, 100, 100, 10, 5, 30}, 0)
	ktClose(t, "Min", ktRun1(t, "Min", ins), ktS(2, 3), []float64{1, -20, 3, -100, -100, -100}, 0)
	// One input: a copy.
	ktSame(t, "Sum of one", ktRun1(t, "Sum", []ktIn{ktR(b)}), b)
	// The first input may be the one broadcast.
	got := ktRun1(t, "Max", []ktIn{ktR(ktI64(nil, 3)), ktR(ktI64(ktS(4), 1, 5, 2, 9))})
	ktSame(t, "Max i64", got, ktI64(ktS(4), 3, 5, 3, 9))
}

func TestWhere(t *testing.T) {
	cond := ktBool(ktS(2, 1), true, false)
	x := ktF32(ktS(1, 3), 1, 2, 3)
	y := ktF32(nil, -1)
	got := ktRun1(t, "Where", []ktIn{ktR(cond), ktR(x), ktR(y)})
	ktClose(t, "Where", got, ktS(2, 3), []float64{1, 2, 3, -1, -1, -1}, 0)
	got = ktRun1(t, "Where", []ktIn{ktR(ktBool(ktS(3), true, false, true)), ktR(ktI64(ktS(3), 1, 2, 3)), ktR(ktI64(ktS(2, 1), 7, 8))})
	ktSame(t, "Where i64", got, ktI64(ktS(2, 3), 1, 7, 3, 1, 8, 3))
	got = ktRun1(t, "Where", []ktIn{ktR(ktBool(ktS(2), true, false)), ktR(ktBool(ktS(2), false, false)), ktR(ktBool(ktS(2), true, true))})
	ktSame(t, "Where bool", got, ktBool(ktS(2), false, true))
}

// Large broadcasts take the parallel path (and runs split across
// chunks); compare with the naive reference.
func TestBinaryParallel(t *testing.T) {
	for _, sh := range [][2][]int64{{{300, 257}, {257}}, {{300, 257}, {300, 1}}, {{7, 1, 4099}, {1, 5, 1}}} {
		out, idx := ktBcast(sh[0], sh[1])
		a := ktRand(ktNumel(sh[0]), 11)
		b := ktRand(ktNumel(sh[1]), 12)
		want := make([]float64, ktNumel(out))
		ktCoords(out, func(c []int64) {
			want[ktFlat(out, c)] = float64(a[idx(0, c)] * b[idx(1, c)])
		})
		got := ktRun1(t, "Mul", []ktIn{ktR(ktF32(sh[0], a...)), ktR(ktF32(sh[1], b...))})
		ktClose(t, fmt.Sprintf("Mul %v %v", sh[0], sh[1]), got, out, want, 0)
	}
}
