package simd

import "os"

// enabled: the assembly runs (AVX-512F, and TSPLIT_SGEMM=blas not set:
// the switch that keeps package kernels off its own assembly).
var enabled = haveAVX512 && os.Getenv("TSPLIT_SGEMM") != "blas"

// Lanes is how many partial sums AddLanes and AddSqDevLanes keep.
const Lanes = 16

// AddLanes adds float64(x[j]) to acc[j mod Lanes] for every j: the sum
// of x in Lanes partial sums, which do not wait on each other.
func AddLanes(x []float32, acc *[Lanes]float64) {
	n := 0
	if enabled {
		n = len(x) &^ (Lanes - 1)
		if n > 0 {
			addLanesAVX512(&x[0], n, acc)
		}
	}
	for j := n; j < len(x); j++ {
		acc[j%Lanes] += float64(x[j])
	}
}

// AddSqDevLanes adds (float64(x[j]) - mean)² to acc[j mod Lanes] (the
// square a product, then added: no fused multiply-add).
func AddSqDevLanes(x []float32, mean float64, acc *[Lanes]float64) {
	n := 0
	if enabled {
		n = len(x) &^ (Lanes - 1)
		if n > 0 {
			addSqDevLanesAVX512(&x[0], n, mean, acc)
		}
	}
	for j := n; j < len(x); j++ {
		d := float64(x[j]) - mean
		acc[j%Lanes] += d * d
	}
}

// ScaleShift sets y[j] = x[j]·a + b (a product rounded, then a sum
// rounded: no fused multiply-add); y and x have the same length and may
// be the same slice.
func ScaleShift(y, x []float32, a, b float32) {
	x = x[:len(y)]
	n := 0
	if enabled {
		n = len(y) &^ 15
		if n > 0 {
			scaleShiftAVX512(&y[0], &x[0], n, a, b)
		}
	}
	for j := n; j < len(y); j++ {
		y[j] = x[j]*a + b
	}
}

// Relu sets y[j] = max(x[j], 0) as Go's max does it: NaN stays NaN, -0
// becomes +0. y and x have the same length and may be the same slice.
func Relu(y, x []float32) {
	x = x[:len(y)]
	n := 0
	if enabled {
		n = len(y) &^ 15
		if n > 0 {
			reluAVX512(&y[0], &x[0], n)
		}
	}
	for j := n; j < len(y); j++ {
		y[j] = max(x[j], 0)
	}
}
