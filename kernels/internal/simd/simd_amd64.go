//go:build amd64 && !purego

package simd

import "golang.org/x/sys/cpu"

var haveAVX512 = cpu.X86.HasAVX512F

// The loops of AddLanes, AddSqDevLanes and ScaleShift over n elements
// (n a positive multiple of 16), in simd_amd64.s.

//go:noescape
func addLanesAVX512(x *float32, n int, acc *[Lanes]float64)

//go:noescape
func addSqDevLanesAVX512(x *float32, n int, mean float64, acc *[Lanes]float64)

//go:noescape
func scaleShiftAVX512(y, x *float32, n int, a, b float32)

//go:noescape
func reluAVX512(y, x *float32, n int)
