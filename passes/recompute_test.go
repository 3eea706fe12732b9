package passes

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/tsplit/tsplit/executor"
	"github.com/tsplit/tsplit/ir"
	. "github.com/tsplit/tsplit/ir/irtest"
)

// Tests of recomputation chains (TSPLIT §V-D, memory-centric) and of the
// LRU reuse of their clones (reuseRecomputed).

// recomputeMLP is the training step (SGD) of a perceptron of layers
// Relu(x·W + b) layers of width 64 at batch 256: activations dominate,
// and every tensor the backward pass reads is either a Relu output
// (whose producer reads a dead pre-activation) or a mask computed from
// it by a backward op, so only chains can recompute anything.
func recomputeMLP(t *testing.T, layers int) *ir.Model {
	b := New(t)
	h := b.Input("x", ir.Float, 256, 32)
	in := int64(32)
	for l := 0; l < layers; l++ {
		w := goldenWeight(b, fmt.Sprintf("fc%d.weight", l), in, 64)
		h = b.Op("Relu", V(b.Op("Add", V(b.Op("MatMul", V(h, w)), goldenWeight(b, fmt.Sprintf("fc%d.bias", l), 64)))))
		in = 64
	}
	return goldenTrain(t, b.Return(b.Op("MatMul", V(h, goldenWeight(b, "out.weight", 64, 10)))))
}

// recomputeClones counts the clone ops of a graph.
func recomputeClones(m *ir.Model) int {
	n := 0
	for _, op := range m.Graph.Order() {
		if op.Origin == "recompute" {
			n++
		}
	}
	return n
}

// TestRecomputeChains plans a six-layer perceptron with recomputation
// only (NoSwap) into 0.9 and 0.75 of its depth-first peak. Recomputing a
// single producer whose inputs are live finds nothing to evict there;
// chains back to the graph input plan it. The planned step runs on a CPU
// device capped at the budget: its measured high-water mark is the
// plan's peak, and its outputs (loss, updated weights) are bit-exact
// with the unplanned step's.
func TestRecomputeChains(t *testing.T) {
	const layers = 6
	probe := recomputeMLP(t, layers)
	if err := NewState(probe, nil).Run(Schedule); err != nil {
		t.Fatal(err)
	}
	peak := accPeak(t, probe)
	for _, ratio := range []float64{0.9, 0.75} {
		t.Run(fmt.Sprintf("%.2f", ratio), func(t *testing.T) {
			budget := int64(float64(peak) * ratio)

			// Single-producer recomputation: no plan.
			chainOps := maxChainOps
			maxChainOps = 1
			err := NewState(recomputeMLP(t, layers), &Options{Budget: budget, NoSwap: true}).Run(Pipeline...)
			maxChainOps = chainOps
			var ie *InfeasibleError
			if !errors.As(err, &ie) {
				t.Fatalf("single-producer recomputation at %d bytes: got %v, want an *InfeasibleError", budget, err)
			}

			m := recomputeMLP(t, layers)
			s := NewState(m, &Options{Budget: budget, NoSwap: true})
			s.Check = true // ir.Verify after every pass
			if err := s.Run(Pipeline...); err != nil {
				t.Fatalf("chains at %d bytes (%.2f of the peak %d): %v", budget, ratio, peak, err)
			}
			r := s.Report
			targets, members, longest, run := 0, 0, 0, 0
			for _, d := range r.Decisions {
				if d.Option != "recompute" {
					t.Errorf("decision %s %s with swapping off", d.Option, d.Tensor)
				}
				if d.DeltaM == 0 {
					members++
					run++
					continue
				}
				targets++
				longest = max(longest, run+1)
				run = 0
			}
			clones := recomputeClones(m)
			t.Logf("budget %d (%.2f × %d): peak %d, pool %d; %d recompute decisions: %d targets, %d chain members, longest chain %d ops; %d clones after LRU reuse; simulated step %.3f ms vs %.3f ms; %d rounds",
				budget, ratio, peak, r.Peak, r.Pool, len(r.Decisions), targets, members, longest, clones, r.Time*1e3, r.BaseTime*1e3, r.Rounds)
			if members == 0 || longest < 3 {
				t.Errorf("no recomputation chain: %d members, longest chain %d ops", members, longest)
			}
			if clones == 0 || clones >= len(r.Decisions) {
				t.Errorf("%d clones for %d decisions: the budget has room to reuse the clones of earlier chains", clones, len(r.Decisions))
			}
			if r.Peak > budget || r.Pool > budget {
				t.Errorf("peak %d, pool %d over the budget %d", r.Peak, r.Pool, budget)
			}
			if p := accPeak(t, m); p != r.Peak {
				t.Errorf("Report.Peak %d, memory model of the planned graph %d", r.Peak, p)
			}
			accUniqueNames(t, m)

			base := recomputeMLP(t, layers)
			in := accInputs(t, base, "mlp")
			want := accRunUnplanned(t, base, in)
			got, x := accRunPlanned(t, m, budget, in)
			if got.HighWater > budget || got.HighWater != r.Peak || got.HighWater != x.Mem.Peak {
				t.Errorf("measured high-water %d, Report.Peak %d, memory model %d, budget %d", got.HighWater, r.Peak, x.Mem.Peak, budget)
			}
			if same, _ := accCompare(t, base, want.Outputs, got.Outputs, 0); same != len(base.Graph.Outputs) {
				t.Errorf("%d of %d outputs bit-exact", same, len(base.Graph.Outputs))
			}
		})
	}
}

// lruCase is a graph where two consumers far apart need tensors derived
// from the same dead intermediate: t1 = Sigmoid(a) at P1, t2 = Tanh(a) at
// P2, a = Relu(x·W). Between P1 and P2 a large temporary (Tile) makes
// the peak. The plan is the one the tsplit planner emits for two
// memory-centric chains: members h = x·W and a, then the target, before
// each consumer.
func lruCase(t *testing.T) (*ir.Model, *Plan, map[string][]byte) {
	b := New(t)
	x := b.Input("x", ir.Float, 256, 64)
	h := b.Op("MatMul", V(x, goldenWeight(b, "w", 64, 64)))
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
	res := accRunUnplanned(t, m, in)
	if peak := accPeak(t, m); res.HighWater != peak {
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
	mcPeak := accPeak(t, mc)
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
			n := recomputeClones(m)
			peak := accPeak(t, m)
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
