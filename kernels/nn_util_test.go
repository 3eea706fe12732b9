package kernels

import (
	"math"
	"testing"
)

// checkClose compares got with the float64 reference want: each element
// within tol relative to max(|want[i]|, rms(want), 1e-3). Relative to the
// tensor's RMS, not only the element, because float32 accumulation of a
// long sum errs in proportion to the sum's terms, not to its (possibly
// cancelling) value.
func checkClose(t testing.TB, what string, got []float32, want []float64, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	var ss float64
	for _, w := range want {
		if !math.IsInf(w, 0) && !math.IsNaN(w) {
			ss += w * w
		}
	}
	rms := math.Sqrt(ss / math.Max(1, float64(len(want))))
	floor := math.Max(rms, 1e-3)
	bad := 0
	for i := range got {
		g, w := float64(got[i]), want[i]
		if math.IsNaN(w) && math.IsNaN(g) || math.IsInf(w, 0) && g == w {
			continue
		}
		if d := math.Abs(g - w); !(d <= tol*math.Max(floor, math.Abs(w))) {
			if bad < 5 {
				t.Errorf("%s: element %d is %v, want %v (diff %.3g, rms %.3g)", what, i, g, w, d, rms)
			}
			bad++
		}
	}
	if bad > 0 {
		t.Fatalf("%s: %d of %d elements differ", what, bad, len(got))
	}
}
