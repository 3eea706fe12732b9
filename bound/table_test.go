package bound_test

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tsplit/tsplit"
	"github.com/tsplit/tsplit/bound"
	"github.com/tsplit/tsplit/internal/oracle"
	"github.com/tsplit/tsplit/ir"
	"github.com/tsplit/tsplit/memory"
	"github.com/tsplit/tsplit/passes"
	"github.com/tsplit/tsplit/policy"
	"github.com/tsplit/tsplit/profile"
)

var table = flag.Bool("table", false, "rewrite the bound table of docs/planner.md (TestBoundTable)")

// The golden CI graphs: the small zoo models testdata/planned/golden.txt
// plans, at batch 16 and the budgets it plans tsplit at; then some of
// them at a batch where the links are busy enough for the bound to be
// positive; then the full-size torchvision resnet50 of the issue.
var (
	goldenModels = []string{"vgg16-small", "vgg19-small", "resnet18-small", "resnet50-small", "resnet101-small", "inception-small", "bert-base-small", "bert-large-small", "gpt-small"}
	goldenFracs  = []float64{0.8, 0.6, 0.45}
	goldenBatch  = int64(16)
	largeCases   = []struct {
		model string
		batch int64
	}{{"vgg16-small", 256}, {"vgg16-small", 512}, {"bert-base-small", 512}, {"gpt-small", 256}}
	fullBudgets    = []int64{5 << 30, 4 << 30, 7 << 29, 3 << 30}
	tableBegin     = "<!-- bound-table: go test ./bound -run TestBoundTable -table -->"
	tableEnd       = "<!-- /bound-table -->"
	tableTimeLimit = 60 * time.Second
)

// TestBoundTable writes the tables of docs/planner.md §9: on each case,
// the MILP optimum (small graphs), the bound Lower returns, tsplit's plan
// and the best plan of the class among the other policies, as the step
// time they add over the unplanned step. It runs with -table only (tens
// of minutes; it needs CBC, and the torch export for the last table).
func TestBoundTable(t *testing.T) {
	if !*table {
		t.Skip("run with -table to rewrite docs/planner.md's bound table")
	}
	// Asked for by name: CBC is needed, so a missing one fails
	// instead of skipping (RequireEnv also turns the oracles on).
	t.Setenv(oracle.RequireEnv, "1")
	oracle.MILPSolver(t)
	root, err := oracle.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	prof := titan(t)
	ctx := context.Background()
	var b strings.Builder
	fmt.Fprintln(&b, tableBegin)
	header := func(what string, milp bool) {
		cols := "| " + what + " | budget | MILP | bound (Lower) | tsplit | best other plan of the class | tsplit − bound (points) | tsplit's gap to Lower | to the MILP | Lower's time |"
		if !milp {
			cols = strings.Replace(strings.Replace(cols, " MILP |", "", 1), " to the MILP |", "", 1)
		}
		fmt.Fprintln(&b, cols)
		fmt.Fprintln(&b, "|---|---:|"+strings.Repeat("---:|", strings.Count(cols, "|")-3))
	}
	fmt.Fprintln(&b, "Golden CI graphs (`testdata/onnx`, batch 16, budgets as fractions of the unplanned peak):")
	fmt.Fprintln(&b)
	header("model", true)
	for _, name := range goldenModels {
		path := filepath.Join(root, "testdata", "onnx", name+".onnx")
		for _, frac := range goldenFracs {
			row, err := tableRow(ctx, path, goldenBatch, 0, frac, prof, true)
			if err != nil {
				t.Fatalf("%s at %.0f%%: %v", name, 100*frac, err)
			}
			fmt.Fprintf(&b, "| %s | %.0f %% | %s |\n", name, 100*frac, row)
		}
	}
	fmt.Fprintln(&b)
	fmt.Fprintln(&b, "The same models at larger batches, where the links are busy enough for the bound to be positive:")
	fmt.Fprintln(&b)
	header("model", true)
	for _, c := range largeCases {
		path := filepath.Join(root, "testdata", "onnx", c.model+".onnx")
		for _, frac := range goldenFracs {
			row, err := tableRow(ctx, path, c.batch, 0, frac, prof, true)
			if err != nil {
				t.Fatalf("%s b%d at %.0f%%: %v", c.model, c.batch, 100*frac, err)
			}
			fmt.Fprintf(&b, "| %s, batch %d | %.0f %% | %s |\n", c.model, c.batch, 100*frac, row)
		}
	}
	fmt.Fprintln(&b)
	fmt.Fprintln(&b, "Full-size torchvision resnet50 (`testdata/torch`, the issue's case), batch 64, titan-rtx (no MILP: too large for CBC in a minute):")
	fmt.Fprintln(&b)
	header("model", false)
	path := oracle.TorchModel(t, "resnet50")
	for _, budget := range fullBudgets {
		row, err := tableRow(ctx, path, 64, budget, 0, prof, false)
		if err != nil {
			t.Fatalf("resnet50 at %d: %v", budget, err)
		}
		fmt.Fprintf(&b, "| resnet50, batch 64 | %.1f GiB | %s |\n", float64(budget)/(1<<30), row)
	}
	fmt.Fprint(&b, tableEnd)
	doc := filepath.Join(root, "docs", "planner.md")
	old, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	i, j := bytes.Index(old, []byte(tableBegin)), bytes.Index(old, []byte(tableEnd))
	if i < 0 || j < i {
		t.Fatalf("%s has no %q … %q section", doc, tableBegin, tableEnd)
	}
	out := append(append(append([]byte(nil), old[:i]...), b.String()...), old[j+len(tableEnd):]...)
	if err := os.WriteFile(doc, out, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Log(b.String())
}

// tableRow plans one case (budget in bytes, or frac of the unplanned
// peak) with every policy and bounds the order tsplit's plan runs the
// step in (the schedule pass's when tsplit split tensors or did not
// fit): the MILP (when milp), the bound, tsplit, the best other plan of
// the class, tsplit's gap to the bound when its plan is of the class.
func tableRow(ctx context.Context, path string, batch, budget int64, frac float64, prof *profile.Profile, milp bool) (string, error) {
	load := func() (*ir.Model, error) {
		m, err := tsplit.Load(ctx, path, tsplit.Options{Batch: batch})
		if err != nil {
			return nil, err
		}
		_, err = tsplit.Train(ctx, m, tsplit.TrainOptions{})
		return m, err
	}
	step, err := load()
	if err != nil {
		return "", err
	}
	probe := step.Clone()
	if err := passes.NewState(probe, nil).Run(passes.Schedule); err != nil {
		return "", err
	}
	mem, err := memory.Analyze(probe.Graph, memory.Options{})
	if err != nil {
		return "", err
	}
	if budget == 0 {
		budget = mem.Peak * int64(math.Round(100*frac)) / 100
	}
	var base float64
	pct := func(x float64) string {
		if math.IsInf(x, 1) {
			return "no plan fits"
		}
		if math.Abs(x) < 1e-9*base {
			x = 0 // rounding of the simulated times, not a faster plan
		}
		return fmt.Sprintf("%+.2f %%", 100*x/base)
	}
	ts, other := "does not fit", "none fits"
	best, tsAdded := math.Inf(1), math.NaN()
	ordered := false
	for _, pol := range policy.Names() {
		m, err := load()
		if err != nil {
			return "", err
		}
		res, err := tsplit.Plan(ctx, m, tsplit.Options{Budget: budget, Profile: prof, Policy: pol})
		if err != nil {
			continue
		}
		base = res.BaseStep
		added := res.Step - res.BaseStep
		if pol != "tsplit" {
			if res.Split == 0 && res.SubBatching == nil && added < best {
				best, other = added, fmt.Sprintf("%s (%s)", pct(added), pol)
			}
			continue
		}
		ts = pct(added)
		if res.Split > 0 {
			ts += " (splits)"
		} else {
			ordered, tsAdded = bound.PlanOrder(step, res.Model), added
		}
	}
	if !ordered {
		step = probe
	}
	mem, err = memory.Analyze(step.Graph, memory.Options{})
	if err != nil {
		return "", err
	}
	tl := passes.Simulate(step.Graph, mem, prof)
	base = tl.StepTime
	lb, err := bound.Lower(step.Graph, mem, tl, prof, budget)
	if err != nil {
		return "", err
	}
	// gap is (ΔT_tsplit − LB) / LB, for a tsplit plan of the class.
	gap := func(lb float64) string {
		if math.IsNaN(tsAdded) || math.IsInf(lb, 1) {
			return "—"
		}
		if tsAdded <= lb+1e-9*base {
			return "0 %"
		}
		if lb <= 0 {
			return "∞"
		}
		return fmt.Sprintf("%.0f %%", 100*(tsAdded-lb)/lb)
	}
	// diff is tsplit's distance to the bound in points of the step.
	diff := "—"
	if !math.IsNaN(tsAdded) && !math.IsInf(lb.Added, 1) {
		diff = fmt.Sprintf("%.2f", 100*math.Max(0, tsAdded-lb.Added)/base)
	}
	cells := []string{pct(lb.Added), ts, other, diff, gap(lb.Added), fmt.Sprintf("%.0f ms", float64(lb.Solve.Microseconds())/1e3)}
	if milp {
		ex, err := bound.MILP(ctx, step.Graph, mem, tl, prof, budget, bound.ExactOptions{TimeLimit: tableTimeLimit})
		switch {
		case errors.Is(err, bound.ErrSolverTimeout):
			// CBC stuck in a phase that ignores its limit: no bound.
			cells = append([]string{"CBC killed past its time limit"}, cells...)
			cells = append(cells[:len(cells)-1], "—", cells[len(cells)-1])
		case err != nil:
			return "", err
		default:
			m := pct(ex.Added)
			if !ex.Optimal && !ex.Infeasible {
				m += " (bound at the time limit)"
			}
			cells = append([]string{m}, cells...)
			cells = append(cells[:len(cells)-1], gap(ex.Added), cells[len(cells)-1])
		}
	}
	return strings.Join(cells, " | "), nil
}
