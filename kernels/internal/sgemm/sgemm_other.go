//go:build !amd64 || purego

package sgemm

// haveKernel: the micro-kernels are written for amd64 only.
const haveKernel = false

func kernel8x48(k int, a, b, c *float32, ldc int, alpha, beta float32) {
	panic("sgemm: the micro-kernels are amd64 only")
}

func kernel8x16(k int, a, b, c *float32, ldc int, alpha, beta float32) {
	panic("sgemm: the micro-kernels are amd64 only")
}

func transpose8(dst *float32, ldd int, src *float32, lds int, n int) {
	panic("sgemm: the micro-kernels are amd64 only")
}
