// Package kernels holds tsplit's reference kernels (float32, and
// float64 for gradient checks; integer and boolean types where shape
// arithmetic and masks need them): one Kernel
// per operator of the op table (package ir), registered under the same
// domain and type. The CPU reference device runs them; they compute
// every op for real, on memory the executor places inside the device
// pool, including their scratch space (Workspace), so the memory the
// runtime measures is the memory the planner models.
//
// Kernel bodies are written once, generic over their element type, as
// methods of the small generic types of misc_elem.go; numOf, floatOf
// and wordOf there pick the instantiation for a tensor's type.
//
// Matrix products go through BLAS, or tsplit's own GEMM on processors
// with AVX-512 (see blas.go for which one and why); convolutions pack
// their column matrices straight into that GEMM (nn_conv_implicit.go).
// Kernels split work over GOMAXPROCS goroutines with Parallel.
package kernels
