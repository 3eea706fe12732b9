package executor_test

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/tsplit/tsplit/executor"
	"github.com/tsplit/tsplit/ir"
	. "github.com/tsplit/tsplit/ir/irtest"
)

// The finite check stops a run at the first op that computes a NaN or
// an Inf of its own, or at a fed input that holds one, and names it;
// an Inf that comes from a constant (an attention mask of -Inf) passes.
// Without the check the same runs finish (issue 12 item 12: NaN inputs
// or a learning rate of 1e308 trained to NaN with exit 0).
func TestCheckFinite(t *testing.T) {
	inf := float32(math.Inf(-1))
	nan := float32(math.NaN())
	// x[2,4] → Log → Relu → Add(mask) → y; mask is an initializer.
	model := func(t *testing.T, mask float32) *ir.Model {
		b := New(t)
		x := b.Input("x", ir.Float, 2, 4)
		l := b.Op("Log", V(x))
		r := b.Op("Relu", V(l))
		m := b.Init("mask", &ir.Tensor{DType: ir.Float, Shape: ir.Shape{4}, Raw: floats(4, func(i int) float32 {
			if i == 3 {
				return mask
			}
			return 0
		})})
		return b.Return(b.Op("Add", V(r, m)))
	}
	pos := floats(8, func(i int) float32 { return float32(i + 1) })
	for _, c := range []struct {
		name  string
		mask  float32
		x     []byte
		want  []string // substrings of the error; nil: the run succeeds
		input bool
	}{
		{"finite", 0, pos, nil, false},
		{"-Inf mask constant", inf, pos, nil, false},
		{"Log of a negative", 0, floats(8, func(i int) float32 { return float32(i) - 2 }), []string{`node "Log1" (Log)`, `output "Log1_0" holds NaN at element 0`}, false},
		{"Log of zero", 0, floats(8, func(i int) float32 { return float32(i) }), []string{`node "Log1" (Log)`, "holds -Inf at element 0"}, false},
		{"NaN mask constant", nan, pos, []string{`input "mask" holds NaN at element 3`}, true},
		{"NaN input", 0, floats(8, func(i int) float32 {
			if i == 5 {
				return nan
			}
			return 1
		}), []string{`input "x" holds NaN at element 5`}, true},
		{"Inf input", 0, floats(8, func(i int) float32 {
			if i == 2 {
				return float32(math.Inf(1))
			}
			return 1
		}), []string{`input "x" holds +Inf at element 2`}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := map[string][]byte{"x": c.x}
			m := model(t, c.mask)
			x, err := executor.New(m, mustCPU(t, 1<<16), executor.Options{CheckFinite: true})
			if err != nil {
				t.Fatal(err)
			}
			_, err = x.Run(in)
			if c.want == nil {
				if err != nil {
					t.Fatalf("a finite run (or an Inf from a constant) failed: %v", err)
				}
				return
			}
			var nf *executor.NonFiniteError
			if !errors.As(err, &nf) || nf.Input != c.input {
				t.Fatalf("%v, want a NonFiniteError (input %v)", err, c.input)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			// Without the check the run finishes.
			x, err = executor.New(model(t, c.mask), mustCPU(t, 1<<16), executor.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := x.Run(in); err != nil {
				t.Errorf("without the check: %v", err)
			}
		})
	}
}
