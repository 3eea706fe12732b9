package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/tsplit/tsplit"
	"github.com/tsplit/tsplit/ir"
	"github.com/tsplit/tsplit/profile"
)

// BudgetPoint is one policy planned at one budget of a budget sweep.
type BudgetPoint struct {
	// OK says the plan fits; Err says why not.
	OK  bool
	Err string
	// Step is the planned step's simulated time in seconds, Peak its
	// planned peak in bytes (both zero when it did not fit).
	Step float64
	Peak int64
	// Order is the op order the plan was made in (tsplit's search picks
	// one; "" where planning failed).
	Order string
	// Added is the time the plan adds to the unplanned step in its own
	// order (the plan's Step − BaseStep, what the lower bound bounds),
	// and Split how many tensors it splits (a plan that splits is
	// outside the bound's class).
	Added float64
	Split int
	// Bound is the lower bound of package bound for a plan of the
	// class swap + recompute in the order this plan runs in, and the
	// plan's gap to it (tsplit.Options.Bound, as `tsplitc plan --bound`
	// prints it). A sweep computes it for tsplit's plans (nil for the
	// other policies, and where the plan does not fit).
	Bound *tsplit.BoundInfo
}

// BoundPolicy is the policy whose plans a budget sweep bounds: the
// lower bound at a budget is of the order tsplit's plan runs in.
const BoundPolicy = "tsplit"

// BudgetSweep is one training step planned by every policy at budgets
// from 100 % of its unplanned peak down, in equal percent steps, to the
// smallest budget some policy fits: the "how much slower at how much
// memory" picture. The step is the same whole-batch step for every
// policy (modnn without sub-batching).
type BudgetSweep struct {
	// Batch is the step's batch; BasePeak and BaseStep the unplanned
	// step's peak (as built, bytes) and simulated time (seconds).
	Batch    int64
	BasePeak int64
	BaseStep float64
	Policies []string
	// Percents[i] is budget i in percent of BasePeak, Budgets[i] in
	// bytes (BasePeak·Percents[i]/100, rounded down).
	Percents []int
	Budgets  []int64
	// Points[i][j] is policy j at budget i.
	Points [][]BudgetPoint
}

// Overhead is policy j's added step time at budget i over the
// unplanned step, in percent (NaN where it does not fit).
func (s *BudgetSweep) Overhead(i, j int) (float64, bool) {
	p := s.Points[i][j]
	if !p.OK || s.BaseStep <= 0 {
		return 0, false
	}
	return 100 * (p.Step/s.BaseStep - 1), true
}

// BudgetPercents are the budgets of a full sweep in percent of the
// unplanned peak: 100 % down in stepPct steps, above 0.
func BudgetPercents(stepPct int) []int {
	var out []int
	for pct := 100; pct > 0 && stepPct > 0; pct -= stepPct {
		out = append(out, pct)
	}
	return out
}

// SweepBudgets plans step (a training step, which it never modifies:
// every plan gets a clone) with each policy at the given budgets, in
// percent of the unplanned peak and in decreasing order (BudgetPercents
// for a full sweep), and stops after the first budget no policy fits
// (that row is kept: it shows where every policy failed). Plans of one
// budget run on jobs workers; the result does not depend on jobs.
// Errors are for plans that fail for other reasons than the budget (a
// policy that panics, a step that cannot be planned).
func SweepBudgets(ctx context.Context, step *ir.Model, batch int64, prof *profile.Profile, policies []string, percents []int, jobs int) (*BudgetSweep, error) {
	return sweepBudgets(ctx, step, batch, prof, policies, percents, jobs, sweepOptions{})
}

// sweepOptions are what tests add to a sweep.
type sweepOptions struct {
	// keep, when set, is given every plan that fits (budget i, policy
	// j), from the workers, for a caller that runs the plans.
	keep func(i, j int, res *tsplit.Result)
	// boundAll computes the lower bound of every policy's plan (each
	// in its own order), not only BoundPolicy's.
	boundAll bool
}

// sweepBudgets is SweepBudgets with a test's options.
func sweepBudgets(ctx context.Context, step *ir.Model, batch int64, prof *profile.Profile, policies []string, percents []int, jobs int,
	so sweepOptions) (*BudgetSweep, error) {
	for i, pct := range percents {
		if pct <= 0 || pct > 100 || i > 0 && pct >= percents[i-1] {
			return nil, fmt.Errorf("bench: budget percents %v are not decreasing in (0, 100]", percents)
		}
	}
	jobs = max(jobs, 1)
	plan := func(budget int64, pol string) (*tsplit.Result, error) {
		bound := so.boundAll || pol == BoundPolicy
		return tsplit.Plan(ctx, step.Clone(), tsplit.Options{Profile: prof, Budget: budget, Policy: pol, Bound: bound})
	}
	// The unplanned step's peak and time: the base policy at a budget
	// nothing reaches plans nothing.
	res, err := plan(1<<62, "base")
	if err != nil {
		return nil, fmt.Errorf("bench: the unplanned step at batch %d: %w", batch, err)
	}
	s := &BudgetSweep{Batch: batch, BasePeak: res.BasePeak, BaseStep: res.BaseStep, Policies: policies}
	for i, pct := range percents {
		budget := s.BasePeak * int64(pct) / 100
		row := make([]BudgetPoint, len(policies))
		errs := make([]error, len(policies))
		var wg sync.WaitGroup
		sem := make(chan struct{}, jobs)
		for j, pol := range policies {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				res, err := plan(budget, pol)
				row[j], errs[j] = point(res, err)
				if so.keep != nil && errs[j] == nil && row[j].OK {
					so.keep(i, j, res)
				}
				if errs[j] != nil {
					errs[j] = fmt.Errorf("bench: %s at batch %d, budget %d%% (%d bytes): %w", pol, batch, pct, budget, errs[j])
				}
			}()
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return nil, err
		}
		s.Percents = append(s.Percents, pct)
		s.Budgets = append(s.Budgets, budget)
		s.Points = append(s.Points, row)
		fits := false
		for _, p := range row {
			fits = fits || p.OK
		}
		if !fits {
			break
		}
	}
	return s, nil
}

// point turns a plan into a BudgetPoint: a plan that does not fit is a
// point, a panic or a context error is an error.
func point(res *tsplit.Result, err error) (BudgetPoint, error) {
	var pe *tsplit.PanicError
	if errors.As(err, &pe) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return BudgetPoint{}, err
	}
	if err != nil {
		return BudgetPoint{Err: err.Error()}, nil
	}
	return BudgetPoint{OK: true, Step: res.Step, Peak: res.Peak, Order: res.Order, Added: res.Step - res.BaseStep, Split: res.Split, Bound: res.Bound}, nil
}
