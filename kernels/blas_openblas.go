//go:build openblas

package kernels

/*
#cgo LDFLAGS: -lopenblas
#include <cblas.h>
*/
import "C"

import "sync/atomic"

// blasName names the BLAS compiled in (see blas.go).
const blasName = "openblas"

// blasThreads is the OpenBLAS pool size last set, so a change of
// Threads (the runtime's core budget) reaches OpenBLAS too.
var blasThreads atomic.Int64

func syncBLASThreads() {
	t := int64(max(Threads, 1))
	if blasThreads.Load() != t {
		blasThreads.Store(t)
		C.openblas_set_num_threads(C.int(t))
	}
}

// sgemm computes C = alpha·op(A)·op(B) + beta·C (row-major) with
// OpenBLAS's cblas_sgemm. OpenBLAS threads large products over its own
// pool, sized to Threads so it uses the same cores as Parallel.
func sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	if m == 0 || n == 0 {
		return
	}
	checkGemm(transA, transB, m, n, k, a, lda, b, ldb, c, ldc)
	if k == 0 || alpha == 0 {
		scaleC(m, n, beta, c, ldc)
		return
	}
	syncBLASThreads()
	ta, tb := uint32(C.CblasNoTrans), uint32(C.CblasNoTrans)
	if transA {
		ta = C.CblasTrans
	}
	if transB {
		tb = C.CblasTrans
	}
	C.cblas_sgemm(C.CblasRowMajor, C.enum_CBLAS_TRANSPOSE(ta), C.enum_CBLAS_TRANSPOSE(tb),
		C.blasint(m), C.blasint(n), C.blasint(k), C.float(alpha),
		(*C.float)(&a[0]), C.blasint(lda), (*C.float)(&b[0]), C.blasint(ldb),
		C.float(beta), (*C.float)(&c[0]), C.blasint(ldc))
}
