package kernels

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/tsplit/tsplit/internal/onnxtest"
	"github.com/tsplit/tsplit/ir"
)

func TestGemm(t *testing.T) { eachSgemm(t, testGemm) }

func testGemm(t *testing.T) {
	r := rand.New(rand.NewPCG(70, 71))
	for it := 0; it < 60; it++ {
		m, n, k := 1+r.IntN(40), 1+r.IntN(40), 1+r.IntN(50)
		if it < 3 {
			m, n, k = 150+r.IntN(50), 200+r.IntN(50), 100+r.IntN(50)
		}
		tA, tB := r.IntN(2), r.IntN(2)
		alpha, beta := float32(r.NormFloat64()), float32(r.NormFloat64())
		as, bs := []int64{int64(m), int64(k)}, []int64{int64(k), int64(n)}
		if tA == 1 {
			as = []int64{int64(k), int64(m)}
		}
		if tB == 1 {
			bs = []int64{int64(n), int64(k)}
		}
		a, b := nnF(r, as...), nnF(r, bs...)
		var cs []int64
		switch r.IntN(7) {
		case 0: // absent
		case 1:
			cs = []int64{}
		case 2:
			cs = []int64{int64(n)}
		case 3:
			cs = []int64{1, int64(n)}
		case 4:
			cs = []int64{int64(m), 1}
		case 5:
			cs = []int64{1, 1}
		default:
			cs = []int64{int64(m), int64(n)}
		}
		ins := []nnIn{a, b}
		if cs != nil {
			ins = append(ins, nnF(r, cs...))
		}
		attrs := []ir.Attr{nnAInt("transA", int64(tA)), nnAInt("transB", int64(tB)), nnAFloat("alpha", alpha), nnAFloat("beta", beta)}
		op := nnOp(t, 17, "Gemm", ins, []string{"y"}, attrs...)
		got := nnRun(t, op, ins)
		var cFull []float64
		if cs != nil {
			cFull = expand(ins[2].data, cs, []int64{int64(m), int64(n)})
		}
		want := nnNaiveGemm(tA == 1, tB == 1, m, n, k, alpha, a.data, int(as[1]), b.data, int(bs[1]), 0, make([]float32, m*n), n)
		for i := range want {
			if cFull != nil {
				want[i] += float64(beta) * cFull[i]
			}
		}
		nnClose(t, fmt.Sprintf("Gemm m%d n%d k%d tA%d tB%d C%v", m, n, k, tA, tB, cs), got[0].F32(), want, 1e-5)
		got64 := nnRun64(t, 17, "Gemm", ins, []string{"y"}, attrs...)
		nnClose(t, fmt.Sprintf("float64 Gemm m%d n%d k%d tA%d tB%d C%v", m, n, k, tA, tB, cs), got64[0].F64(), want, tol64)
	}
}

// refMatMul is numpy.matmul in float64.
func refMatMul(a []float32, as []int64, b []float32, bs []int64) ([]int64, []float64) {
	aVec, bVec := len(as) == 1, len(bs) == 1
	if aVec {
		as = []int64{1, as[0]}
	}
	if bVec {
		bs = []int64{bs[0], 1}
	}
	m, k, n := int(as[len(as)-2]), int(as[len(as)-1]), int(bs[len(bs)-1])
	batch, err := ir.Broadcast(ir.Shape(as[:len(as)-2]), ir.Shape(bs[:len(bs)-2]))
	if err != nil {
		panic(err)
	}
	full := append(append([]int64{}, batch...), int64(m), int64(n))
	aFull := expand(a, as, append(append([]int64{}, batch...), int64(m), int64(k)))
	bFull := expand(b, bs, append(append([]int64{}, batch...), int64(k), int64(n)))
	y := make([]float64, nnVol(ir.Shape(full)))
	for bi := 0; bi < nnVol(batch); bi++ {
		for i := 0; i < m; i++ {
			for j := 0; j < n; j++ {
				var s float64
				for p := 0; p < k; p++ {
					s += aFull[(bi*m+i)*k+p] * bFull[(bi*k+p)*n+j]
				}
				y[(bi*m+i)*n+j] = s
			}
		}
	}
	out := append([]int64{}, batch...)
	if !aVec {
		out = append(out, int64(m))
	}
	if !bVec {
		out = append(out, int64(n))
	}
	return out, y
}

func TestMatMul(t *testing.T) { eachSgemm(t, testMatMul) }

func testMatMul(t *testing.T) {
	r := rand.New(rand.NewPCG(72, 73))
	for _, tc := range []struct{ a, b []int64 }{
		{[]int64{3, 4}, []int64{4, 5}},
		{[]int64{4}, []int64{4, 5}},
		{[]int64{3, 4}, []int64{4}},
		{[]int64{4}, []int64{4}},
		{[]int64{2, 3, 4}, []int64{4, 5}},       // shared B: folded into one product
		{[]int64{4}, []int64{2, 3, 4, 5}},       // 1-D A against a batch
		{[]int64{2, 3, 4, 6}, []int64{6}},       // batch against 1-D B
		{[]int64{2, 1, 3, 4}, []int64{5, 4, 2}}, // broadcast both ways
		{[]int64{3, 4}, []int64{2, 4, 5}},       // shared A
		{[]int64{1, 3, 4}, []int64{2, 4, 5}},
		{[]int64{6, 2, 16, 8}, []int64{6, 2, 8, 16}}, // attention heads: concurrent small products
		{[]int64{2, 70, 90}, []int64{2, 90, 80}},     // larger than the threading threshold
		{[]int64{2, 0, 4}, []int64{4, 3}},            // empty
	} {
		a, b := nnF(r, tc.a...), nnF(r, tc.b...)
		op := nnOp(t, 17, "MatMul", []nnIn{a, b}, []string{"y"})
		got := nnRun(t, op, []nnIn{a, b})
		shape, want := refMatMul(a.data, tc.a, b.data, tc.b)
		if !got[0].Shape.Equal(ir.Shape(shape)) {
			t.Fatalf("MatMul %v × %v: shape %v, want %v", tc.a, tc.b, got[0].Shape, shape)
		}
		nnClose(t, fmt.Sprintf("MatMul %v × %v", tc.a, tc.b), got[0].F32(), want, 1e-5)
		got64 := nnRun64(t, 17, "MatMul", []nnIn{a, b}, []string{"y"})
		nnClose(t, fmt.Sprintf("float64 MatMul %v × %v", tc.a, tc.b), got64[0].F64(), want, tol64)
	}
}

func TestGemmMatMulORT(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(74, 75))
	cases := []nnORTCase{
		{onnxtest.Node("Gemm", "", nil, nil, onnxtest.Int("transA", 1), onnxtest.Int("transB", 1), nnPAFloat("alpha", 0.5), nnPAFloat("beta", -2)),
			[]nnIO{nnORTIn(r, "a", 7, 5), nnORTIn(r, "b", 6, 7), nnORTIn(r, "c", 5, 1)}, []nnIO{{name: "y"}}, 1e-5},
		{onnxtest.Node("Gemm", "", nil, nil), []nnIO{nnORTIn(r, "a", 4, 9), nnORTIn(r, "b", 9, 3), nnORTIn(r, "c", 3)}, []nnIO{{name: "y"}}, 1e-5},
		{onnxtest.Node("Gemm", "", nil, nil, onnxtest.Int("transB", 1)), []nnIO{nnORTIn(r, "a", 4, 9), nnORTIn(r, "b", 3, 9)}, []nnIO{{name: "y"}}, 1e-5},
	}
	for _, tc := range []struct{ a, b []int64 }{{[]int64{2, 1, 3, 4}, []int64{5, 4, 2}}, {[]int64{4}, []int64{3, 4, 2}}, {[]int64{2, 3, 8}, []int64{8, 4}}, {[]int64{3, 5}, []int64{5}}} {
		cases = append(cases, nnORTCase{onnxtest.Node("MatMul", "", nil, nil), []nnIO{nnORTIn(r, "a", tc.a...), nnORTIn(r, "b", tc.b...)}, []nnIO{{name: "y"}}, 1e-5})
	}
	nnORTBatch(t, 17, cases)
}
