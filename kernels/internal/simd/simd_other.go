//go:build !amd64 || purego

package simd

const haveAVX512 = false

func addLanesAVX512(x *float32, n int, acc *[Lanes]float64) {
	panic("simd: amd64 only")
}

func addSqDevLanesAVX512(x *float32, n int, mean float64, acc *[Lanes]float64) {
	panic("simd: amd64 only")
}

func scaleShiftAVX512(y, x *float32, n int, a, b float32) {
	panic("simd: amd64 only")
}

func reluAVX512(y, x *float32, n int) {
	panic("simd: amd64 only")
}
