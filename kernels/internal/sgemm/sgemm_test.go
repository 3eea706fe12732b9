package sgemm

import (
	"math"
	"math/rand/v2"
	"testing"
)

// refGemm is C = alpha·op(A)·op(B) + beta·C in float64, with the bound
// alpha·Σ|a·b| + |beta·c| of each element's rounding for the tolerance.
func refGemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) (want, mag []float64) {
	want, mag = make([]float64, m*n), make([]float64, m*n)
	at := func(i, p int) float64 {
		if transA {
			return float64(a[p*lda+i])
		}
		return float64(a[i*lda+p])
	}
	bt := func(p, j int) float64 {
		if transB {
			return float64(b[j*ldb+p])
		}
		return float64(b[p*ldb+j])
	}
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			var s, sa float64
			for p := 0; p < k; p++ {
				s += at(i, p) * bt(p, j)
				sa += math.Abs(at(i, p) * bt(p, j))
			}
			w, g := float64(alpha)*s, math.Abs(float64(alpha))*sa
			if beta != 0 {
				w += float64(beta) * float64(c[i*ldc+j])
				g += math.Abs(float64(beta) * float64(c[i*ldc+j]))
			}
			want[i*n+j], mag[i*n+j] = w, g
		}
	}
	return want, mag
}

func randSlice(r *rand.Rand, n int) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = float32(r.NormFloat64())
	}
	return s
}

// TestGemm: random shapes around every blocking edge (M around the
// 8-row panels and MC, N around the 48- and 16-column panels and NC, K
// around KC), both transpositions of each operand, leading dimensions
// past the matrices, alpha and beta (0, 1, other) against a float64
// reference. With beta 0, C starts as NaN: it must not be read. The
// elements of C outside the product must be left alone.
func TestGemm(t *testing.T) {
	if !Enabled {
		t.Skip("sgemm: no AVX-512F on this processor (or TSPLIT_SGEMM=blas)")
	}
	r := rand.New(rand.NewPCG(1, 2))
	dims := func(edges ...int) int {
		e := edges[r.IntN(len(edges))]
		return max(1, e+r.IntN(5)-2)
	}
	for it := 0; it < 300; it++ {
		m := dims(1, 8, 16, 61, gemmMC, gemmMC+9)
		n := dims(1, 16, 47, 48, 97, 200, gemmNC, gemmNC+50)
		k := dims(1, 4, 9, gemmKC, gemmKC+3, 2*gemmKC+1)
		if m*n*k > 1<<22 { // keep the reference quick
			k = max(1, (1<<22)/(m*n))
		}
		transA, transB := r.IntN(2) == 0, r.IntN(2) == 0
		alpha := []float32{1, -0.5, 2.25}[r.IntN(3)]
		beta := []float32{0, 1, 0.75}[r.IntN(3)]
		ar, ac := m, k
		if transA {
			ar, ac = k, m
		}
		br, bc := k, n
		if transB {
			br, bc = n, k
		}
		lda, ldb, ldc := ac+r.IntN(3), bc+r.IntN(3), n+r.IntN(3)
		a, b := randSlice(r, (ar-1)*lda+ac), randSlice(r, (br-1)*ldb+bc)
		c := randSlice(r, (m-1)*ldc+n)
		want, mag := refGemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		if beta == 0 {
			for i := 0; i < m; i++ {
				for j := 0; j < n; j++ {
					c[i*ldc+j] = float32(math.NaN())
				}
			}
		}
		before := append([]float32(nil), c...)
		// Each operand stored, or produced row by row or column by
		// column (what a convolution's packing does).
		opA := produced(r.IntN(3), Operand{Data: a, Stride: lda, Trans: transA})
		opB := produced(r.IntN(3), Operand{Data: b, Stride: ldb, Trans: transB})
		GemmOp(m, n, k, alpha, opA, opB, beta, c, ldc)
		for i := 0; i < m; i++ {
			for j := 0; j < ldc && i*ldc+j < len(c); j++ {
				got := c[i*ldc+j]
				if j >= n {
					if math.Float32bits(got) != math.Float32bits(before[i*ldc+j]) {
						t.Fatalf("m%d n%d k%d: C[%d][%d] past the product changed", m, n, k, i, j)
					}
					continue
				}
				w, g := want[i*n+j], mag[i*n+j]
				if math.Abs(float64(got)-w) > 1e-5*g+1e-30 || got != got {
					t.Fatalf("m%d n%d k%d A %s B %s alpha %v beta %v lds %d %d %d: C[%d][%d] = %v, want %v (scale %v)",
						m, n, k, opName(opA), opName(opB), alpha, beta, lda, ldb, ldc, i, j, got, w, g)
				}
			}
		}
	}
}

// produced turns a stored operand into one produced by rows (mode 1) or
// columns (mode 2); mode 0 keeps it stored.
func produced(mode int, x Operand) Operand {
	at := func(r, c int) float32 {
		if x.Trans {
			return x.Data[c*x.Stride+r]
		}
		return x.Data[r*x.Stride+c]
	}
	switch mode {
	case 1:
		return Operand{Rows: func(r, c0 int, dst []float32) {
			for j := range dst {
				dst[j] = at(r, c0+j)
			}
		}}
	case 2:
		return Operand{Cols: func(c, r0 int, dst []float32) {
			for i := range dst {
				dst[i] = at(r0+i, c)
			}
		}}
	}
	return x
}

func opName(x Operand) string {
	switch {
	case x.Rows != nil:
		return "rows"
	case x.Cols != nil:
		return "columns"
	case x.Trans:
		return "transposed"
	}
	return "stored"
}
