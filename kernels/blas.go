package kernels

import (
	ownblas "github.com/tsplit/tsplit/kernels/internal/sgemm"
	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
)

// BLAS: every matrix product of the kernels (Conv, ConvTranspose, Gemm,
// MatMul) goes through one internal routine,
//
//	sgemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
//
// computing C = alpha·op(A)·op(B) + beta·C on row-major float32
// matrices (op(A) is m×k, op(B) k×n, C m×n). It checks the operands and
// does the degenerate products itself (gemmDone, shared with the float64
// dgemm, which is gonum's in every build), then calls tsplit's own GEMM
// (package kernels/internal/sgemm) on processors with AVX-512, or
// blasSgemm, of which two implementations exist:
//
//   - blas_gonum.go (default build): gonum's pure-Go BLAS
//     (gonum.org/v1/gonum/blas/gonum), no cgo needed;
//   - blas_openblas.go (build tag openblas): OpenBLAS through cgo
//     (cblas_sgemm; Debian's libopenblas-dev), several times faster.
//
// SgemmName says which one runs; TSPLIT_SGEMM=blas keeps the BLAS on an
// AVX-512 processor. docs/blas.md has the measurements behind the choice
// and the build instructions.
//
// Threading. The kernels own all parallelism: sgemm itself runs on the
// calling goroutine (OpenBLAS is held to one thread: blas_openblas.go),
// and sgemmPar splits one product into column (or row) blocks over
// Parallel, one single-threaded sgemm per block. So BLAS never starts
// threads of its own next to Parallel's goroutines: no oversubscription,
// and none of OpenBLAS's idle workers spinning (sched_yield) on the cores
// while im2col or col2im run. Independent products (batched MatMul,
// attention heads) go through sgemmBatch, which runs whole products
// concurrently when there are enough of them.
//
// gonum's Sgemm parallelises large products over GOMAXPROCS goroutines
// by itself; under sgemmPar each block is small enough that it mostly
// does not, and when it does the Go scheduler multiplexes the
// goroutines on the same GOMAXPROCS threads.

// sgemm computes C = alpha·op(A)·op(B) + beta·C on row-major float32
// matrices with the BLAS compiled in (blasSgemm), on the calling
// goroutine.
func sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	if gemmDone(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc) {
		return
	}
	if ownblas.Enabled {
		ownblas.Gemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		return
	}
	blasSgemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// SgemmName names what computes the float32 products: "tsplit-avx512"
// (package sgemm) when it is enabled, else the BLAS compiled in
// ("openblas" or "gonum").
func SgemmName() string {
	if ownblas.Enabled {
		return "tsplit-avx512"
	}
	return blasName
}

var gonumDgemm gonum.Implementation

// dgemm is the float64 product: gonum's Dgemm (which splits large
// products over goroutines by itself) in both builds.
func dgemm(transA, transB bool, m, n, k int, alpha float64, a []float64, lda int, b []float64, ldb int, beta float64, c []float64, ldc int) {
	if gemmDone(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc) {
		return
	}
	gonumDgemm.Dgemm(gonumTrans(transA), gonumTrans(transB), m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// gemmDone checks the operands of a product and does the products BLAS
// is not called for: nothing for an empty C, C = beta·C when k = 0 or
// alpha = 0. It reports whether the product is done.
func gemmDone[T elemFloat](transA, transB bool, m, n, k int, alpha T, a []T, lda int, b []T, ldb int, beta T, c []T, ldc int) bool {
	if m == 0 || n == 0 {
		return true
	}
	checkGemm(transA, transB, m, n, k, a, lda, b, ldb, c, ldc)
	if k == 0 || alpha == 0 {
		scaleC(m, n, beta, c, ldc)
		return true
	}
	return false
}

// gonumTrans is gonum's name for a transposed or plain operand.
func gonumTrans(t bool) blas.Transpose {
	if t {
		return blas.Trans
	}
	return blas.NoTrans
}

// parBlock is the granularity, in columns or rows, of sgemmPar's split:
// a multiple of the SIMD micro-kernel widths of both libraries.
const parBlock = 64

// sgemmPar is sgemm with the product split over Threads goroutines:
// along n (columns of op(B) and C) when n is at least m or gives every
// thread a block, else along m (rows of op(A) and C); small products
// are not split.
func sgemmPar(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	t := Threads
	flops := float64(m) * float64(n) * float64(k)
	if t <= 1 || flops < 1<<18 || m == 0 || n == 0 {
		sgemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		return
	}
	checkGemm(transA, transB, m, n, k, a, lda, b, ldb, c, ldc)
	if n >= m || n >= t*parBlock {
		// Split the columns.
		chunks, per := parSplit(n, parBlock, t)
		Parallel(chunks, func(lo, hi int) {
			for ch := lo; ch < hi; ch++ {
				j0 := ch * per
				w := min(per, n-j0)
				bo := j0 // column j0 of op(B)
				if transB {
					bo = j0 * ldb
				}
				sgemm(transA, transB, m, w, k, alpha, a, lda, b[bo:], ldb, beta, c[j0:], ldc)
			}
		})
		return
	}
	// Split the rows.
	chunks, per := parSplit(m, 16, t)
	Parallel(chunks, func(lo, hi int) {
		for ch := lo; ch < hi; ch++ {
			i0 := ch * per
			h := min(per, m-i0)
			ao := i0 * lda // row i0 of op(A)
			if transA {
				ao = i0
			}
			sgemm(transA, transB, h, n, k, alpha, a[ao:], lda, b, ldb, beta, c[i0*ldc:], ldc)
		}
	})
}

// parSplit cuts n columns or rows into at most t chunks of at least
// unit (each but the last a multiple of 16): the chunk count and size.
func parSplit(n, unit, t int) (chunks, per int) {
	chunks = min(t, (n+unit-1)/unit)
	per = (n + chunks - 1) / chunks
	per = (per + 15) &^ 15
	return (n + per - 1) / per, per
}

// sgemmBatch computes count independent products: for each i in
// [0, count), at(i) returns the operands of product i. With at least
// Threads products, whole products run concurrently; otherwise each is
// split by sgemmPar.
func sgemmBatch(count int, transA, transB bool, m, n, k int, alpha, beta float32,
	at func(i int) (a []float32, lda int, b []float32, ldb int, c []float32, ldc int)) {
	if count >= Threads || float64(m)*float64(n)*float64(k) < 1<<18 {
		Parallel(count, func(lo, hi int) {
			for i := lo; i < hi; i++ {
				a, lda, b, ldb, c, ldc := at(i)
				sgemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
			}
		})
		return
	}
	for i := 0; i < count; i++ {
		a, lda, b, ldb, c, ldc := at(i)
		sgemmPar(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
	}
}

// checkGemm panics with a clear message when the slices are too short
// for the given dimensions (the cgo path would otherwise read or write
// out of bounds).
func checkGemm[T elemFloat](transA, transB bool, m, n, k int, a []T, lda int, b []T, ldb int, c []T, ldc int) {
	ar, ac := m, k
	if transA {
		ar, ac = k, m
	}
	br, bc := k, n
	if transB {
		br, bc = n, k
	}
	need := func(name string, s []T, rows, cols, ld int) {
		if rows == 0 || cols == 0 {
			return
		}
		if ld < max(1, cols) {
			panic("kernels: gemm: bad leading dimension for " + name)
		}
		if len(s) < (rows-1)*ld+cols {
			panic("kernels: gemm: slice " + name + " too short")
		}
	}
	need("A", a, ar, ac, lda)
	need("B", b, br, bc, ldb)
	need("C", c, m, n, ldc)
}

// scaleC sets C = beta·C on an m×n matrix (the k = 0 product).
func scaleC[T elemFloat](m, n int, beta T, c []T, ldc int) {
	for i := 0; i < m; i++ {
		row := c[i*ldc : i*ldc+n]
		if beta == 0 {
			clear(row)
			continue
		}
		for j := range row {
			row[j] *= beta
		}
	}
}
