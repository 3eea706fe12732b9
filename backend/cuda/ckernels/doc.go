// Package ckernels holds the CUDA C kernels of the CUDA device (the .cu
// files of this directory: ts.h, the calling convention and the grid
// emulation; all.cu, the one translation unit) and runs them on the
// host: cgo compiles the same sources with the project's C compiler,
// ts.h standing in for the CUDA grid, so the tests compare every kernel
// with the reference kernels of package kernels without a GPU. It also
// executes package launch's matrix products (mapped to column-major as
// the device maps them for cuBLAS, then a plain loop with BLAS
// semantics in place of cuBLAS) and uploads, so an op's whole launch list runs here
// as on the device, over one C-allocated pool standing for the device's
// memory.
//
// Sources embeds the kernel sources: that makes the go command rebuild
// this package when a .cu file changes (it does not track C files it
// only reaches through #include), and lets the tests check that the
// committed PTX (package backend/cuda/ptx, make ptx) was generated from
// these very sources.
//
// It builds by default (no CUDA headers needed); it is a test vehicle,
// not a device: the executor never uses it.
package ckernels
