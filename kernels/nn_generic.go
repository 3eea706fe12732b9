package kernels

import (
	"unsafe"

	"github.com/tsplit/tsplit/ir"
)

// Element types of the nn kernels. Every nn kernel is written once, as
// a method of floatK[T] (misc_elem.go) picked by nnFloat, and
// instantiated for float32 (the training and inference type) and
// float64 (the gradient checks of package autodiff run whole graphs in
// float64). The instantiations do not share code:
// float32 and float64 have different GC shapes, so each loop compiles to
// the same machine code a hand-written float32 (or float64) loop would.
//
// Matrix products go through nnGemm and nnGemmBatch: float32 through
// sgemmPar / sgemmBatch (blas.go: gonum by default, OpenBLAS with the
// openblas build tag), unchanged; float64 through gonum's pure-Go Dgemm
// in both builds (a reference path: correct, not tuned).

// nnIs32 reports whether T is float32.
func nnIs32[T elemFloat]() bool {
	var z T
	return unsafe.Sizeof(z) == 4
}

// nnAs reinterprets a []T as a []U; callers use it only where U is T
// (after nnIs32), to pass a generic slice to a typed routine.
func nnAs[U, T elemFloat](s []T) []U {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*U)(unsafe.Pointer(unsafe.SliceData(s))), len(s))
}

// nnESize is the byte width of op's element type (input 0): 8 for
// float64, else 4. Workspace sizes scale with it.
func nnESize(op *ir.Op) int64 {
	if x := op.Input(0); x != nil && x.DType == ir.Double {
		return 8
	}
	return 4
}

// nnDouble reports whether the kernel call runs in float64.
func nnDouble(c *Ctx) bool { return len(c.In) > 0 && c.In[0] != nil && c.In[0].DType == ir.Double }

// nnFloat is the typed nn kernels of the call: float64 when input 0 is,
// float32 otherwise (nnGuard has checked the types).
func nnFloat(c *Ctx) floatKernels {
	if nnDouble(c) {
		return floatOf(ir.Double)
	}
	return floatOf(ir.Float)
}

// nnFloatKernels are the typed bodies of the nn_* files' kernels.
type nnFloatKernels interface {
	conv(c *Ctx, p *convPlan) error
	convTranspose(c *Ctx, p *convTPlan) error
	gemm(c *Ctx) error
	matMul(p *matmulPlan, a, b, y *Tensor)
	batchNorm(c *Ctx) error
	layerNorm(c *Ctx) error
	maxPool(c *Ctx, g nnGeom, planes int) error
	averagePool(c *Ctx, g nnGeom, planes int) error
	globalPool(c *Ctx, isMax bool)
	softmax(x, y *Tensor, outer, n, inner int, log bool)
}

// nnGemm computes C = alpha·op(A)·op(B) + beta·C on row-major matrices
// (op(A) m×k, op(B) k×n), split over Threads for float32 (sgemmPar).
func nnGemm[T elemFloat](transA, transB bool, m, n, k int, alpha T, a []T, lda int, b []T, ldb int, beta T, c []T, ldc int) {
	if nnIs32[T]() {
		sgemmPar(transA, transB, m, n, k, float32(alpha), nnAs[float32](a), lda, nnAs[float32](b), ldb, float32(beta), nnAs[float32](c), ldc)
		return
	}
	dgemm(transA, transB, m, n, k, float64(alpha), nnAs[float64](a), lda, nnAs[float64](b), ldb, float64(beta), nnAs[float64](c), ldc)
}

// nnGemmBatch computes count independent products; at(i) gives the
// operands of product i (see sgemmBatch).
func nnGemmBatch[T elemFloat](count int, transA, transB bool, m, n, k int, alpha, beta T,
	at func(i int) (a []T, lda int, b []T, ldb int, c []T, ldc int)) {
	if nnIs32[T]() {
		sgemmBatch(count, transA, transB, m, n, k, float32(alpha), float32(beta),
			func(i int) ([]float32, int, []float32, int, []float32, int) {
				a, lda, b, ldb, c, ldc := at(i)
				return nnAs[float32](a), lda, nnAs[float32](b), ldb, nnAs[float32](c), ldc
			})
		return
	}
	Parallel(count, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			a, lda, b, ldb, c, ldc := at(i)
			dgemm(transA, transB, m, n, k, float64(alpha), nnAs[float64](a), lda, nnAs[float64](b), ldb, float64(beta), nnAs[float64](c), ldc)
		}
	})
}

// Scratch bound of the column-matrix kernels (Conv's im2col,
// ConvTranspose's col2im). Their column matrix is cut into blocks so
// that the scratch (Kernel.Workspace, which the memory model counts as
// device memory live during the op) stays within
//
//	max(nnScratchMin, bytes of the output block one GEMM writes:
//	    one image, one group)
//
// and never exceeds the unblocked matrix. Conv blocks the GEMM's inner
// dimension K (im2col rows) and accumulates (beta = 1 after the first
// block); ConvTranspose blocks the rows or the columns (input pixels) of
// its GEMM's product, and col2im accumulates.
//
// The output term keeps Conv's blocks about as deep in K as its GEMM has
// rows (M/group; at least half that, blocks being balanced) while never
// raising the scratch above the op's output per image. nnScratchMin keeps
// blocks from getting thin where the output block is small. Measured
// (kernels/nn_bench_test.go, batch 8, 2 threads, CPU time, gonum and
// OpenBLAS): resnet18's Convs stay within noise (±5%) of the unblocked
// kernels even with a 256 KiB minimum, but ConvTranspose's column blocks
// lose about 10% (OpenBLAS) to 20% (gonum) at 256–512 KiB and 0–4% at
// 1 MiB. With the output term alone (no minimum) a weight-gradient Conv,
// whose output block is a few hundred bytes, runs 3–5× slower.
const nnScratchMin = 1 << 20

// nnScratchCap gives a column-matrix kernel's scratch bound in bytes
// from the bytes of the output block one GEMM writes.
type nnScratchCap func(outBytes int64) int64

// nnDefaultCap is the bound of the registered kernels; tests build
// kernels with smaller ones to force blocking.
func nnDefaultCap(outBytes int64) int64 { return max(nnScratchMin, outBytes) }

// nnBlock splits n items of itemBytes scratch each into the fewest blocks
// of at most capBytes (at least one item a block) and returns the block
// size: blocks of that size and a last one of the remainder.
func nnBlock(n int, itemBytes, capBytes int64) int {
	if n <= 0 {
		return 0
	}
	per := capBytes / max(1, itemBytes)
	if per >= int64(n) {
		return n
	}
	per = max(per, 1)
	nb := (int64(n) + per - 1) / per
	return int((int64(n) + nb - 1) / nb)
}
