// Package simd holds the few float32 loops of the memory-bound kernels
// that the Go compiler does not vectorise, in AVX-512 assembly on
// processors that have it (the ones package sgemm serves): the
// statistics and the scale-and-shift of BatchNormalization, and Relu. Each has a
// Go version computing bit for bit the same results (same lanes, same
// order of additions, no fused multiply-add), used elsewhere and by the
// tests to check the assembly. The functions run on the calling
// goroutine.
package simd
