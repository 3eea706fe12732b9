package bound_test

import (
	"bytes"
	"context"
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
// plans, at batch 16 and the budgets it plans tsplit at.
var (
	goldenModels   = []string{"vgg16-small", "vgg19-small", "resnet18-small", "resnet50-small", "resnet101-small", "inception-small", "bert-base-small", "bert-large-small", "gpt-small"}
	goldenFracs    = []float64{0.8, 0.6, 0.45}
	goldenBatch    = int64(16)
	tableBegin     = "<!-- bound-table: go test ./bound -run TestBoundTable -table -->"
	tableEnd       = "<!-- /bound-table -->"
	tableTimeLimit = 60 * time.Second
)

// TestBoundTable writes the table of docs/planner.md §9: on each golden
// CI graph and budget, the MILP optimum, the LP bound, tsplit's plan and
// the best plan of the class among the other policies, all as the step
// time they add over the unplanned step. It runs with -table only (a
// few minutes; it needs CBC).
func TestBoundTable(t *testing.T) {
	if !*table {
		t.Skip("run with -table to rewrite docs/planner.md's bound table")
	}
	oracle.MILPSolver(t)
	root, err := oracle.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	prof := titan(t)
	var b strings.Builder
	fmt.Fprintln(&b, tableBegin)
	fmt.Fprintln(&b, "| model (batch 16) | budget | MILP | LP bound | tsplit | best other plan of the class | LP time |")
	fmt.Fprintln(&b, "|---|---:|---:|---:|---:|---:|---:|")
	ctx := context.Background()
	for _, name := range goldenModels {
		path := filepath.Join(root, "testdata", "onnx", name+".onnx")
		for _, frac := range goldenFracs {
			row, err := tableRow(ctx, path, frac, prof)
			if err != nil {
				t.Fatalf("%s at %.0f%%: %v", name, 100*frac, err)
			}
			fmt.Fprintf(&b, "| %s | %.0f %% | %s |\n", name, 100*frac, row)
		}
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

// tableRow plans one golden case with every policy and bounds the order
// tsplit's plan runs the step in (the schedule pass's when tsplit split
// tensors or did not fit).
func tableRow(ctx context.Context, path string, frac float64, prof *profile.Profile) (string, error) {
	load := func() (*ir.Model, error) {
		m, err := tsplit.Load(ctx, path, tsplit.Options{Batch: goldenBatch})
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
	budget := mem.Peak * int64(math.Round(100*frac)) / 100
	var base float64
	pct := func(x float64) string {
		if math.IsInf(x, 1) {
			return "no plan fits"
		}
		return fmt.Sprintf("%+.2f %%", 100*x/base)
	}
	ts, other := "does not fit", "none fits"
	best := math.Inf(1)
	ordered := false
	for _, pol := range policy.Names() {
		m, err := load()
		if err != nil {
			return "", err
		}
		res, err := tsplit.Plan(ctx, m, tsplit.Options{Budget: budget, Profile: prof, Policy: pol, Bound: true})
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
			ts += " (splits"
			if res.Bound != nil && res.Bound.OutsideClass {
				ts += ", below the bound: outside the class"
			}
			ts += ")"
		} else {
			ordered = bound.PlanOrder(step, res.Model)
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
	ex, err := bound.MILP(ctx, step.Graph, mem, tl, prof, budget, bound.ExactOptions{TimeLimit: tableTimeLimit})
	if err != nil {
		return "", err
	}
	milp := pct(ex.Added)
	if !ex.Optimal && !ex.Infeasible {
		milp += " (bound at the time limit)"
	}
	return fmt.Sprintf("%s | %s | %s | %s | %.0f ms", milp, pct(ex.LP.Added), ts, other, float64(ex.LP.Solve.Microseconds())/1e3), nil
}
