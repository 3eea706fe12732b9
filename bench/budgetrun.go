package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/tsplit/tsplit/profile"
)

// BudgetStepPct is the budget step of the benchmark's budget sweeps, in
// percent of the unplanned peak.
const BudgetStepPct = 5

// BudgetResults are the budget sweeps of `tsplitc bench --budget-sweep`:
// per model, every policy's predicted step at budgets from 100 % of the
// unplanned peak down to the smallest budget any policy fits, at Table
// IV's base batch.
type BudgetResults struct {
	Config  Config
	Models  []Model
	Profile *profile.Profile
	// BaseBatch[i] is Table IV's base column for model i: the largest
	// batch the base policy (nothing swapped, recomputed or split) plans
	// into the device budget, the batch model i is swept at.
	BaseBatch []Search
	Sweeps    []*BudgetSweep
	// Elapsed is the wall time (not written to the files, which must not
	// depend on the machine).
	Elapsed time.Duration
}

// RunBudgetSweeps finds each model's base batch (Table IV's base
// column, by the same search Run makes), builds its training step there
// and sweeps it (SweepBudgets) with every policy in BudgetStepPct steps.
// Models run one after another, the policies of one budget on
// cfg.Jobs workers; the results do not depend on cfg.Jobs.
func RunBudgetSweeps(ctx context.Context, cfg Config) (*BudgetResults, error) {
	start := time.Now()
	cfg, err := cfg.Resolve()
	if err != nil {
		return nil, err
	}
	prof, err := cfg.DeviceProfile()
	if err != nil {
		return nil, err
	}
	r := &BudgetResults{Config: cfg, Profile: prof}
	pr := newProber(&cfg, prof)
	for _, name := range cfg.Models {
		m, _ := LookupModel(name)
		r.Models = append(r.Models, m)
		s, err := maxPassing(cfg.MaxBatch, func(b int64) (*Probe, bool, error) {
			p, err := pr.probe(m, b, 1, "base")
			return p, err == nil && p.OK, err
		})
		if err != nil {
			return nil, fmt.Errorf("bench: %s base batch: %w", m.Name, err)
		}
		if s.Max == 0 {
			return nil, fmt.Errorf("bench: %s: the base policy fits no batch on %s, so there is no base batch to sweep", m.Name, prof.Name)
		}
		r.BaseBatch = append(r.BaseBatch, s)
		step, _, err := Build(m, s.Max, 1, cfg.Small, cfg.Optimizer)
		if err != nil {
			return nil, fmt.Errorf("bench: %w", err)
		}
		sw, err := SweepBudgets(ctx, step, s.Max, prof, cfg.Policies, BudgetPercents(BudgetStepPct), cfg.Jobs)
		if err != nil {
			return nil, fmt.Errorf("bench: %s: %w", m.Name, err)
		}
		r.Sweeps = append(r.Sweeps, sw)
		if cfg.Progress != nil {
			fmt.Fprintf(cfg.Progress, "budget sweep: %s at batch %d, %d budgets down to %d%% (%v)\n",
				m.Name, s.Max, len(sw.Percents), sw.Percents[len(sw.Percents)-1], time.Since(start).Round(time.Second))
		}
	}
	r.Elapsed = time.Since(start)
	return r, nil
}
