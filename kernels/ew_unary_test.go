package kernels

import (
	"math"
	"strings"
	"testing"

	"github.com/tsplit/tsplit/ir"
	"github.com/tsplit/tsplit/ir/irtest"
)

// Unary ops against reference formulas written out here from the ONNX
// operator definitions.
func TestUnaryFloat(t *testing.T) {
	any := []float64{-3.5, -1.25, -0.5, -0.1, 0, 0.1, 0.5, 1, 2.75, 6}
	pos := []float64{0.05, 0.3, 0.5, 1, 2, 7.5, 100}
	unit := []float64{-0.95, -0.5, -0.1, 0, 0.3, 0.7, 0.99}
	ge1 := []float64{1, 1.5, 3, 10}
	cases := []struct {
		op    string
		in    []float64
		f     func(x float64) float64
		attrs []ir.Attr
	}{
		{"Relu", any, func(x float64) float64 {
			if x > 0 {
				return x
			}
			return 0
		}, nil},
		{"Neg", any, func(x float64) float64 { return -x }, nil},
		{"Abs", any, func(x float64) float64 {
			if x < 0 {
				return -x
			}
			return x
		}, nil},
		{"Sign", any, func(x float64) float64 {
			if x > 0 {
				return 1
			} else if x < 0 {
				return -1
			}
			return 0
		}, nil},
		{"Sigmoid", any, func(x float64) float64 { return 1 / (1 + math.Exp(-x)) }, nil},
		{"Tanh", any, func(x float64) float64 { return (math.Exp(2*x) - 1) / (math.Exp(2*x) + 1) }, nil},
		{"Erf", any, math.Erf, nil},
		{"Sqrt", pos, math.Sqrt, nil},
		{"Exp", any, math.Exp, nil},
		{"Log", pos, math.Log, nil},
		{"Reciprocal", pos, func(x float64) float64 { return 1 / x }, nil},
		{"Floor", any, math.Floor, nil},
		{"Ceil", any, math.Ceil, nil},
		{"Round", []float64{-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 2.4, -2.6}, func(x float64) float64 {
			// half to even
			f := math.Floor(x)
			switch d := x - f; {
			case d > 0.5:
				return f + 1
			case d < 0.5:
				return f
			case math.Mod(f, 2) != 0:
				return f + 1
			}
			return f
		}, nil},
		{"Sin", any, math.Sin, nil},
		{"Cos", any, math.Cos, nil},
		{"Tan", unit, math.Tan, nil},
		{"Asin", unit, math.Asin, nil},
		{"Acos", unit, math.Acos, nil},
		{"Atan", any, math.Atan, nil},
		{"Sinh", any, func(x float64) float64 { return (math.Exp(x) - math.Exp(-x)) / 2 }, nil},
		{"Cosh", any, func(x float64) float64 { return (math.Exp(x) + math.Exp(-x)) / 2 }, nil},
		{"Asinh", any, func(x float64) float64 { return math.Log(x + math.Sqrt(x*x+1)) }, nil},
		{"Acosh", ge1, func(x float64) float64 { return math.Log(x + math.Sqrt(x*x-1)) }, nil},
		{"Atanh", unit, func(x float64) float64 { return 0.5 * math.Log((1+x)/(1-x)) }, nil},
		{"Softplus", any, func(x float64) float64 { return math.Log(1 + math.Exp(x)) }, nil},
		{"Softsign", any, func(x float64) float64 { return x / (1 + math.Abs(x)) }, nil},
		{"HardSwish", any, func(x float64) float64 { return x * math.Max(0, math.Min(1, x/6+0.5)) }, nil},
		{"Mish", any, func(x float64) float64 { return x * math.Tanh(math.Log(1+math.Exp(x))) }, nil},
		{"LeakyRelu", any, func(x float64) float64 { return math.Max(x, 0) + 0.01*math.Min(x, 0) }, nil},
		{"LeakyRelu", any, func(x float64) float64 { return math.Max(x, 0) + 0.3*math.Min(x, 0) }, []ir.Attr{irtest.Float("alpha", 0.3)}},
		{"Gelu", any, func(x float64) float64 { return x * 0.5 * (1 + math.Erf(x/math.Sqrt(2))) }, nil},
		{"Gelu", any, func(x float64) float64 {
			return 0.5 * x * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(x+0.044715*math.Pow(x, 3))))
		}, []ir.Attr{irtest.String("approximate", "tanh")}},
		{"HardSigmoid", any, func(x float64) float64 { return math.Max(0, math.Min(1, 0.2*x+0.5)) }, nil},
		{"HardSigmoid", any, func(x float64) float64 { return math.Max(0, math.Min(1, 0.5*x+0.1)) },
			[]ir.Attr{irtest.Float("alpha", 0.5), irtest.Float("beta", 0.1)}},
		{"Elu", any, func(x float64) float64 {
			if x >= 0 {
				return x
			}
			return 1.5 * (math.Exp(x) - 1)
		}, []ir.Attr{irtest.Float("alpha", 1.5)}},
		{"Celu", any, func(x float64) float64 { return math.Max(0, x) + math.Min(0, 2*(math.Exp(x/2)-1)) },
			[]ir.Attr{irtest.Float("alpha", 2)}},
		{"Shrink", any, func(x float64) float64 { // lambd 0.5, bias 0: 0 on [−0.5, 0.5]
			if math.Abs(x) > 0.5 {
				return x
			}
			return 0
		}, nil},
		{"Shrink", any, func(x float64) float64 {
			switch {
			case x < -1.25:
				return x + 0.75
			case x > 1.25:
				return x - 0.75
			}
			return 0
		}, []ir.Attr{irtest.Float("lambd", 1.25), irtest.Float("bias", 0.75)}},
		{"ThresholdedRelu", any, func(x float64) float64 {
			if x > 1 {
				return x
			}
			return 0
		}, nil},
		{"Selu", any, func(x float64) float64 {
			const a, g = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946
			if x > 0 {
				return g * x
			}
			return g * (a*math.Exp(x) - a)
		}, nil},
	}
	for _, tc := range cases {
		in32 := make([]float32, len(tc.in))
		want := make([]float64, len(tc.in))
		for i, x := range tc.in {
			in32[i] = float32(x)
			want[i] = tc.f(float64(in32[i]))
		}
		shape := ktS(int64(len(in32)))
		got := ktRun1(t, tc.op, []ktIn{ktR(ktF32(shape, in32...))}, tc.attrs...)
		ktClose(t, tc.op+" f32", got, shape, want, 2e-6)
		got = ktRun1(t, tc.op, []ktIn{ktR(ktF64(shape, tc.in...))}, tc.attrs...)
		want64 := make([]float64, len(tc.in))
		for i, x := range tc.in {
			want64[i] = tc.f(x)
		}
		ktClose(t, tc.op+" f64", got, shape, want64, 1e-7) // attributes are float32
	}
}

// Hand-computed values of a few activations.
func TestUnaryHandValues(t *testing.T) {
	x := ktF32(ktS(2, 3), -6, -3, 0, 1, 3, 6)
	for _, tc := range []struct {
		op   string
		want []float64
	}{
		{"HardSwish", []float64{0, 0, 0, 2.0 / 3, 3, 6}},
		{"HardSigmoid", []float64{0, 0, 0.5, 0.7, 1, 1}},
		{"Relu", []float64{0, 0, 0, 1, 3, 6}},
		{"Sign", []float64{-1, -1, 0, 1, 1, 1}},
		{"Softsign", []float64{-6.0 / 7, -0.75, 0, 0.5, 0.75, 6.0 / 7}},
		{"ThresholdedRelu", []float64{0, 0, 0, 0, 3, 6}},
	} {
		ktClose(t, tc.op, ktRun1(t, tc.op, []ktIn{ktR(x)}), ktS(2, 3), tc.want, 1e-6)
	}
}

func TestUnarySignedInts(t *testing.T) {
	in := []int64{-7, -1, 0, 3, math.MaxInt32}
	for _, tc := range []struct {
		op   string
		want []int64
	}{
		{"Neg", []int64{7, 1, 0, -3, -math.MaxInt32}},
		{"Abs", []int64{7, 1, 0, 3, math.MaxInt32}},
		{"Relu", []int64{0, 0, 0, 3, math.MaxInt32}},
		{"Sign", []int64{-1, -1, 0, 1, 1}},
	} {
		got := ktRun1(t, tc.op, []ktIn{ktR(ktI64(ktS(5), in...))})
		ktSame(t, tc.op+" i64", got, ktI64(ktS(5), tc.want...))
		in32 := make([]int32, len(in))
		want32 := make([]int32, len(in))
		for i := range in {
			in32[i], want32[i] = int32(in[i]), int32(tc.want[i])
		}
		got = ktRun1(t, tc.op, []ktIn{ktR(ktI32(ktS(5), in32...))})
		ktSame(t, tc.op+" i32", got, ktI32(ktS(5), want32...))
	}
}

func TestUnaryErrors(t *testing.T) {
	// A float-only op on int64 is refused by the DTypes check.
	err := ktErr(t, 18, "Sigmoid", []ktIn{ktR(ktI64(ktS(2), 1, 2))}, 1)
	if !strings.Contains(err.Error(), "does not support element type") {
		t.Errorf("Sigmoid on int64: %v", err)
	}
	ktErr(t, 20, "Gelu", []ktIn{ktR(ktF32(ktS(1), 1))}, 1, irtest.String("approximate", "erf"))
}

// A large input takes the parallel path; every element must still match.
func TestUnaryParallel(t *testing.T) {
	n := 1<<16 + 7
	x := ktRand(n, 3)
	want := make([]float64, n)
	wantR := make([]float64, n)
	for i, v := range x {
		want[i] = 1 / (1 + math.Exp(-float64(v)))
		wantR[i] = math.Max(float64(v), 0)
	}
	ktClose(t, "Sigmoid", ktRun1(t, "Sigmoid", []ktIn{ktR(ktF32(ktS(int64(n)), x...))}), ktS(int64(n)), want, 2e-6)
	ktClose(t, "Relu", ktRun1(t, "Relu", []ktIn{ktR(ktF32(ktS(int64(n)), x...))}), ktS(int64(n)), wantR, 0)
}

func TestNotIsNaNIsInf(t *testing.T) {
	b := ktBool(ktS(4), true, false, false, true)
	ktSame(t, "Not", ktRun1(t, "Not", []ktIn{ktR(b)}), ktBool(ktS(4), false, true, true, false))

	inf := float32(math.Inf(1))
	nan := float32(math.NaN())
	x := ktF32(ktS(5), 1, nan, inf, -inf, 0)
	ktSame(t, "IsNaN", ktRun1(t, "IsNaN", []ktIn{ktR(x)}), ktBool(ktS(5), false, true, false, false, false))
	ktSame(t, "IsInf", ktRun1(t, "IsInf", []ktIn{ktR(x)}), ktBool(ktS(5), false, false, true, true, false))
	ktSame(t, "IsInf pos", ktRun1(t, "IsInf", []ktIn{ktR(x)}, irtest.Int("detect_negative", 0)), ktBool(ktS(5), false, false, true, false, false))
	ktSame(t, "IsInf neg", ktRun1(t, "IsInf", []ktIn{ktR(x)}, irtest.Int("detect_positive", 0)), ktBool(ktS(5), false, false, false, true, false))
}

func TestPRelu(t *testing.T) {
	// slope [3] broadcasts along the last axis of [2,3]; slope [2,1] along rows.
	x := ktF32(ktS(2, 3), -1, 2, -3, 4, -5, -6)
	got := ktRun1(t, "PRelu", []ktIn{ktR(x), ktR(ktF32(ktS(3), 0.1, 0.2, 0.3))})
	ktClose(t, "PRelu [3]", got, ktS(2, 3), []float64{-0.1, 2, -0.9, 4, -1, -1.8}, 1e-6)
	got = ktRun1(t, "PRelu", []ktIn{ktR(x), ktR(ktF32(ktS(2, 1), 0.5, 2))})
	ktClose(t, "PRelu [2,1]", got, ktS(2, 3), []float64{-0.5, 2, -1.5, 4, -10, -12}, 1e-6)
	got = ktRun1(t, "PRelu", []ktIn{ktR(ktI64(ktS(3), -4, 0, 5)), ktR(ktI64(ktS(1), 3))})
	ktSame(t, "PRelu i64", got, ktI64(ktS(3), -12, 0, 5))
}

func TestClip(t *testing.T) {
	x := ktF32(ktS(6), -3, -1, 0, 0.5, 2, 9)
	lo, hi := ktF32(nil, -1.5), ktF32(nil, 1)
	cases := []struct {
		name  string
		opset int64
		ins   []ktIn
		attrs []ir.Attr
		want  []float64
	}{
		{"min max", 13, []ktIn{ktR(x), ktR(lo), ktR(hi)}, nil, []float64{-1.5, -1, 0, 0.5, 1, 1}},
		{"min only", 13, []ktIn{ktR(x), ktR(lo)}, nil, []float64{-1.5, -1, 0, 0.5, 2, 9}},
		{"max only", 13, []ktIn{ktR(x), {}, ktR(hi)}, nil, []float64{-3, -1, 0, 0.5, 1, 1}},
		{"none", 13, []ktIn{ktR(x)}, nil, []float64{-3, -1, 0, 0.5, 2, 9}},
		{"opset 6 attrs", 6, []ktIn{ktR(x)}, []ir.Attr{irtest.Float("min", -0.5), irtest.Float("max", 0.25)}, []float64{-0.5, -0.5, 0, 0.25, 0.25, 0.25}},
		{"min > max gives max", 13, []ktIn{ktR(x), ktR(ktF32(nil, 2)), ktR(ktF32(nil, 1))}, nil, []float64{1, 1, 1, 1, 1, 1}},
	}
	for _, tc := range cases {
		got := ktRun(t, tc.opset, "Clip", tc.ins, 1, tc.attrs...)[0]
		ktClose(t, "Clip "+tc.name, got, ktS(6), tc.want, 0)
	}
	got := ktRun1(t, "Clip", []ktIn{ktR(ktI64(ktS(4), -9, 3, 7, 100)), ktR(ktI64(nil, 0)), ktR(ktI64(nil, 10))})
	ktSame(t, "Clip i64", got, ktI64(ktS(4), 0, 3, 7, 10))
	got = ktRun1(t, "Clip", []ktIn{ktR(ktI32(ktS(3), -9, 3, 70)), {}, ktR(ktI32(nil, 10))})
	ktSame(t, "Clip i32 max only", got, ktI32(ktS(3), -9, 3, 10))
}
