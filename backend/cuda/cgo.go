//go:build cuda

package cuda

// The driver and cuBLAS calls gorgonia.org/cu v0.9.6 does not offer in
// a usable form: a launch whose one parameter is the 568-byte ts_args
// (cu's Function.Launch copies 8 bytes per parameter), page-locked
// host allocation, and cuBLAS on raw device addresses (cu/blas takes Go
// slices). They share cu's context: the driver keeps the current
// context per OS thread, whichever library set it.

/*
#cgo CFLAGS: -I/usr/local/cuda/include
#cgo LDFLAGS: -L/usr/local/cuda/lib64 -lcuda -lcublas
#include <cuda.h>
#include <cublas_v2.h>
#include <stdlib.h>

static int ts_module_load(CUmodule *m, const char *image) { return (int)cuModuleLoadData(m, image); }
static int ts_module_function(CUfunction *f, CUmodule m, const char *name) { return (int)cuModuleGetFunction(f, m, name); }
static int ts_module_unload(CUmodule m) { return (int)cuModuleUnload(m); }

// ts_launch copies the argument block into the launch (cuLaunchKernel
// reads the parameter values before it returns).
static int ts_launch(CUfunction f, unsigned grid, unsigned block, void *stream, void *args) {
	void *params[1] = {args};
	return (int)cuLaunchKernel(f, grid, 1, 1, block, 1, 1, 0, (CUstream)stream, params, NULL);
}

static int ts_host_alloc(void **p, size_t n) { return (int)cuMemAllocHost(p, n); }
static int ts_host_free(void *p) { return (int)cuMemFreeHost(p); }

static int ts_blas_create(cublasHandle_t *h) { return (int)cublasCreate(h); }
static int ts_blas_destroy(cublasHandle_t h) { return (int)cublasDestroy(h); }
static int ts_blas_stream(cublasHandle_t h, void *stream) { return (int)cublasSetStream(h, (cudaStream_t)stream); }

// ts_sgemm is cublasSgemmStridedBatched on addresses given as integers.
static int ts_sgemm(cublasHandle_t h, int ta, int tb, int m, int n, int k, float alpha,
	unsigned long long a, int lda, long long sa, unsigned long long b, int ldb, long long sb,
	float beta, unsigned long long c, int ldc, long long sc, int batch) {
	return (int)cublasSgemmStridedBatched(h, ta ? CUBLAS_OP_T : CUBLAS_OP_N, tb ? CUBLAS_OP_T : CUBLAS_OP_N,
		m, n, k, &alpha, (const float *)a, lda, sa, (const float *)b, ldb, sb, &beta, (float *)c, ldc, sc, batch);
}
*/
import "C"

import (
	"fmt"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/tsplit/tsplit/backend/cuda/launch"
)

func driverErr(what string, rc C.int) error {
	if rc == 0 {
		return nil
	}
	return fmt.Errorf("cuda: %s: CUresult %d", what, int(rc))
}

func blasErr(what string, rc C.int) error {
	if rc == 0 {
		return nil
	}
	return fmt.Errorf("cuda: %s: cuBLAS status %d", what, int(rc))
}

// module is the loaded PTX and its kernels by name.
type module struct {
	m   C.CUmodule
	fns map[string]C.CUfunction
}

func loadModule(image string, names []string) (*module, error) {
	cs := C.CString(image)
	defer C.free(unsafe.Pointer(cs))
	mod := &module{fns: map[string]C.CUfunction{}}
	if err := driverErr("loading the PTX module", C.int(C.ts_module_load(&mod.m, cs))); err != nil {
		return nil, err
	}
	for _, n := range names {
		cn := C.CString(n)
		var f C.CUfunction
		rc := C.ts_module_function(&f, mod.m, cn)
		C.free(unsafe.Pointer(cn))
		if err := driverErr("kernel "+n, C.int(rc)); err != nil {
			C.ts_module_unload(mod.m)
			return nil, err
		}
		mod.fns[n] = f
	}
	return mod, nil
}

func (m *module) unload() { C.ts_module_unload(m.m) }

func streamPtr(s cu.Stream) unsafe.Pointer { return unsafe.Pointer(s.C()) }

// launchKernel queues one kernel on stream.
func (m *module) launchKernel(k *launch.Kernel, s cu.Stream) error {
	f, ok := m.fns[k.Name]
	if !ok {
		return fmt.Errorf("cuda: the PTX module has no kernel %q", k.Name)
	}
	// ts_args holds integers only; C reads it before cuLaunchKernel returns.
	args := C.malloc(C.size_t(unsafe.Sizeof(k.Args)))
	defer C.free(args)
	*(*launch.Args)(args) = k.Args
	return driverErr("launching "+k.Name, C.int(C.ts_launch(f, C.uint(k.Grid()), launch.Block, streamPtr(s), args)))
}

// pinned is a page-locked host buffer.
type pinned struct {
	p unsafe.Pointer
	n int
}

func allocPinned(n int) (*pinned, error) {
	var p unsafe.Pointer
	if err := driverErr(fmt.Sprintf("page-locking %d host bytes", n), C.int(C.ts_host_alloc(&p, C.size_t(n)))); err != nil {
		return nil, err
	}
	return &pinned{p: p, n: n}, nil
}

func (b *pinned) bytes() []byte { return unsafe.Slice((*byte)(b.p), b.n) }

func (b *pinned) free() { C.ts_host_free(b.p) }

// blas is a cuBLAS handle bound to a stream.
type blas struct{ h C.cublasHandle_t }

func newBlas(s cu.Stream) (*blas, error) {
	b := &blas{}
	if err := blasErr("cublasCreate", C.int(C.ts_blas_create(&b.h))); err != nil {
		return nil, err
	}
	if err := blasErr("cublasSetStream", C.int(C.ts_blas_stream(b.h, streamPtr(s)))); err != nil {
		C.ts_blas_destroy(b.h)
		return nil, err
	}
	return b, nil
}

func (b *blas) destroy() { C.ts_blas_destroy(b.h) }

// gemm runs launch's row-major product through cuBLAS's column-major
// one (launch.Gemm.ColumnMajor, checked on the host by package
// ckernels).
func (b *blas) gemm(g *launch.Gemm) error {
	c := g.ColumnMajor()
	return blasErr("cublasSgemmStridedBatched", C.int(C.ts_sgemm(b.h, cbool(c.TransA), cbool(c.TransB),
		C.int(c.M), C.int(c.N), C.int(c.K), C.float(g.Alpha),
		C.ulonglong(c.A), C.int(c.LDA), C.longlong(c.StrideA),
		C.ulonglong(c.B), C.int(c.LDB), C.longlong(c.StrideB),
		C.float(g.Beta), C.ulonglong(c.C), C.int(c.LDC), C.longlong(c.StrideC), C.int(g.Batch))))
}

func cbool(b bool) C.int {
	if b {
		return 1
	}
	return 0
}
