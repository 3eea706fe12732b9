package policy

import (
	"context"
	"fmt"
	"testing"

	"github.com/tsplit/tsplit/compiler"
	"github.com/tsplit/tsplit/internal/plantest"
	"github.com/tsplit/tsplit/ir"
	"github.com/tsplit/tsplit/passes"
)

// TestSegmentRecompute plans the CI-sized BERT encoder (batch 32, as
// built) with recomputation only at budgets where most of its forward
// pass must go. Chains, chosen tensor by tensor, stop at maxChainOps or
// at intermediates that do not fit; segments evict whole runs between
// two cuts and recompute each once. The test checks what a segment
// plan is: a recomputation that evicts several tensors at once, a plan
// faster than the chains' at 75 % of the peak, and a
// planned step that runs on the CPU device capped at the budget with
// its high-water mark at the planned peak and every output bit-exact
// with the unplanned step's.
func TestSegmentRecompute(t *testing.T) {
	step := func() *ir.Model { return plantest.Step(t, "bert-base", 32, compiler.TrainOptions{Optimizer: "sgd"}) }
	peak := plantest.Peak(t, step()) // the order as built
	for _, pct := range []int64{75, 70} {
		t.Run(fmt.Sprintf("%d%%", pct), func(t *testing.T) {
			budget := peak * pct / 100
			chains, cerr := Plan(context.Background(), step(), Tsplit, Options{Budget: budget, NoSwap: true, Order: passes.OrderAsBuilt})

			m := step()
			s, err := Plan(context.Background(), m, Tsplit, Options{Budget: budget, NoSwap: true, Segments: true, Check: true, Order: passes.OrderAsBuilt})
			if err != nil {
				t.Fatalf("segments at %d bytes (%d %% of %d): %v", budget, pct, peak, err)
			}
			r := s.Report
			// A chain or a segment is a run of decisions that ends with
			// the one charged its ΔT; a chain's run evicts one tensor
			// (ΔM > 0), a segment's every tensor of its run of the
			// forward pass live across the bottleneck.
			most, run := 0, 0
			for _, d := range r.Decisions {
				if d.Option != "recompute" {
					t.Errorf("decision %s %s with swapping off", d.Option, d.Tensor)
				}
				if d.DeltaM > 0 {
					run++
				}
				if d.DeltaT > 0 {
					most, run = max(most, run), 0
				}
			}
			if most < 2 {
				t.Errorf("no segment: at most %d tensor evicted per recomputation", most)
			}
			if cerr == nil {
				t.Logf("chains only: simulated step %.3f ms, %d recomputed", chains.Report.Time*1e3, chains.Report.Recomputed)
				// At 75 % segments are ahead (measured 9.18 ms against
				// 9.46 ms); at 70 % the greedy choices come out 0.3 %
				// behind, which tsplit's search, keeping the faster of
				// its variants, covers.
				if pct == 75 && r.Time > chains.Report.Time {
					t.Errorf("with segments %.4g s, chains only %.4g s", r.Time, chains.Report.Time)
				}
			} else {
				t.Logf("chains only: %v", cerr)
			}
			t.Logf("budget %d (%d %% of %d): peak %d, pool %d, %d recomputed, simulated step %.3f ms vs %.3f ms unplanned, %d rounds",
				budget, pct, peak, r.Peak, r.Pool, r.Recomputed, r.Time*1e3, r.BaseTime*1e3, r.Rounds)
			if r.Peak > budget || r.Pool > budget {
				t.Errorf("peak %d, pool %d over the budget %d", r.Peak, r.Pool, budget)
			}
			plantest.UniqueNames(t, m)

			runsBitExact(t, step(), m, budget, r)
		})
	}
}
