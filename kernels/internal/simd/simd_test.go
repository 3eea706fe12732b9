package simd

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestBitExact: each function against its definition, bit for bit, on
// lengths around the 16-element blocks and values of every magnitude
// (and NaN, ±Inf, -0): the assembly must compute what the Go loops do.
func TestBitExact(t *testing.T) {
	if !enabled {
		t.Log("no AVX-512: the Go loops are checked against themselves")
	}
	r := rand.New(rand.NewPCG(5, 6))
	special := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.Copysign(0, -1)), 1e-40, 3e38}
	for it := 0; it < 500; it++ {
		n := r.IntN(100)
		if it%10 == 0 {
			n = 16*r.IntN(300) + r.IntN(3)
		}
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(r.NormFloat64() * math.Pow(10, float64(r.IntN(12)-6)))
			if r.IntN(200) == 0 {
				x[i] = special[r.IntN(len(special))]
			}
		}
		var got, want [Lanes]float64
		for i := range got {
			got[i] = r.NormFloat64()
			want[i] = got[i]
		}
		AddLanes(x, &got)
		for j, v := range x {
			want[j%Lanes] += float64(v)
		}
		same(t, "AddLanes", n, got[:], want[:])

		mean := r.NormFloat64()
		AddSqDevLanes(x, mean, &got)
		for j, v := range x {
			d := float64(v) - mean
			want[j%Lanes] += d * d
		}
		same(t, "AddSqDevLanes", n, got[:], want[:])

		a, b := float32(r.NormFloat64()), float32(r.NormFloat64())
		y := make([]float32, n)
		ScaleShift(y, x, a, b)
		for j, v := range x {
			w := v*a + b
			if math.Float32bits(y[j]) != math.Float32bits(w) && !(y[j] != y[j] && w != w) {
				t.Fatalf("ScaleShift n=%d: y[%d] = %v, want %v", n, j, y[j], w)
			}
		}
		Relu(y, x)
		for j, v := range x {
			if w := max(v, 0); math.Float32bits(y[j]) != math.Float32bits(w) && !(y[j] != y[j] && w != w) {
				t.Fatalf("Relu n=%d: y[%d] = %v for %v, want %v", n, j, y[j], v, w)
			}
		}
		ScaleShift(y, x, a, b)
		ScaleShift(x, x, a, b) // in place
		for j := range x {
			if math.Float32bits(x[j]) != math.Float32bits(y[j]) && !(x[j] != x[j] && y[j] != y[j]) {
				t.Fatalf("ScaleShift in place n=%d: x[%d] = %v, want %v", n, j, x[j], y[j])
			}
		}
	}
}

func same(t *testing.T, what string, n int, got, want []float64) {
	t.Helper()
	for i := range got {
		if math.Float64bits(got[i]) != math.Float64bits(want[i]) && !(got[i] != got[i] && want[i] != want[i]) {
			t.Fatalf("%s n=%d: lane %d = %v, want %v", what, n, i, got[i], want[i])
		}
	}
}
