package kernels

import (
	"fmt"
	"math"
	"testing"

	"github.com/tsplit/tsplit/ir"
	"github.com/tsplit/tsplit/ir/irtest"
)

// ktReduceRef reduces x (shape) over the axes (normalised, none: all)
// with a naive loop over coordinates, returning the keepdims shape, the
// output shape for keepdims and the values.
func ktReduceRef(op string, shape []int64, x []float64, axes []int64, keep bool) ([]int64, []float64) {
	r := len(shape)
	red := make([]bool, r)
	for _, a := range axes {
		red[(a+int64(r))%int64(r)] = true
	}
	if len(axes) == 0 {
		for i := range red {
			red[i] = true
		}
	}
	kept := make([]int64, r)
	var out []int64
	for d, s := range shape {
		kept[d] = s
		if red[d] {
			kept[d] = 1
			if keep {
				out = append(out, 1)
			}
		} else {
			out = append(out, s)
		}
	}
	groups := make([][]float64, ktNumel(kept))
	ktCoords(shape, func(c []int64) {
		k := make([]int64, r)
		for d := range c {
			if !red[d] {
				k[d] = c[d]
			}
		}
		j := ktFlat(kept, k)
		groups[j] = append(groups[j], x[ktFlat(shape, c)])
	})
	vals := make([]float64, len(groups))
	for j, g := range groups {
		var v float64
		switch op {
		case "ReduceSum":
			for _, e := range g {
				v += e
			}
		case "ReduceMean":
			for _, e := range g {
				v += e
			}
			v /= float64(len(g))
		case "ReduceMax":
			v = math.Inf(-1)
			for _, e := range g {
				v = math.Max(v, e)
			}
		case "ReduceMin":
			v = math.Inf(1)
			for _, e := range g {
				v = math.Min(v, e)
			}
		case "ReduceProd":
			v = 1
			for _, e := range g {
				v *= e
			}
		case "ReduceL1":
			for _, e := range g {
				v += math.Abs(e)
			}
		case "ReduceL2":
			for _, e := range g {
				v += e * e
			}
			v = math.Sqrt(v)
		case "ReduceSumSquare":
			for _, e := range g {
				v += e * e
			}
		case "ReduceLogSum":
			for _, e := range g {
				v += e
			}
			v = math.Log(v)
		case "ReduceLogSumExp":
			for _, e := range g {
				v += math.Exp(e)
			}
			v = math.Log(v)
		}
		vals[j] = v
	}
	if out == nil {
		out = []int64{}
	}
	return out, vals
}

var ktReduceOps = []string{"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd",
	"ReduceL1", "ReduceL2", "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp"}

func TestReduceFloat(t *testing.T) {
	shape := ktS(2, 3, 4)
	x := ktRand(24, 5)
	for i := range x {
		x[i] = float32(math.Abs(float64(x[i]))) + 0.25 // positive for ReduceLogSum
	}
	x64 := make([]float64, len(x))
	for i, v := range x {
		x64[i] = float64(v)
	}
	axesSets := [][]int64{nil, {0}, {1}, {2}, {-1}, {0, 2}, {-3, 1}, {1, 2}, {2, 0, 1}}
	for _, op := range ktReduceOps {
		for _, axes := range axesSets {
			for _, keep := range []int64{0, 1} {
				name := fmt.Sprintf("%s axes=%v keepdims=%d", op, axes, keep)
				outShape, want := ktReduceRef(op, shape, x64, axes, keep == 1)
				// axes as input (opset 18)
				ins := []ktIn{ktR(ktF32(shape, x...))}
				if axes != nil {
					ins = append(ins, ktC(ktI64(ktS(int64(len(axes))), axes...)))
				}
				got := ktRun(t, 18, op, ins, 1, irtest.Int("keepdims", keep))[0]
				ktClose(t, name+" (input)", got, outShape, want, 1e-6)
				// axes as attribute (opset 11)
				attrs := []ir.Attr{irtest.Int("keepdims", keep)}
				if axes != nil {
					attrs = append(attrs, irtest.Ints("axes", axes...))
				}
				got = ktRun(t, 11, op, []ktIn{ktR(ktF32(shape, x...))}, 1, attrs...)[0]
				ktClose(t, name+" (attribute)", got, outShape, want, 1e-6)
			}
		}
	}
	// float64
	got := ktRun1(t, "ReduceSum", []ktIn{ktR(ktF64(ktS(2, 2), 1, 2, 3, 4)), ktC(ktI64(ktS(1), 1))})
	ktSame(t, "ReduceSum f64", got, ktF64(ktS(2, 1), 3, 7))
}

func TestReduceNoop(t *testing.T) {
	x := ktF32(ktS(2, 2), 1, 2, 3, 4)
	// No axes and noop_with_empty_axes=1: the identity.
	got := ktRun1(t, "ReduceSum", []ktIn{ktR(x)}, irtest.Int("noop_with_empty_axes", 1))
	ktSame(t, "noop", got, x)
	got = ktRun1(t, "ReduceMax", []ktIn{ktR(x), ktC(ktI64(ktS(0)))}, irtest.Int("noop_with_empty_axes", 1))
	ktSame(t, "noop empty input", got, x)
	// An empty axes input otherwise reduces everything.
	got = ktRun1(t, "ReduceSum", []ktIn{ktR(x), ktC(ktI64(ktS(0)))}, irtest.Int("keepdims", 0))
	ktSame(t, "empty axes", got, ktF32(ktS(), 10))
}

func TestReduceInts(t *testing.T) {
	x := ktI64(ktS(2, 3), 1, -2, 3, 4, 5, -6)
	for _, tc := range []struct {
		op   string
		want []int64
	}{
		{"ReduceSum", []int64{2, 3}},
		{"ReduceMean", []int64{0, 1}},
		{"ReduceMax", []int64{3, 5}},
		{"ReduceMin", []int64{-2, -6}},
		{"ReduceProd", []int64{-6, -120}},
		{"ReduceL1", []int64{6, 15}},
		{"ReduceSumSquare", []int64{14, 77}},
		{"ReduceL2", []int64{3, 8}},
	} {
		got := ktRun1(t, tc.op, []ktIn{ktR(x), ktC(ktI64(ktS(1), 1))}, irtest.Int("keepdims", 0))
		ktSame(t, tc.op+" i64", got, ktI64(ktS(2), tc.want...))
	}
	// Exact beyond float64's 53 bits.
	big := ktI64(ktS(2), 1<<60+1, 1<<60+2)
	ktSame(t, "ReduceSum big", ktRun1(t, "ReduceSum", []ktIn{ktR(big)}, irtest.Int("keepdims", 0)), ktI64(ktS(), 1<<61+3))
	got := ktRun1(t, "ReduceMax", []ktIn{ktR(ktI32(ktS(2, 2), -5, -9, -7, -1)), ktC(ktI64(ktS(1), 0))})
	ktSame(t, "ReduceMax i32", got, ktI32(ktS(1, 2), -5, -1))
}

// Reductions over an empty set give the spec's identities.
func TestReduceEmpty(t *testing.T) {
	x := ktF32(ktS(2, 0, 3))
	inf := math.Inf(1)
	for op, want := range map[string]float64{
		"ReduceSum": 0, "ReduceProd": 1, "ReduceMax": -inf, "ReduceMin": inf, "ReduceMean": math.NaN(),
		"ReduceL1": 0, "ReduceL2": 0, "ReduceSumSquare": 0, "ReduceLogSum": -inf, "ReduceLogSumExp": -inf,
	} {
		got := ktRun1(t, op, []ktIn{ktR(x), ktC(ktI64(ktS(1), 1))}, irtest.Int("keepdims", 0))
		ktClose(t, op+" empty", got, ktS(2, 3), []float64{want, want, want, want, want, want}, 0)
	}
	// Nothing to reduce into: an empty output.
	got := ktRun1(t, "ReduceSum", []ktIn{ktR(x), ktC(ktI64(ktS(1), 2))})
	ktClose(t, "ReduceSum empty out", got, ktS(2, 0, 1), nil, 0)
}

// ReduceLogSumExp must not overflow where exp does.
func TestReduceLogSumExpStable(t *testing.T) {
	got := ktRun1(t, "ReduceLogSumExp", []ktIn{ktR(ktF32(ktS(2, 2), 1000, 1000, -1000, -1001)), ktC(ktI64(ktS(1), -1))}, irtest.Int("keepdims", 0))
	ktClose(t, "LSE", got, ktS(2), []float64{1000 + math.Log(2), -1000 + math.Log(1+math.Exp(-1))}, 1e-6)
}

// Large reductions exercise both unit kinds (a run per output, and
// vectors of outputs) on the parallel path.
func TestReduceParallel(t *testing.T) {
	for _, tc := range []struct {
		shape []int64
		axes  []int64
	}{
		{ktS(600, 700), ktS(0)},
		{ktS(600, 700), ktS(1)},
		{ktS(20, 30, 40, 5), ktS(0, 2)},
		{ktS(20, 30, 40, 5), ktS(1, 3)},
		{ktS(3, 300, 333), ktS(0, 1)},
	} {
		n := ktNumel(tc.shape)
		x := ktRand(n, 9)
		x64 := make([]float64, n)
		for i, v := range x {
			x64[i] = float64(v)
		}
		for _, op := range []string{"ReduceSum", "ReduceMax", "ReduceLogSumExp"} {
			out, want := ktReduceRef(op, tc.shape, x64, tc.axes, true)
			got := ktRun1(t, op, []ktIn{ktR(ktF32(tc.shape, x...)), ktC(ktI64(ktS(int64(len(tc.axes))), tc.axes...))})
			ktClose(t, fmt.Sprintf("%s %v axes %v", op, tc.shape, tc.axes), got, out, want, 1e-5)
		}
	}
}
