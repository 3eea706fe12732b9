package kernels

// BLAS: every matrix product of the kernels (Conv, ConvTranspose, Gemm,
// MatMul) goes through one internal routine,
//
//	sgemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
//
// computing C = alpha·op(A)·op(B) + beta·C on row-major float32
// matrices (op(A) is m×k, op(B) k×n, C m×n). Two implementations exist:
//
//   - blas_gonum.go (default build): gonum's pure-Go BLAS
//     (gonum.org/v1/gonum/blas/gonum), no cgo needed;
//   - blas_openblas.go (build tag openblas): OpenBLAS through cgo
//     (cblas_sgemm; Debian's libopenblas-dev), several times faster.
//
// docs/blas.md has the measurements behind the choice and the build
// instructions.
//
// Threading. Both libraries split a large product over several threads
// themselves (gonum over GOMAXPROCS goroutines, OpenBLAS over its own
// pthread pool, which blas_openblas.go sizes to Threads). Kernels
// therefore call sgemm from one goroutine at a time for large products
// and never from inside Parallel, so BLAS threads and Parallel's
// goroutines do not oversubscribe the cores. Many small independent
// products (batched MatMul, attention heads) are the exception:
// sgemmBatch runs them concurrently, one per goroutine, when each is
// below smallGemmFlops, the size under which both libraries stay on the
// calling thread.

// smallGemmFlops bounds m·n·k of a product that BLAS runs on the calling
// thread: OpenBLAS goes single-threaded below 65536·4 (SMP_THRESHOLD_MIN
// × GEMM_MULTITHREAD_THRESHOLD), gonum below 4 blocks of 64×64.
const smallGemmFlops = 65536 * 4

// gemmIsSmall reports whether one m×n×k product stays on the calling
// thread, so independent ones can run concurrently.
func gemmIsSmall(m, n, k int) bool {
	if blasName == "gonum" {
		// gonum parallelises once the output has >= 4 blocks of 64×64.
		return ((m+63)/64)*((n+63)/64) < 4
	}
	return float64(m)*float64(n)*float64(k) <= smallGemmFlops
}

// sgemmBatch computes count independent products: for each i in
// [0, count), at(i) returns the operands of product i. Small products
// run concurrently over Parallel; large ones one after another, each
// threaded by the BLAS.
func sgemmBatch(count int, transA, transB bool, m, n, k int, alpha, beta float32,
	at func(i int) (a []float32, lda int, b []float32, ldb int, c []float32, ldc int)) {
	run := func(lo, hi int) {
		for i := lo; i < hi; i++ {
			a, lda, b, ldb, c, ldc := at(i)
			sgemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		}
	}
	if count > 1 && gemmIsSmall(m, n, k) {
		Parallel(count, run)
		return
	}
	run(0, count)
}

// checkGemm panics with a clear message when the slices are too short
// for the given dimensions (the cgo path would otherwise read or write
// out of bounds).
func checkGemm(transA, transB bool, m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) {
	ar, ac := m, k
	if transA {
		ar, ac = k, m
	}
	br, bc := k, n
	if transB {
		br, bc = n, k
	}
	need := func(name string, s []float32, rows, cols, ld int) {
		if rows == 0 || cols == 0 {
			return
		}
		if ld < max(1, cols) {
			panic("kernels: sgemm: bad leading dimension for " + name)
		}
		if len(s) < (rows-1)*ld+cols {
			panic("kernels: sgemm: slice " + name + " too short")
		}
	}
	need("A", a, ar, ac, lda)
	need("B", b, br, bc, ldb)
	need("C", c, m, n, ldc)
}

// scaleC sets C = beta·C on an m×n matrix (the k = 0 product).
func scaleC(m, n int, beta float32, c []float32, ldc int) {
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
