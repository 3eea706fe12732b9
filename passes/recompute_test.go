package passes

import (
	"bytes"
	"testing"

	"github.com/tsplit/tsplit/executor"
	"github.com/tsplit/tsplit/internal/plantest"
	"github.com/tsplit/tsplit/ir"
	. "github.com/tsplit/tsplit/ir/irtest"
)

// Tests of recomputation chains (TSPLIT §V-D, memory-centric) and of the
// LRU reuse of their clones (reuseRecomputed).

// lruCase is a graph where two consumers far apart need tensors derived
// from the same dead intermediate: t1 = Sigmoid(a) at P1, t2 = Tanh(a) at
// P2, a = Relu(x·W). Between P1 and P2 a large temporary (Tile) makes
// the peak. The plan is the one the tsplit planner emits for two
// memory-centric chains: members h = x·W and a, then the target, before
// each consumer.
func lruCase(t *testing.T) (*ir.Model, *Plan, map[string][]byte) {
	b := New(t)
	x := b.Input("x", ir.Float, 256, 64)
	h := b.Op("MatMul", V(x, plantest.Weight(b, "w", 64, 64)))
	a := b.Op("Relu", V(h))
	t1 := b.Op("Sigmoid", V(a))
	t2 := b.Op("Tanh", V(a))
	u1 := b.Op("Mul", V(t1, x))                                           // P1
	z := b.Op("Tile", V(u1, b.Ints("reps", 8, 1)))                        // 512 KiB
	r := b.Op("ReduceMean", V(z), Ints("axes", 0, 1), Int("keepdims", 1)) // [1,1]
	u2 := b.Op("Mul", V(t2, x))                                           // P2
	m := b.Return(b.Op("Add", V(u2, r)))
	pos := m.Graph.Position()
	at := func(v *ir.Value) int { return pos[v.Def.ID] }
	chain := func(target *ir.Value, consumer int) []*Decision {
		return []*Decision{
			{Value: h, Option: Recompute, After: at(a), Before: consumer, At: consumer - 1},
			{Value: a, Option: Recompute, After: at(t2), Before: consumer, At: consumer - 1},
			{Value: target, Option: Recompute, After: at(target), Before: consumer, At: consumer - 1, DeltaM: target.Bytes()},
		}
	}
	plan := &Plan{Decisions: append(chain(t1, at(u1)), chain(t2, at(u2))...)}
	raw := make([]byte, 256*64*4)
	for i := range raw {
		raw[i] = byte(i*7 + 3)
	}
	for i := 3; i < len(raw); i += 4 {
		raw[i] = 0x3e // small positive and negative floats
		if i%8 == 3 {
			raw[i] = 0xbe
		}
	}
	return m, plan, map[string][]byte{"x": raw}
}

// runLRU runs a model with the memory model's pool and checks the
// measured high-water mark against the memory model.
func runLRU(t *testing.T, m *ir.Model, in map[string][]byte) *executor.Result {
	t.Helper()
	res := plantest.RunUnplanned(t, m, in)
	if peak := plantest.Peak(t, m); res.HighWater != peak {
		t.Errorf("measured high-water %d, memory model %d", res.HighWater, peak)
	}
	return res
}

// TestRecomputeLRU inserts the two chains of lruCase at three budgets.
// Memory-centric, each chain clones h, a and its target (six clones).
// With room under the budget, the second chain reads the first chain's a
// (kept across the Tile: LRU reuse), and its h and a go (four clones).
// With a budget of exactly the memory-centric peak, which the Tile
// makes, keeping a (or h) across it does not fit: six clones. Without a
// budget nothing is reused. Every variant verifies, fits its budget and
// computes the original graph's output bit for bit.
func TestRecomputeLRU(t *testing.T) {
	orig, _, in := lruCase(t)
	want := runLRU(t, orig, in)
	// The memory-centric peak: no budget, no reuse.
	mc, plan, _ := lruCase(t)
	if err := InsertSwapRecompute(mc, plan); err != nil {
		t.Fatal(err)
	}
	mcPeak := plantest.Peak(t, mc)
	for _, c := range []struct {
		name   string
		budget int64
		clones int
	}{
		{"no budget", 0, 6},
		{"room", mcPeak + 1<<20, 4},
		{"tight", mcPeak, 6},
	} {
		t.Run(c.name, func(t *testing.T) {
			m, plan, _ := lruCase(t)
			plan.Budget = c.budget
			if err := InsertSwapRecompute(m, plan); err != nil {
				t.Fatal(err)
			}
			if err := ir.Verify(m); err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			if err := ir.Dump(&buf, m.Graph); err != nil {
				t.Fatal(err)
			}
			n := plantest.Clones(m)
			peak := plantest.Peak(t, m)
			t.Logf("budget %d: %d clones, peak %d (memory-centric peak %d)", c.budget, n, peak, mcPeak)
			if n != c.clones {
				t.Errorf("%d clones, want %d:\n%s", n, c.clones, buf.String())
			}
			if c.budget > 0 && peak > c.budget {
				t.Errorf("peak %d over the budget %d", peak, c.budget)
			}
			got := runLRU(t, m, in)
			for name, w := range want.Outputs {
				if !bytes.Equal(w, got.Outputs[name]) {
					t.Errorf("output %q differs from the original graph's", name)
				}
			}
		})
	}
}
