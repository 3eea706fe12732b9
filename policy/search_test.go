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

// TestSearchMonotoneThroughANearTie plans the CI-sized ResNet-101 step at
// batch 61 (its base batch on the CI-sized bench device) at 85 % and 80 %
// of its unplanned peak. 80 % takes the plan its search makes for 75 %;
// 85 %'s first grid point below, 80 %, plans a step only 35 ns slower
// than 85 %'s own (alap, 0.0746237 s), and a walk that stopped there
// left 85 % slower than 80 % (+0.0196 % against +0.0000 %). The plan for
// the larger budget must not be slower (PlanStep's walk goes on past a
// near-tie).
func TestSearchMonotoneThroughANearTie(t *testing.T) {
	build := func() *passes.State {
		m := plantest.Step(t, "resnet101", 61, compiler.TrainOptions{Optimizer: "sgd"})
		return passes.NewState(m, &passes.Options{Policy: Tsplit})
	}
	plan := func(pol Policy, budget int64) *passes.Report {
		s := build()
		s.Opts.Budget, s.Opts.Policy = budget, pol
		if err := s.Run(passes.Pipeline...); err != nil {
			t.Fatal(err)
		}
		return s.Report
	}
	// The grid is of the step's peak as built, which the base policy
	// reports.
	peak := plan(Base, 1<<62).BasePeak
	at85, at80 := plan(Tsplit, peak*85/100), plan(Tsplit, peak*80/100)
	t.Logf("85 %%: %.10g s (%s); 80 %%: %.10g s (%s)", at85.Time, at85.Chosen, at80.Time, at80.Chosen)
	if at85.Time > at80.Time {
		t.Errorf("the plan for 85 %% of the peak, %.10g s, is slower than the plan for 80 %%, %.10g s", at85.Time, at80.Time)
	}
}
