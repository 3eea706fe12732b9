package bound_test

import (
	"context"
	"fmt"
	"math"
	"os"
	"testing"
	"time"

	"github.com/tsplit/tsplit/bound"
	"github.com/tsplit/tsplit/compiler"
	"github.com/tsplit/tsplit/internal/oracle"
	"github.com/tsplit/tsplit/internal/plantest"
	"github.com/tsplit/tsplit/ir"
	"github.com/tsplit/tsplit/memory"
	"github.com/tsplit/tsplit/passes"
	"github.com/tsplit/tsplit/policy"
	"github.com/tsplit/tsplit/profile"
)

func titan(t testing.TB) *profile.Profile {
	t.Helper()
	p, err := profile.Lookup("titan-rtx")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// scheduled is a zoo family's training step in the schedule pass's
// order, with its peak.
func scheduled(t testing.TB, family string, batch int64) (*ir.Model, int64) {
	t.Helper()
	m := plantest.Step(t, family, batch, compiler.TrainOptions{})
	if err := passes.NewState(m, nil).Run(passes.Schedule); err != nil {
		t.Fatal(err)
	}
	return m, plantest.Peak(t, m)
}

// lower is the bound of m in its current order.
func lower(t testing.TB, m *ir.Model, prof *profile.Profile, budget int64) *bound.Result {
	t.Helper()
	mem, err := memory.Analyze(m.Graph, memory.Options{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := bound.Lower(m.Graph, mem, passes.Simulate(m.Graph, mem, prof), prof, budget)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// planned is one policy's plan of a case and the bound of its order.
type planned struct {
	policy string
	report *passes.Report
	bound  *bound.Summary
}

func (p planned) added() float64 { return p.report.Time - p.report.BaseTime }

// planAll plans the case with every policy of package policy; policies
// that do not fit the budget are left out.
func planAll(t testing.TB, family string, batch, budget int64, prof *profile.Profile) []planned {
	t.Helper()
	var out []planned
	for _, name := range policy.Names() {
		pol, err := policy.Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		m := plantest.Step(t, family, batch, compiler.TrainOptions{})
		step := m.Clone()
		res, err := policy.Plan(context.Background(), m, pol, policy.Options{Budget: budget, Profile: prof})
		if err != nil {
			continue
		}
		r := res.Report
		s, err := bound.ForPlan(step, m, prof, budget, r.Time-r.BaseTime)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		out = append(out, planned{name, r, s})
	}
	return out
}

type sweepCase struct {
	family string
	batch  int64
}

// sweep is the CI-sized families at the golden files' batch, and at a
// batch where the links are busy enough for the bound to be positive.
var sweep = []sweepCase{
	{"vgg16", 16}, {"resnet18", 16}, {"bert-base", 16}, {"gpt", 16},
	{"vgg16", 512}, {"bert-base", 512},
	// The other families, at batch 16 and at a large batch (the
	// integration tier; the larger graphs in the long tier, longSweep).
	{"vgg19", 16}, {"darknet19", 16}, {"resnet50", 16}, {"resnet101", 16}, {"inception", 16}, {"bert-large", 16},
	{"vgg19", 256}, {"darknet19", 256}, {"resnet18", 256}, {"resnet50", 128}, {"inception", 64}, {"bert-large", 256}, {"gpt", 256},
}

var fractions = []float64{0.8, 0.6, 0.45}

// heavySweep are the sweep cases in the integration tier: resnet18's
// split plans and vgg16 at b512 take seconds each to plan with every
// policy, and so do the wider families; the default tier keeps a case
// with a positive bound (bert-base b512 at 45 %).
var heavySweep = map[sweepCase]bool{}

// longSweep are the wider families' cases that plan for seconds with
// every policy (about 37 s together on 2 cores): the long tier (make
// test-long) checks them.
var longSweep = map[sweepCase]bool{
	{"resnet50", 16}: true, {"resnet101", 16}: true, {"inception", 16}: true,
	{"resnet50", 128}: true, {"inception", 64}: true,
}

func init() {
	for _, c := range sweep {
		switch c {
		case sweepCase{"vgg16", 16}, sweepCase{"bert-base", 16}, sweepCase{"gpt", 16}, sweepCase{"bert-base", 512}:
		default:
			heavySweep[c] = true
		}
	}
}

// TestBoundBelowEveryPlan plans each sweep case with every policy at
// several budgets and checks that the LP bound of the order the plan was
// made on is at most the step time the plan adds — for every plan of
// the class (no split). A split plan below the bound is logged: it is
// outside the class.
func TestBoundBelowEveryPlan(t *testing.T) {
	prof := titan(t)
	checked, positive := 0, 0
	for _, sc := range sweep {
		t.Run(fmt.Sprintf("%s-b%d", sc.family, sc.batch), func(t *testing.T) {
			if heavySweep[sc] {
				oracle.Integration(t, "seconds of planning per policy")
			}
			if longSweep[sc] {
				oracle.Long(t, "the wider families' larger graphs")
			}
			_, peak := scheduled(t, sc.family, sc.batch)
			for _, frac := range fractions {
				budget := int64(frac * float64(peak))
				for _, p := range planAll(t, sc.family, sc.batch, budget, prof) {
					r, s := p.report, p.bound
					tol := 1e-9 * r.BaseTime
					if os.Getenv("BOUND_LOG") != "" {
						t.Logf("%s b%d %.2f %-14s adds %9.4f ms, bound %9.4f ms (%s order), %d splits",
							sc.family, sc.batch, frac, p.policy, p.added()*1e3, s.Added*1e3, s.Order, r.Split)
					}
					switch {
					case r.Split > 0:
						// Splits shrink what is live: a split plan may fit
						// where no plan of the class does.
						if s.OutsideClass {
							t.Logf("%.0f%%: %s's split plan adds %.4g ms, below the bound %.4g ms: outside the class", 100*frac, p.policy, p.added()*1e3, s.Added*1e3)
						}
					case s.Infeasible:
						t.Errorf("%.0f%%: the bound says no plan fits (at %s), but %s's does", 100*frac, s.Where, p.policy)
					case s.Order != "plan":
						t.Errorf("%.0f%%: %s's plan has no split but its order could not be recovered", 100*frac, p.policy)
					case math.Abs(s.BaseStep-r.BaseTime) > tol:
						t.Errorf("%.0f%%: %s: the plan's base step %g s is not its order's %g s", 100*frac, p.policy, r.BaseTime, s.BaseStep)
					case s.Added > p.added()+tol:
						t.Errorf("%.0f%%: %s's plan adds %.6g ms (%d swaps, %d recomputes), less than the bound %.6g ms (recompute %.4g, stall %.4g)",
							100*frac, p.policy, p.added()*1e3, r.Swapped, r.Recomputed, s.Added*1e3, s.Recompute*1e3, s.Stall*1e3)
					default:
						checked++
						if s.Added > 0 {
							positive++
						}
					}
				}
			}
		})
	}
	t.Logf("%d plans of the class checked against the bound, %d of them with a positive bound", checked, positive)
	if checked == 0 || (!testing.Short() && positive == 0) {
		t.Errorf("the sweep checked %d plans, %d with a positive bound: it tests nothing", checked, positive)
	}
}

// exactCases have a positive bound, so the exact model has something to
// decide.
var exactCases = []struct {
	sweepCase
	frac float64
}{
	{sweepCase{"gpt", 256}, 0.45},
	{sweepCase{"vgg16", 256}, 0.6},
	{sweepCase{"bert-base", 512}, 0.45},
}

// TestExactBetweenBoundAndPlans solves the exact model with CBC and
// checks LP bound ≤ MILP optimum ≤ the best plan of the class.
func TestExactBetweenBoundAndPlans(t *testing.T) {
	// Seconds (gpt) to tens of seconds (bert-base, the long tier) of CBC
	// each: the integration tier.
	oracle.Integration(t, "the exact models")
	oracle.MILPSolver(t)
	prof := titan(t)
	for _, c := range exactCases {
		t.Run(fmt.Sprintf("%s-b%d-%.0f", c.family, c.batch, 100*c.frac), func(t *testing.T) {
			if c.family == "bert-base" {
				oracle.Long(t, "bert-base's exact model (tens of seconds of CBC)")
			}
			m, peak := scheduled(t, c.family, c.batch)
			budget := int64(c.frac * float64(peak))
			mem, err := memory.Analyze(m.Graph, memory.Options{})
			if err != nil {
				t.Fatal(err)
			}
			tl := passes.Simulate(m.Graph, mem, prof)
			ex, err := bound.MILP(context.Background(), m.Graph, mem, tl, prof, budget, bound.ExactOptions{TimeLimit: 30 * time.Second, Gap: 1e-2, Keep: os.Getenv("BOUND_KEEP")})
			if err != nil {
				t.Fatal(err)
			}
			best := math.Inf(1)
			for _, p := range planAll(t, c.family, c.batch, budget, prof) {
				if p.report.Split == 0 && p.bound.Order == "plan" && p.bound.BaseStep == tl.StepTime {
					best = math.Min(best, p.added())
				}
			}
			if math.IsInf(best, 1) {
				t.Fatalf("no plan of the class fits: the case tests nothing")
			}
			t.Logf("LP %.5g ms, MILP %.5g ms (optimal %v, %d binaries, %d rows, %v), best plan of the class %.5g ms",
				ex.LP.Added*1e3, ex.Added*1e3, ex.Optimal, ex.Binaries, ex.Rows, ex.Solve.Round(time.Millisecond), best*1e3)
			tol := 1e-7 * tl.StepTime
			if ex.Added < ex.LP.Added-tol {
				t.Errorf("MILP %.6g ms below the LP bound %.6g ms", ex.Added*1e3, ex.LP.Added*1e3)
			}
			if ex.Added > best+tol {
				t.Errorf("MILP %.6g ms above the best plan of the class, %.6g ms", ex.Added*1e3, best*1e3)
			}
			if ex.Added <= 0 {
				t.Errorf("the exact model's optimum is 0: the case tests nothing")
			}
		})
	}
}

// TestBoundDeterministic: the same graph and budget give the same bound,
// and so do a fresh build of the graph.
func TestBoundDeterministic(t *testing.T) {
	prof := titan(t)
	m, peak := scheduled(t, "vgg16", 512)
	budget := peak * 45 / 100
	a := lower(t, m, prof, budget)
	b := lower(t, m, prof, budget)
	m2, _ := scheduled(t, "vgg16", 512)
	c := lower(t, m2, prof, budget)
	for _, r := range []*bound.Result{b, c} {
		if r.Added != a.Added || r.Rows != a.Rows || r.Cols != a.Cols || r.Rounds != a.Rounds || r.Recompute != a.Recompute {
			t.Errorf("bounds differ: %+v and %+v", a, r)
		}
	}
	if a.Added <= 0 {
		t.Errorf("bound %g: the case tests nothing", a.Added)
	}
}

// TestBoundEdges: no bound at the peak; an infeasible budget says so
// and names the op; missing inputs are an error.
func TestBoundEdges(t *testing.T) {
	prof := titan(t)
	m, peak := scheduled(t, "vgg16", 512)
	if r := lower(t, m, prof, peak); r.Added != 0 || r.Positions != 0 || r.Infeasible {
		t.Errorf("at the peak: %+v", r)
	}
	if r := lower(t, m, prof, 1<<10); !r.Infeasible || !math.IsInf(r.Added, 1) || r.Where == "" {
		t.Errorf("at 1 KiB: %+v", r)
	}
	if _, err := bound.Lower(m.Graph, nil, nil, prof, peak); err == nil {
		t.Errorf("no memory model: no error")
	}
}
