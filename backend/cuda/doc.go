// Package cuda is the CUDA device: an executor.Device that runs a
// planned training step on an NVIDIA GPU, with one device allocation
// for the whole pool (it never grows, so the measured high-water is the
// plan's), three CUDA streams (compute, H2D, D2H) driven by the
// executor's three stream goroutines, copies through page-locked
// staging buffers, matrix products on cuBLAS, and every other op as a
// launch of the CUDA C kernels of package ckernels, compiled to PTX
// (package ptx, make ptx) and loaded as one module.
//
// Everything that touches CUDA is behind the build tag cuda: it needs
// cuda.h, cublas_v2.h, libcuda and libcublas to build (make cuda-check
// installs Debian's nvidia-cuda-dev), and gorgonia.org/cu, which it
// uses for the context, the pool, the streams and the copies, ends the
// process at start-up on a machine without a GPU. Without the tag this
// package is empty and the default build never links CUDA. What the
// device computes is decided by pure-Go package launch and checked on
// the host by package ckernels; docs/cuda.md has the design.
package cuda
