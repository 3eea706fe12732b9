package bench

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tsplit/tsplit"
	"github.com/tsplit/tsplit/internal/oracle"
	"github.com/tsplit/tsplit/policy"
)

// torchSweepModels are PyTorch exports of architectures the zoo does
// not build (scripts/export_torch_models.py: depthwise and grouped
// convs, squeeze-excitation, SiLU, GELU, LayerNorm over channels,
// channel shuffles, attention), at batch torchSweepBatch: models no
// planner test was written for, where a policy beating tsplit shows up
// first.
var torchSweepModels = []string{
	"convnext_mini", "efficientnet_mini", "gelu_mlp", "mha_block", "mnasnet_mini",
	"mobilenetv3_mini", "regnet_mini", "shufflenet_mini", "squeezenet_mini", "vit_mini",
}

const torchSweepBatch = 2

// torchSweepPercents are their budgets in percent of the unplanned peak,
// down to where no policy fits (the sweep stops at the first such).
var torchSweepPercents = []int{100, 80, 60, 45, 35, 25, 15}

// TestBudgetSweepTorch sweeps every policy over the budgets of each
// torchSweepModels export and checks what TestBudgetSweep checks on the
// zoo (tsplit at or below every other policy that fits, and no slower
// than at the next smaller budget), then runs every plan that fits on
// the capped CPU device: the measured high-water must be the planned
// peak and the loss the unplanned step's (bit-exact without splits, to
// float32 reassociation with them).
func TestBudgetSweepTorch(t *testing.T) {
	t.Parallel() // bench is the longest package of make test: its big tests share both cores
	oracle.Integration(t, "the budget sweeps of the PyTorch exports plan and run about 400 steps")
	ctx := context.Background()
	prof, err := Config{Small: true}.DeviceProfile()
	if err != nil {
		t.Fatal(err)
	}
	pols := OrderPolicies(policy.Names())
	var made []string
	for _, name := range torchSweepModels {
		t.Run(name, func(t *testing.T) {
			start := time.Now()
			step, err := tsplit.Load(ctx, oracle.TorchModel(t, name), tsplit.Options{Batch: torchSweepBatch})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tsplit.Train(ctx, step, tsplit.TrainOptions{}); err != nil {
				t.Fatal(err)
			}
			ref, err := tsplit.Run(ctx, step.Clone(), tsplit.RunOptions{})
			if err != nil {
				t.Fatal(err)
			}
			plans := make([][]*tsplit.Result, len(torchSweepPercents))
			for i := range plans {
				plans[i] = make([]*tsplit.Result, len(pols))
			}
			s, err := sweepBudgets(ctx, step, torchSweepBatch, prof, pols, torchSweepPercents, 2,
				sweepOptions{keep: func(i, j int, res *tsplit.Result) { plans[i][j] = res }})
			if err != nil {
				t.Fatal(err)
			}
			planned := time.Since(start)
			if !s.Points[0][slices.Index(pols, "tsplit")].OK {
				t.Errorf("tsplit does not fit at 100 %% of the unplanned peak (%d bytes)", s.BasePeak)
			}
			made = append(made, reportChecks(t, checkSweep(name, s))...)
			ts := slices.Index(pols, "tsplit")
			for i, pct := range s.Percents {
				line := fmt.Sprintf("%3d%%: tsplit ", pct)
				if o, ok := s.Overhead(i, ts); ok {
					line += fmt.Sprintf("%+.4f %%", o)
				} else {
					line += "does not fit"
				}
				best, bestPol := math.Inf(1), ""
				for j, pol := range pols {
					if o, ok := s.Overhead(i, j); ok && j != ts && o < best {
						best, bestPol = o, pol
					}
				}
				if bestPol != "" {
					line += fmt.Sprintf(", best other %+.4f %% (%s)", best, bestPol)
				}
				t.Log(line)
			}
			runs := 0
			for i := range s.Percents {
				for j, pol := range pols {
					if res := plans[i][j]; res != nil {
						runs++
						checkCappedRun(t, fmt.Sprintf("%s at %d%%", pol, s.Percents[i]), res, s.Budgets[i], ref.Losses[0])
					}
				}
			}
			t.Logf("%d budgets down to %d%%, %d plans run; planning %v, all %v",
				len(s.Percents), s.Percents[len(s.Percents)-1], runs, planned.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
		})
	}
	// A listed case of these models that no sweep checked names a budget
	// or policy the sweeps no longer reach.
	for _, k := range knownBeaten {
		if slices.ContainsFunc(torchSweepModels, func(m string) bool { return strings.HasPrefix(k, m+" ") }) && !slices.Contains(made, k) {
			t.Errorf("knownBeaten lists %q, which no sweep checked: remove it", k)
		}
	}
}

// checkCappedRun runs the planned step res on a CPU device of budget
// bytes and compares its measured high-water with the planned peak and
// its loss with the unplanned step's.
func checkCappedRun(t *testing.T, what string, res *tsplit.Result, budget int64, loss float64) {
	t.Helper()
	run, err := tsplit.Run(context.Background(), res.Model, tsplit.RunOptions{Pool: budget})
	if err != nil {
		t.Errorf("%s: the plan does not run on a device of its budget: %v", what, err)
		return
	}
	if run.Peak != res.Peak {
		t.Errorf("%s: measured high-water %d bytes, planned peak %d", what, run.Peak, res.Peak)
	}
	got := run.Losses[0]
	tol := 0.0
	if res.Split > 0 {
		tol = 1e-5 * math.Abs(loss) // the split ops sum in another order
	}
	if math.IsNaN(got) || math.Abs(got-loss) > tol {
		t.Errorf("%s: loss %.9g, unplanned %.9g", what, got, loss)
	}
}
