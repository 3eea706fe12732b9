package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tsplit/tsplit/internal/onnxtest"
	"github.com/tsplit/tsplit/ir"
)

// refSoftmax normalises x viewed as (outer, n, inner) along n in float64.
func refSoftmax(x []float32, outer, n, inner int, log bool) []float64 {
	y := make([]float64, len(x))
	for o := 0; o < outer; o++ {
		for i := 0; i < inner; i++ {
			mx := math.Inf(-1)
			for j := 0; j < n; j++ {
				mx = math.Max(mx, float64(x[(o*n+j)*inner+i]))
			}
			var s float64
			for j := 0; j < n; j++ {
				s += math.Exp(float64(x[(o*n+j)*inner+i]) - mx)
			}
			for j := 0; j < n; j++ {
				k := (o*n+j)*inner + i
				if log {
					y[k] = float64(x[k]) - mx - math.Log(s)
				} else {
					y[k] = math.Exp(float64(x[k])-mx) / s
				}
			}
		}
	}
	return y
}

func TestSoftmax(t *testing.T) {
	r := rand.New(rand.NewPCG(60, 61))
	for _, tc := range []struct {
		x    []int64
		axis int64
	}{
		{[]int64{3, 7}, -1}, {[]int64{2, 3, 4}, 1}, {[]int64{2, 3, 4}, 0}, {[]int64{5}, 0}, {[]int64{2, 3, 4, 5}, -3},
		{[]int64{4, 1000}, -1},
	} {
		x := nnF(r, tc.x...)
		for i := range x.data {
			x.data[i] *= 10 // large logits test the max shift
		}
		outer, n, inner, err := softmaxDims(ir.Shape(tc.x), tc.axis, false)
		if err != nil {
			t.Fatal(err)
		}
		for _, typ := range []string{"Softmax", "LogSoftmax"} {
			op := nnOp(t, 17, typ, []nnIn{x}, []string{"y"}, nnAInt("axis", tc.axis))
			got := nnRun(t, op, []nnIn{x})
			want := refSoftmax(x.data, outer, n, inner, typ == "LogSoftmax")
			nnClose(t, fmt.Sprintf("%s %v axis %d", typ, tc.x, tc.axis), got[0].F32(), want, 1e-5)
			got64 := nnRun64(t, 17, typ, []nnIn{x}, []string{"y"}, nnAInt("axis", tc.axis))
			nnClose(t, fmt.Sprintf("float64 %s %v axis %d", typ, tc.x, tc.axis), got64[0].F64(), want, tol64)
		}
	}
	// Default axis (opset >= 13): the last.
	x := nnF(r, 2, 3, 4)
	got := nnRun(t, nnOp(t, 17, "Softmax", []nnIn{x}, []string{"y"}), []nnIn{x})
	nnClose(t, "Softmax default axis", got[0].F32(), refSoftmax(x.data, 6, 4, 1, false), 1e-5)
}

// TestSoftmaxOpset12 checks the opset < 13 reading through the kernel:
// the input coerced to 2-D at axis (default 1).
func TestSoftmaxOpset12(t *testing.T) {
	r := rand.New(rand.NewPCG(64, 65))
	x := nnF(r, 2, 3, 4)
	for _, tc := range []struct {
		attrs        []ir.Attr
		outer, inner int
	}{{nil, 2, 12}, {[]ir.Attr{nnAInt("axis", 2)}, 6, 4}, {[]ir.Attr{nnAInt("axis", 0)}, 1, 24}} {
		for _, typ := range []string{"Softmax", "LogSoftmax"} {
			op := nnOp(t, 12, typ, []nnIn{x}, []string{"y"}, tc.attrs...)
			got := nnRunOpset(t, op, 12, []nnIn{x})
			want := refSoftmax(x.data, tc.outer, tc.inner, 1, typ == "LogSoftmax")
			nnClose(t, fmt.Sprintf("%s opset 12 %v", typ, tc.attrs), got[0].F32(), want, 1e-5)
			got64 := nnRun64(t, 12, typ, []nnIn{x}, []string{"y"}, tc.attrs...)
			nnClose(t, fmt.Sprintf("float64 %s opset 12 %v", typ, tc.attrs), got64[0].F64(), want, tol64)
		}
	}
}

// TestSoftmaxLegacyDims pins softmaxDims' two readings.
func TestSoftmaxLegacyDims(t *testing.T) {
	outer, n, inner, err := softmaxDims(ir.Shape{2, 3, 4, 5}, 1, true)
	if err != nil || outer != 2 || n != 60 || inner != 1 {
		t.Fatalf("legacy dims = %d, %d, %d, %v; want 2, 60, 1", outer, n, inner, err)
	}
	outer, n, inner, _ = softmaxDims(ir.Shape{2, 3, 4, 5}, 1, false)
	if outer != 2 || n != 3 || inner != 20 {
		t.Fatalf("opset-13 dims = %d, %d, %d; want 2, 3, 20", outer, n, inner)
	}
}

func TestSoftmaxORT(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(62, 63))
	var cases []nnORTCase
	for _, typ := range []string{"Softmax", "LogSoftmax"} {
		cases = append(cases,
			nnORTCase{onnxtest.Node(typ, "", nil, nil, onnxtest.Int("axis", 1)), []nnIO{nnORTIn(r, "x", 2, 5, 3)}, []nnIO{{name: "y"}}, 1e-5},
			nnORTCase{onnxtest.Node(typ, "", nil, nil), []nnIO{nnORTIn(r, "x", 3, 4, 6)}, []nnIO{{name: "y"}}, 1e-5})
	}
	nnORTBatch(t, 17, cases)
	// Opset 11: coerced to 2-D.
	nnORTBatch(t, 11, []nnORTCase{
		{onnxtest.Node("Softmax", "", nil, nil), []nnIO{nnORTIn(r, "x", 2, 3, 4)}, []nnIO{{name: "y"}}, 1e-5},
		{onnxtest.Node("LogSoftmax", "", nil, nil, onnxtest.Int("axis", 1)), []nnIO{nnORTIn(r, "x", 2, 3, 4)}, []nnIO{{name: "y"}}, 1e-5},
		{onnxtest.Node("Softmax", "", nil, nil, onnxtest.Int("axis", -2)), []nnIO{nnORTIn(r, "x", 2, 3, 4)}, []nnIO{{name: "y"}}, 1e-5},
	})
}
