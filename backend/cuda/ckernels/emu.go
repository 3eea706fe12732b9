package ckernels

// #cgo CFLAGS: -O2 -std=gnu99
// #cgo LDFLAGS: -lm
// #include <stdlib.h>
// #include "emu.h"
import "C"

import (
	"fmt"
	"unsafe"

	"github.com/tsplit/tsplit/backend/cuda/launch"
)

// ArgsSize is sizeof(ts_args) as the C compiler lays it out; it must
// equal unsafe.Sizeof(launch.Args{}).
const ArgsSize = int(C.sizeof_ts_args)

// Kernels lists the kernels the host launcher knows (list.h).
func Kernels() []string {
	n := int(C.ts_host_kernels())
	names := make([]string, n)
	for i := range names {
		names[i] = C.GoString(C.ts_host_kernel_name(C.int(i)))
	}
	return names
}

// Pool is host memory standing for the device pool: C-allocated, so
// its addresses can travel in ts_args like device pointers.
type Pool struct {
	base unsafe.Pointer
	size int64
}

// NewPool allocates size bytes, zeroed.
func NewPool(size int64) *Pool {
	if size < 1 {
		size = 1
	}
	return &Pool{base: C.calloc(C.size_t(size), 1), size: size}
}

// Free releases the memory.
func (p *Pool) Free() {
	C.free(p.base)
	p.base = nil
}

// Addr is the address of byte off, as the kernels see it.
func (p *Pool) Addr(off int64) uint64 { return uint64(uintptr(p.base)) + uint64(off) }

// Bytes is the pool's memory at address addr, n bytes long.
func (p *Pool) Bytes(addr uint64, n int64) ([]byte, error) {
	off := int64(addr - uint64(uintptr(p.base)))
	if addr < uint64(uintptr(p.base)) || off+n > p.size || n < 0 {
		return nil, fmt.Errorf("ckernels: [%#x, +%d) is outside the pool of %d bytes", addr, n, p.size)
	}
	return unsafe.Slice((*byte)(unsafe.Add(p.base, off)), n), nil
}

func (p *Pool) floats(addr uint64, n int64) ([]float32, error) {
	b, err := p.Bytes(addr, 4*n)
	if err != nil || n == 0 {
		return nil, err
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), n), nil
}

// Run executes a launch list over the pool.
func (p *Pool) Run(steps []launch.Step) error {
	for i, s := range steps {
		var err error
		switch {
		case s.Kernel != nil:
			err = p.launch(s.Kernel)
		case s.Gemm != nil:
			err = p.gemm(s.Gemm)
		case s.Upload != nil:
			var b []byte
			if b, err = p.Bytes(s.Upload.Dst, int64(len(s.Upload.Data))); err == nil {
				copy(b, s.Upload.Data)
			}
		default:
			err = fmt.Errorf("empty step")
		}
		if err != nil {
			return fmt.Errorf("step %d: %v", i, err)
		}
	}
	return nil
}

func (p *Pool) launch(k *launch.Kernel) error {
	name := C.CString(k.Name)
	defer C.free(unsafe.Pointer(name))
	// ts_args holds no Go pointers: addresses are integers into C memory.
	if C.ts_host_launch(name, (*C.ts_args)(unsafe.Pointer(&k.Args)), C.uint(k.Grid()), launch.Block) != 0 {
		return fmt.Errorf("ckernels: no kernel %q", k.Name)
	}
	return nil
}

// gemm runs the product as the CUDA device does: mapped to the
// column-major problem (launch.Gemm.ColumnMajor) and computed with
// cuBLAS's (reference BLAS) semantics, op(A)(i, k) being a[i + k·lda]
// untransposed and a[k + i·lda] transposed; sums in float32.
func (p *Pool) gemm(g *launch.Gemm) error {
	c := g.ColumnMajor()
	// stored extents (column-major: rows × cols, cols·ld elements)
	ra, ca := c.M, c.K
	if c.TransA {
		ra, ca = c.K, c.M
	}
	rb, cb := c.K, c.N
	if c.TransB {
		rb, cb = c.N, c.K
	}
	for b := int64(0); b < g.Batch; b++ {
		a, err := p.floats(c.A+uint64(4*b*c.StrideA), (ca-1)*c.LDA+ra)
		if err != nil {
			return err
		}
		bm, err := p.floats(c.B+uint64(4*b*c.StrideB), (cb-1)*c.LDB+rb)
		if err != nil {
			return err
		}
		cm, err := p.floats(c.C+uint64(4*b*c.StrideC), (c.N-1)*c.LDC+c.M)
		if err != nil {
			return err
		}
		for j := int64(0); j < c.N; j++ {
			for i := int64(0); i < c.M; i++ {
				var acc float32
				for k := int64(0); k < c.K; k++ {
					var av, bv float32
					if c.TransA {
						av = a[k+i*c.LDA]
					} else {
						av = a[i+k*c.LDA]
					}
					if c.TransB {
						bv = bm[j+k*c.LDB]
					} else {
						bv = bm[k+j*c.LDB]
					}
					acc += av * bv
				}
				v := g.Alpha * acc
				if g.Beta != 0 {
					v += g.Beta * cm[i+j*c.LDC]
				}
				cm[i+j*c.LDC] = v
			}
		}
	}
	return nil
}
