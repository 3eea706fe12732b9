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

//go:generate go run gen.go
