//go:build amd64 && !purego

package sgemm

import "golang.org/x/sys/cpu"

// haveKernel: the micro-kernel needs AVX-512F (and the operating
// system's support for its registers, which cpu checks).
var haveKernel = cpu.X86.HasAVX512F

// The micro-kernels (sgemm_amd64.s, written by gen.go): the 8×48 and
// 8×16 blocks of C at c (row stride ldc) = alpha·(packed A panel a,
// k×8)·(packed B panel b, k×48 or k×16) + beta·C, C unread when beta is
// zero.
//
//go:noescape
func kernel8x48(k int, a, b, c *float32, ldc int, alpha, beta float32)

//go:noescape
func kernel8x16(k int, a, b, c *float32, ldc int, alpha, beta float32)

// transpose8 writes, for each column c < n (n a multiple of 8) of the 8
// rows src, src+lds, …, src+7·lds (strides in floats), the 8 values of
// that column to dst + c·ldd, consecutively: the k-major layout of a
// packed panel, from rows.
//
//go:noescape
func transpose8(dst *float32, ldd int, src *float32, lds int, n int)

//go:generate go run gen.go
