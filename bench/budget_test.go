package bench

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/tsplit/tsplit"
	"github.com/tsplit/tsplit/internal/oracle"
	"github.com/tsplit/tsplit/policy"
)

// sweepBatch is the batch of the CI-sized budget sweeps.
const sweepBatch = 32

// stepTol is the relative tolerance of every step-time comparison of
// the budget sweeps. Two plans' predicted times are sums of the same
// float64 op and transfer costs, so equal plans agree to about 1e-15;
// 1e-9 absorbs only that rounding, while the smallest real difference
// (one recomputed op or one unhidden transfer, microseconds on a step of
// milliseconds) is about 1e-4 of the step.
const stepTol = 1e-9

// knownBeaten are the checks of the budget sweeps that fail today: the
// family, the budget in percent of its unplanned peak, and what fails
// there ("beaten by P": policy P plans a faster step or fits where tsplit
// does not; "slower than N%": tsplit's plan is slower, or does not fit,
// than at the next smaller budget N% that the sweep planned). The test
// still checks them: a listed case that passes fails the test, so the
// list cannot go stale. Each is a planner weakness to fix, not a
// tolerance.
//
// The list is empty. The last entry, resnet50-small 75 % slower than
// 70 % (+0.0233 % against +0.0000 %), went when simulate-and-repair
// stopped giving up after a re-plan that was not faster (the second
// re-plan, with the first's stalls charged too, reached +0.0000 %).
// Earlier ones (monotonicity breaks of up to 0.06 points on inception-,
// resnet18-, resnet50- and resnet101-small; moDNN ahead of tsplit on
// convnext_mini and vit_mini) went when tsplit's search started planning
// at the grid point below the budget and trying moDNN's offload ranking
// (policy.tsplit.PlanStep).
var knownBeaten = []string{}

// reportChecks fails t for every check that fails and is not in
// knownBeaten, and for every check in knownBeaten that passes; it
// returns the keys of the checks.
func reportChecks(t *testing.T, checks []sweepCheck) []string {
	t.Helper()
	var made []string
	for _, ch := range checks {
		made = append(made, ch.key)
		known := slices.Contains(knownBeaten, ch.key)
		switch {
		case ch.failed && !known:
			t.Errorf("%s: %s", ch.key, ch.detail)
		case ch.failed:
			t.Logf("known: %s: %s", ch.key, ch.detail)
		case known:
			t.Errorf("%s passes now: remove it from knownBeaten", ch.key)
		}
	}
	return made
}

// sweepCheck is one comparison a budget sweep makes; failed cases carry
// the numbers.
type sweepCheck struct {
	key    string
	failed bool
	detail string
}

// checkSweep compares tsplit with every other policy at each budget of
// s, and tsplit at each budget with the next smaller one.
func checkSweep(family string, s *BudgetSweep) []sweepCheck {
	ts := slices.Index(s.Policies, "tsplit")
	var out []sweepCheck
	over := func(step float64) string { return fmt.Sprintf("%+.4f %%", 100*(step/s.BaseStep-1)) }
	for i, pct := range s.Percents {
		t := s.Points[i][ts]
		for j, pol := range s.Policies {
			o := s.Points[i][j]
			if j == ts || !o.OK {
				continue
			}
			c := sweepCheck{key: fmt.Sprintf("%s %d%% beaten by %s", family, pct, pol)}
			switch {
			case !t.OK:
				c.failed, c.detail = true, fmt.Sprintf("%s fits (%s) and tsplit does not: %s", pol, over(o.Step), t.Err)
			case t.Step > o.Step*(1+stepTol):
				c.failed, c.detail = true, fmt.Sprintf("tsplit %s (%s order), %s %s", over(t.Step), t.Order, pol, over(o.Step))
			}
			out = append(out, c)
		}
		if i+1 == len(s.Percents) {
			continue
		}
		n := s.Points[i+1][ts]
		if !n.OK {
			continue // no plan at the smaller budget: nothing to be monotone with
		}
		c := sweepCheck{key: fmt.Sprintf("%s %d%% slower than %d%%", family, pct, s.Percents[i+1])}
		switch {
		case !t.OK:
			c.failed, c.detail = true, fmt.Sprintf("tsplit fits at %d%% (%s) and not at %d%%: %s", s.Percents[i+1], over(n.Step), pct, t.Err)
		case t.Step > n.Step*(1+stepTol):
			c.failed, c.detail = true, fmt.Sprintf("tsplit %s at %d%% (%s order), %s at %d%% (%s order)", over(t.Step), pct, t.Order, over(n.Step), s.Percents[i+1], n.Order)
		}
		out = append(out, c)
	}
	return out
}

// budgetSweepCase is one family's sweep: its budgets (nil: the full
// sweep in 5 % steps).
type budgetSweepCase struct {
	family   string
	percents []int
}

// runBudgetSweeps plans each case's family (testdata/onnx/FAMILY.onnx at
// sweepBatch, built with tsplit.Load and tsplit.Train: the whole-batch
// step every policy plans, modnn without sub-batching) with every
// registered policy over its budgets on the CI-sized device, and fails
// every check that fails and is not in knownBeaten, and every check in
// knownBeaten that was made and passed. It returns the keys of the
// checks made.
func runBudgetSweeps(t *testing.T, cases []budgetSweepCase) []string {
	ctx := context.Background()
	prof, err := Config{Small: true}.DeviceProfile()
	if err != nil {
		t.Fatal(err)
	}
	pols := OrderPolicies(policy.Names())
	var made []string
	all := 0 // plans of the class checked against the bound
	for _, c := range cases {
		m, err := tsplit.Load(ctx, "../testdata/onnx/"+c.family+".onnx", tsplit.Options{Batch: sweepBatch})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tsplit.Train(ctx, m, tsplit.TrainOptions{}); err != nil {
			t.Fatal(err)
		}
		percents := c.percents
		if percents == nil {
			percents = BudgetPercents(5)
		}
		s, err := sweepBudgets(ctx, m, sweepBatch, prof, pols, percents, 2, sweepOptions{boundAll: true})
		if err != nil {
			t.Fatal(err)
		}
		if s.Percents[0] == 100 && !s.Points[0][slices.Index(pols, "tsplit")].OK {
			t.Errorf("%s: tsplit does not fit at 100 %% of the unplanned peak (%d bytes)", c.family, s.BasePeak)
		}
		made = append(made, reportChecks(t, checkSweep(c.family, s))...)
		bad, checked, column := checkBounds(c.family, s)
		for _, v := range bad {
			t.Error(v)
		}
		t.Logf("%s: the bound checked against %d plans of the class, the bound column against %d of them (tsplit's order); median gap %s",
			c.family, checked, column, fmtGap(SummarizeGaps(s).Median))
		all += checked
	}
	if all == 0 {
		t.Error("no plan of the class to check the bound against")
	}
	return made
}

// checkBounds is the lower bound's soundness on a sweep planned with
// every policy's bound (sweepOptions.boundAll). At every budget, every
// plan of the class (it splits nothing) adds at least the bound of the
// order it runs in, and at least the sweep's lower bound column where it
// runs tsplit's order. Any violation is a bug of package bound (or of
// the planner's accounting), never a tolerance: it returns them, with
// how many plans were checked and how many of those against the column.
func checkBounds(family string, s *BudgetSweep) (bad []string, checked, column int) {
	ts := slices.Index(s.Policies, BoundPolicy)
	for i, pct := range s.Percents {
		col := s.Bound(i)
		for j, pol := range s.Policies {
			p := s.Points[i][j]
			if !p.OK || p.Split > 0 {
				continue // no plan, or outside the class: nothing bounds it
			}
			where := fmt.Sprintf("%s %d%% %s (%s order, adds %.6g ms)", family, pct, pol, p.Order, 1e3*p.Added)
			b := p.Bound
			switch {
			case b == nil:
				bad = append(bad, where+": no bound computed")
			case b.Error != "":
				bad = append(bad, where+": the bound failed: "+b.Error)
			case b.Infeasible:
				bad = append(bad, where+": the bound says no plan of the class fits, and this one does")
			case b.Order != "plan":
				bad = append(bad, where+": a plan without splits whose order could not be recovered")
			case b.OutsideClass:
				bad = append(bad, fmt.Sprintf("%s: below the bound of its own order, %.6g ms", where, 1e3*b.AddedS))
			default:
				checked++
			}
			if col == nil || col.Error != "" || col.Infeasible || col.Order != "plan" || p.Order != s.Points[i][ts].Order {
				continue
			}
			column++
			// stepTol of the step: a plan that adds nothing adds ±1e-15
			// of it (float64 rounding), as bound.ForPlan allows.
			if p.Added < col.AddedS-stepTol*max(col.AddedS, s.BaseStep) {
				bad = append(bad, fmt.Sprintf("%s: below the lower bound column (tsplit's order), %.6g ms", where, 1e3*col.AddedS))
			}
		}
	}
	return bad, checked, column
}

// TestBudgetSweepSmall is the default tier's part of the budget sweeps:
// a few consecutive budgets of two families, about a second.
func TestBudgetSweepSmall(t *testing.T) {
	t.Parallel() // bench is the longest package of make test: its big tests share both cores
	runBudgetSweeps(t, []budgetSweepCase{
		{"resnet18-small", []int{55, 50, 45}},
		{"bert-base-small", []int{50, 45, 40}},
	})
}

// TestBudgetSweep is issue 11's "never beaten, monotone in the budget"
// over every zoo family's CI-sized model: the full sweep from 100 % of
// the unplanned peak down to the smallest budget any policy fits.
func TestBudgetSweep(t *testing.T) {
	t.Parallel() // bench is the longest package of make test: its big tests share both cores
	oracle.Integration(t, "the budget sweeps make about 1400 plans (every zoo family, 10 policies, ~16 budgets; inception's in the long tier)")
	var made, skipped []string
	families := []string{"bert-base-small", "bert-large-small", "gpt-small", "inception-small",
		"resnet101-small", "resnet18-small", "resnet50-small", "vgg16-small", "vgg19-small"}
	for _, f := range families {
		t.Run(f, func(t *testing.T) {
			if f == "inception-small" {
				// Alone over half of the sweeps' time.
				skipped = append(skipped, f)
				oracle.Long(t, "inception's budget sweep") // skips (Goexit) outside the long tier
				skipped = skipped[:len(skipped)-1]
			}
			made = append(made, runBudgetSweeps(t, []budgetSweepCase{{f, nil}})...)
		})
	}
	// The full sweeps make every check the default tier makes, so every
	// listed case of a family swept must have been checked: one that was
	// not names a budget or policy no sweep reaches any more.
	of := func(fs []string) func(string) bool {
		return func(k string) bool {
			return slices.ContainsFunc(fs, func(f string) bool { return strings.HasPrefix(k, f+" ") })
		}
	}
	for _, k := range knownBeaten {
		if of(families)(k) && !slices.Contains(made, k) && !of(skipped)(k) {
			t.Errorf("knownBeaten lists %q, which no sweep checked: remove it", k)
		}
	}
}

func TestBudgetPercents(t *testing.T) {
	if got, want := BudgetPercents(30), []int{100, 70, 40, 10}; !slices.Equal(got, want) {
		t.Errorf("BudgetPercents(30) = %v, want %v", got, want)
	}
	if got := BudgetPercents(0); got != nil {
		t.Errorf("BudgetPercents(0) = %v, want none", got)
	}
}

// TestWriteBudgetSweeps writes a hand-made sweep: the table has a row
// per budget with "—" where a policy does not fit, the CSV a row per
// budget and policy, and the plots exist.
func TestWriteBudgetSweeps(t *testing.T) {
	prof, err := Config{Small: true}.DeviceProfile()
	if err != nil {
		t.Fatal(err)
	}
	m, _ := LookupModel("vgg16")
	s := &BudgetSweep{Batch: 8, BasePeak: 1 << 20, BaseStep: 0.01, Policies: []string{"checkpoint", "tsplit"},
		Percents: []int{100, 95, 90}, Budgets: []int64{1 << 20, 996147, 943718},
		Points: [][]BudgetPoint{
			{{OK: true, Step: 0.01, Peak: 1 << 20}, {OK: true, Step: 0.01, Peak: 1 << 20, Bound: &tsplit.BoundInfo{Order: "plan"}}},
			{{OK: true, Step: 0.0125, Peak: 990000}, {OK: true, Step: 0.0101, Peak: 990000, Added: 0.0001,
				Bound: &tsplit.BoundInfo{Order: "plan", AddedS: 0.00005, Ratio: 1}}},
			{{Err: "too small"}, {Err: "too small"}},
		}}
	r := &BudgetResults{Config: Config{Small: true, Device: "titan-rtx", Optimizer: "sgd", Command: "tsplitc bench --budget-sweep --small"},
		Models: []Model{m}, Profile: prof, Sweeps: []*BudgetSweep{s}}
	dir := t.TempDir()
	files, err := WriteBudgetSweeps(dir, r)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 4 {
		t.Fatalf("wrote %v, want the table, the CSV and two plots", files)
	}
	md := budgetMD(r)
	for _, want := range []string{"tsplitc bench --budget-sweep --small", "| 1.00 MiB | 100 | 0.00 | 0.00 | 0.00 | 0.0 % |",
		"| 95 | 25.00 | 1.00 | 0.50 | 100.0 % |", "| 90 | — | — | — | — |",
		"tsplit fits 2 of 3 budgets: 1 with bound 0 and a plan that adds nothing (0/0), 1 with a positive bound. Median gap 50.0 % over 2 budgets; 100.0 % over the 1 with a positive bound."} {
		if !strings.Contains(md, want) {
			t.Errorf("table lacks %q:\n%s", want, md)
		}
	}
	// Per budget: checkpoint, tsplit, the lower bound.
	rows := budgetCSV(r)
	if len(rows) != 1+3*3 || rows[4][9] != "25.0000" || rows[5][12] != "1" || rows[5][13] != "false" ||
		rows[6][6] != BoundRow || rows[6][7] != "true" || rows[6][9] != "0.5000" || rows[6][11] != "plan" ||
		rows[7][7] != "false" || rows[9][6] != BoundRow || rows[9][7] != "false" {
		t.Errorf("CSV rows:\n%v", rows)
	}
}
