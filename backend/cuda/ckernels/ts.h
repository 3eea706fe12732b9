/*
 * ts.h: what every tsplit CUDA kernel includes.
 *
 * The same sources build two ways. nvcc (__CUDACC__ defined) compiles
 * them to PTX for the CUDA device (make ptx). The project's C compiler
 * builds them for the host through cgo (package backend/cuda/ckernels),
 * where this header emulates the grid: blockIdx/threadIdx/blockDim/
 * gridDim are globals and ts_host_launch calls the kernel once per
 * (block, thread), in order. That emulation is exact because no kernel
 * uses shared memory, __syncthreads or warp functions: every thread
 * computes whole outputs from global memory on its own (grid-stride
 * loops), and the only cross-thread write (the scatter "add" reduction)
 * goes through atomicAdd.
 *
 * Every kernel takes one ts_args by value, so the host launcher, the
 * CUDA device and the Go side (package backend/cuda/launch, which lays
 * out the same struct) share one calling convention.
 */
#ifndef TS_H
#define TS_H

#define TS_MAXP 10 /* buffer addresses */
#define TS_MAXI 56 /* integer parameters (shapes, strides, codes) */
#define TS_MAXF 4  /* floating-point parameters */
#define TS_MAXR 8  /* highest tensor rank a strided kernel walks */

typedef struct {
	unsigned long long p[TS_MAXP]; /* device addresses (0: absent) */
	long long n;                   /* work items: the grid-stride bound */
	long long i[TS_MAXI];
	double f[TS_MAXF];
} ts_args;

#ifdef __CUDACC__
#define TS_KERNEL(name) extern "C" __global__ void name(ts_args a)
#define TS_DEVICE static __device__ __forceinline__
#else
#include <math.h>
#include <stdint.h>
typedef struct {
	unsigned int x, y, z;
} ts_dim3;
static ts_dim3 blockIdx, threadIdx, blockDim, gridDim;
#define TS_KERNEL(name) void name(ts_args a)
#define TS_DEVICE static inline
/* Sequential threads: the read-modify-write is atomic by construction. */
TS_DEVICE float atomicAdd(float *p, float v) {
	float old = *p;
	*p = old + v;
	return old;
}
#endif

/* TS_FOR walks this thread's work items t of [0, a.n). */
#define TS_FOR(t)                                                            \
	for (long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x; \
	     t < a.n; t += (long long)blockDim.x * gridDim.x)

/*
 * ts_offset maps the row-major index t over dims[0..rank) to the element
 * offset sum(coordinate[d] * strides[d]): strides 0 broadcast, negative
 * ones walk backwards (Slice with negative steps).
 */
TS_DEVICE long long ts_offset(long long t, int rank, const long long *dims,
			      const long long *strides) {
	long long off = 0;
	for (int d = rank - 1; d >= 0; d--) {
		long long c = t % dims[d];
		t /= dims[d];
		off += c * strides[d];
	}
	return off;
}

#endif
