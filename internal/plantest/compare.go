package plantest

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"

	"github.com/tsplit/tsplit/ir"
)

// Float32s reads little-endian float32 values.
func Float32s(b []byte) []float32 {
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

// SameOutput compares one output of g: bit-exact for integers; floats
// within tol of the output's largest magnitude (a sum merge
// reassociates).
func SameOutput(g *ir.Graph, name string, got, want []byte, tol float64) error {
	if len(got) != len(want) {
		return fmt.Errorf("output %q: %d bytes, want %d", name, len(got), len(want))
	}
	var dt ir.DType
	for _, v := range g.Outputs {
		if v.Name == name {
			dt = v.DType
		}
	}
	if dt != ir.Float {
		if !bytes.Equal(got, want) {
			return fmt.Errorf("output %q differs", name)
		}
		return nil
	}
	a, b := Float32s(want), Float32s(got)
	var scale, worst float64
	at := 0
	for i := range a {
		scale = max(scale, math.Abs(float64(a[i])))
		if d := math.Abs(float64(a[i] - b[i])); d > worst {
			worst, at = d, i
		}
	}
	if worst > tol*max(1, scale) {
		return fmt.Errorf("output %q[%d]: %g split, %g whole (largest |value| %g, normwise error %.2g)", name, at, b[at], a[at], scale, worst/max(1, scale))
	}
	return nil
}

// Clones counts the recompute clones of a graph.
func Clones(m *ir.Model) int {
	n := 0
	for _, op := range m.Graph.Order() {
		if op.Origin == "recompute" {
			n++
		}
	}
	return n
}

// Ramp is n float32 values, little-endian, rising in steps of 1/period
// from -0.45 and wrapping every period values: inputs whose elements
// differ across every dimension a split may cut.
func Ramp(n int, period int) []byte {
	raw := make([]byte, 4*n)
	for i := 0; i < n; i++ {
		binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(float32(i%period)/float32(period)-0.45))
	}
	return raw
}
