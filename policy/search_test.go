package policy

import (
	"testing"

	"github.com/tsplit/tsplit/compiler"
	"github.com/tsplit/tsplit/internal/plantest"
	"github.com/tsplit/tsplit/passes"
)

// TestSearchWalksOtherOrdersFromThePeak plans the CI-sized ResNet-18 step
// at batch 16 and 80 % of its peak, where the depth-first order plans
// best in op order and its walk from the peak is no faster, while the
// as-built order walked from the peak is faster still. The search must
// not be slower than that plan: where the best order's peak walk does
// not pay, it walks the other orders from the peak too (searchAt, step
// 2).
func TestSearchWalksOtherOrdersFromThePeak(t *testing.T) {
	build := func() *passes.State {
		m := plantest.Step(t, "resnet18", 16, compiler.TrainOptions{Optimizer: "sgd"})
		return passes.NewState(m, &passes.Options{Policy: Tsplit})
	}
	probe := build()
	if err := probe.Run(passes.Schedule); err != nil {
		t.Fatal(err)
	}
	budget := plantest.Peak(t, probe.Model) * 8 / 10
	plan := func(opts passes.Options) *passes.Report {
		s := build()
		opts.Budget, opts.Policy = budget, Tsplit
		*s.Opts = opts
		if err := s.Run(passes.Pipeline...); err != nil {
			t.Fatal(err)
		}
		return s.Report
	}
	searched := plan(passes.Options{})
	walked := plan(passes.Options{Order: passes.OrderAsBuilt, PeakFirst: true, MaxRelease: maxRelease})
	t.Logf("search %.6g s (%s); as built from the peak %.6g s", searched.Time, searched.Chosen, walked.Time)
	if searched.Time > walked.Time {
		t.Errorf("the search's plan, %.6g s, is slower than the as-built order's walked from the peak, %.6g s", searched.Time, walked.Time)
	}
}
