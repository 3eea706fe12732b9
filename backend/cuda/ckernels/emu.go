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

// gemm is the row-major product launch.Gemm describes, accumulated in
// float32 like a BLAS.
func (p *Pool) gemm(g *launch.Gemm) error {
	ra, ca := g.M, g.K
	if g.TransA {
		ra, ca = g.K, g.M
	}
	rb, cb := g.K, g.N
	if g.TransB {
		rb, cb = g.N, g.K
	}
	for b := int64(0); b < g.Batch; b++ {
		a, err := p.floats(g.A+uint64(4*b*g.StrideA), (ra-1)*g.LDA+ca)
		if err != nil {
			return err
		}
		bm, err := p.floats(g.B+uint64(4*b*g.StrideB), (rb-1)*g.LDB+cb)
		if err != nil {
			return err
		}
		c, err := p.floats(g.C+uint64(4*b*g.StrideC), (g.M-1)*g.LDC+g.N)
		if err != nil {
			return err
		}
		for i := int64(0); i < g.M; i++ {
			for j := int64(0); j < g.N; j++ {
				var acc float32
				for k := int64(0); k < g.K; k++ {
					var av, bv float32
					if g.TransA {
						av = a[k*g.LDA+i]
					} else {
						av = a[i*g.LDA+k]
					}
					if g.TransB {
						bv = bm[j*g.LDB+k]
					} else {
						bv = bm[k*g.LDB+j]
					}
					acc += av * bv
				}
				v := g.Alpha * acc
				if g.Beta != 0 {
					v += g.Beta * c[i*g.LDC+j]
				}
				c[i*g.LDC+j] = v
			}
		}
	}
	return nil
}
