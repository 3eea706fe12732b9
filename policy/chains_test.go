package policy

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/tsplit/tsplit/internal/plantest"
	"github.com/tsplit/tsplit/ir"
	. "github.com/tsplit/tsplit/ir/irtest"
	"github.com/tsplit/tsplit/passes"
)

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
		w := plantest.Weight(b, fmt.Sprintf("fc%d.weight", l), in, 64)
		h = b.Op("Relu", V(b.Op("Add", V(b.Op("MatMul", V(h, w)), plantest.Weight(b, fmt.Sprintf("fc%d.bias", l), 64)))))
		in = 64
	}
	return plantest.Train(t, b.Return(b.Op("MatMul", V(h, plantest.Weight(b, "out.weight", 64, 10)))))
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
	if err := passes.NewState(probe, nil).Run(passes.Schedule); err != nil {
		t.Fatal(err)
	}
	peak := plantest.Peak(t, probe)
	for _, ratio := range []float64{0.9, 0.75} {
		t.Run(fmt.Sprintf("%.2f", ratio), func(t *testing.T) {
			budget := int64(float64(peak) * ratio)

			// Single-producer recomputation: no plan.
			chainOps := maxChainOps
			maxChainOps = 1
			_, err := Plan(context.Background(), recomputeMLP(t, layers), Tsplit, Options{Budget: budget, NoSwap: true, Order: passes.OrderDFS})
			maxChainOps = chainOps
			var ie *passes.InfeasibleError
			if !errors.As(err, &ie) {
				t.Fatalf("single-producer recomputation at %d bytes: got %v, want an *InfeasibleError", budget, err)
			}

			m := recomputeMLP(t, layers)
			s, err := Plan(context.Background(), m, Tsplit, Options{Budget: budget, NoSwap: true, Check: true, Order: passes.OrderDFS})
			if err != nil {
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
			clones := plantest.Clones(m)
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
			if p := plantest.Peak(t, m); p != r.Peak {
				t.Errorf("Report.Peak %d, memory model of the planned graph %d", r.Peak, p)
			}
			plantest.UniqueNames(t, m)

			runsBitExact(t, recomputeMLP(t, layers), m, budget, r)
		})
	}
}

// runsBitExact runs the planned step m capped at budget and its
// unplanned step base on the same inputs: the measured high-water must
// be the report's and the memory model's peak, within the budget, and
// every output bit-exact.
func runsBitExact(t *testing.T, base, m *ir.Model, budget int64, r *passes.Report) {
	t.Helper()
	in := plantest.Inputs(t, base)
	want := plantest.RunUnplanned(t, base, in)
	got, x := plantest.RunPlanned(t, m, budget, in)
	if got.HighWater > budget || got.HighWater != r.Peak || got.HighWater != x.Mem.Peak {
		t.Errorf("measured high-water %d, Report.Peak %d, memory model %d, budget %d", got.HighWater, r.Peak, x.Mem.Peak, budget)
	}
	if same, _ := accCompare(t, base, want.Outputs, got.Outputs, 0); same != len(base.Graph.Outputs) {
		t.Errorf("%d of %d outputs bit-exact", same, len(base.Graph.Outputs))
	}
}
