//go:build !openblas

package kernels

import "gonum.org/v1/gonum/blas/gonum"

// blasName names the BLAS compiled in (see blas.go).
const blasName = "gonum"

var gonumBLAS gonum.Implementation

// blasSgemm computes C = alpha·op(A)·op(B) + beta·C (row-major) with
// gonum's pure-Go BLAS, which splits large products over GOMAXPROCS
// goroutines (sgemm has checked the operands).
func blasSgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	gonumBLAS.Sgemm(gonumTrans(transA), gonumTrans(transB), m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}
