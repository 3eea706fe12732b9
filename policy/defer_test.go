package policy

import (
	"math"
	"testing"
)

// A round that swapped the graph input at an earlier bottleneck cannot
// recompute, at a later one, an activation whose chain reads that input
// (the rewrite restores the input for its own use only): VGG-16 b320 at
// 60 % of its peak swapped its first ReLU's 3.9 GB output for a 1.65 s
// stall instead of recomputing it for 19 ms. The chain is priced as if
// the swap were not made (deferRatio), so that Run can end the round
// there and leave the choice to the next round, which reads the input
// again.
func TestBlockedChainIsPriced(t *testing.T) {
	s := newChainStep(t)
	v, mem := s.v, s.mem
	size := mem.Intervals[mem.ByValue[v.ID]].Bytes
	for _, mayDefer := range []bool{false, true} {
		pl := s.planner(2 * mem.Peak)
		if _, ok := pl.recomputeCandidate(v, size, s.at, s.q, s.i); !ok {
			t.Fatalf("no chain for %s with nothing decided", v.Name)
		}
		pl.decided[s.x.ID] = true // swapped at an earlier bottleneck
		pl.mayDefer, pl.deferRatio = mayDefer, math.Inf(1)
		if _, ok := pl.recomputeCandidate(v, size, s.at, s.q, s.i); ok {
			t.Fatalf("chain of %s reads the input this round swapped", v.Name)
		}
		if priced := !math.IsInf(pl.deferRatio, 1); priced != mayDefer {
			t.Errorf("mayDefer %v: blocked chain priced %v (ratio %g)", mayDefer, priced, pl.deferRatio)
		}
		if pl.ignoreDecided {
			t.Error("ignoreDecided left set")
		}
	}
}
