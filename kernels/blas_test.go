package kernels

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
)

// nnNaiveGemm is the float64 reference of sgemm.
func nnNaiveGemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) []float64 {
	out := make([]float64, m*n)
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			var s float64
			for p := 0; p < k; p++ {
				var av, bv float32
				if transA {
					av = a[p*lda+i]
				} else {
					av = a[i*lda+p]
				}
				if transB {
					bv = b[j*ldb+p]
				} else {
					bv = b[p*ldb+j]
				}
				s += float64(av) * float64(bv)
			}
			out[i*n+j] = float64(alpha)*s + float64(beta)*float64(c[i*ldc+j])
		}
	}
	return out
}

func nnRand(r *rand.Rand, n int) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = float32(r.NormFloat64())
	}
	return s
}

func TestSgemm(t *testing.T) { eachSgemm(t, testSgemm) }

func testSgemm(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for it := 0; it < 60; it++ {
		m, n, k := 1+r.IntN(70), 1+r.IntN(70), r.IntN(90)
		switch {
		case it < 8: // big enough for sgemmPar to split the columns
			m, n, k = 100+r.IntN(100), 300+r.IntN(50), 100+r.IntN(80)
		case it < 16: // ... or the rows
			m, n, k = 300+r.IntN(100), 1+r.IntN(100), 200+r.IntN(80)
		}
		tA, tB := r.IntN(2) == 1, r.IntN(2) == 1
		ar, ac := m, k
		if tA {
			ar, ac = k, m
		}
		br, bc := k, n
		if tB {
			br, bc = n, k
		}
		lda, ldb, ldc := max(ac, 1)+r.IntN(3), max(bc, 1)+r.IntN(3), n+r.IntN(3)
		a := nnRand(r, max(ar*lda, 1))
		b := nnRand(r, max(br*ldb, 1))
		c := nnRand(r, m*ldc)
		alpha, beta := float32(r.NormFloat64()), float32(r.NormFloat64())
		if it%7 == 0 {
			beta = 0
		}
		want := nnNaiveGemm(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		if it%2 == 0 {
			sgemmPar(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		} else {
			sgemm(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		}
		got := make([]float32, 0, m*n)
		for i := 0; i < m; i++ {
			got = append(got, c[i*ldc:i*ldc+n]...)
		}
		nnClose(t, fmt.Sprintf("%s sgemm m%d n%d k%d tA=%v tB=%v", blasName, m, n, k, tA, tB), got, want, 1e-5)
	}
}

// TestSgemmConcurrent runs single-threaded products from many goroutines
// at once, as sgemmPar and sgemmBatch do (OpenBLAS must be safe for it).
func TestSgemmConcurrent(t *testing.T) { eachSgemm(t, testSgemmConcurrent) }

func testSgemmConcurrent(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	const m, n, k, count = 37, 53, 61, 24
	a, b := nnRand(r, count*m*k), nnRand(r, count*k*n)
	c := make([]float32, count*m*n)
	sgemmBatch(count, false, false, m, n, k, 1, 0, func(i int) ([]float32, int, []float32, int, []float32, int) {
		return a[i*m*k:], k, b[i*k*n:], n, c[i*m*n:], n
	})
	for i := 0; i < count; i++ {
		want := nnNaiveGemm(false, false, m, n, k, 1, a[i*m*k:], k, b[i*k*n:], n, 0, make([]float32, m*n), n)
		nnClose(t, fmt.Sprintf("batch product %d", i), c[i*m*n:(i+1)*m*n], want, 1e-5)
	}
}

// nnResnetGemms are the per-image im2col products of resnet18's 3×3
// convolutions (M = output channels, K = input channels × 9, N = output
// pixels), plus the 7×7 stem, the stride-2 1×1 shortcuts and a square.
var nnResnetGemms = []struct {
	name    string
	m, n, k int
}{
	{"Stem_M64_K147_N12544", 64, 12544, 147},
	{"L1_M64_K576_N3136", 64, 3136, 576},
	{"L2_M128_K1152_N784", 128, 784, 1152},
	{"L3_M256_K2304_N196", 256, 196, 2304},
	{"L4_M512_K4608_N49", 512, 49, 4608},
	{"L4batch8_M512_K4608_N392", 512, 392, 4608},
	{"Down3_M256_K128_N196", 256, 196, 128},
	{"Square_1024", 1024, 1024, 1024},
}

func BenchmarkSgemm(b *testing.B) {
	Threads = runtime.GOMAXPROCS(0)
	for _, s := range nnResnetGemms {
		b.Run(s.name, func(b *testing.B) {
			r := rand.New(rand.NewPCG(3, 4))
			a, bb, c := nnRand(r, s.m*s.k), nnRand(r, s.k*s.n), make([]float32, s.m*s.n)
			b.ResetTimer()
			cpu0 := processCPU()
			for b.Loop() {
				sgemmPar(false, false, s.m, s.n, s.k, 1, a, s.k, bb, s.n, 0, c, s.n)
			}
			b.ReportMetric(2*float64(s.m)*float64(s.n)*float64(s.k)*float64(b.N)/(processCPU()-cpu0).Seconds()/1e9, "GFLOP/cpu-s")
			b.ReportMetric(2*float64(s.m)*float64(s.n)*float64(s.k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}
