//go:build openblas

package kernels

/*
#cgo LDFLAGS: -lopenblas
#include <cblas.h>
*/
import "C"

// blasName names the BLAS compiled in (see blas.go).
const blasName = "openblas"

func init() {
	// One thread: the kernels split products themselves (sgemmPar), so
	// OpenBLAS's pool would only oversubscribe the cores.
	C.openblas_set_num_threads(1)
}

// blasSgemm computes C = alpha·op(A)·op(B) + beta·C (row-major) with
// OpenBLAS's cblas_sgemm, on the calling thread (see init); sgemm has
// checked the operands.
func blasSgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
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
