package policy

import (
	"fmt"
	"testing"

	"github.com/tsplit/tsplit/compiler"
	"github.com/tsplit/tsplit/internal/plantest"
	"github.com/tsplit/tsplit/ir"
	"github.com/tsplit/tsplit/memory"
	"github.com/tsplit/tsplit/passes"
	"github.com/tsplit/tsplit/profile"
)

// TestNoRecomputeBehindItsReader plans one round of Alg. 2 with
// recomputation only, from the peak, on the CI-sized ResNet-50 step at
// budgets where chains and single clones mix. InsertSwapRecompute clones
// in decision order, so a recompute of v placed at the same consumer as
// an earlier clone that reads v would come after that reader, which
// would read the original v and keep it live over the whole gap: v's
// clone costs time and frees nothing. No such pair may be planned.
func TestNoRecomputeBehindItsReader(t *testing.T) {
	m, mem, tl, p := simulatedStep(t, "resnet50", 32)
	recomputes := 0
	for _, pct := range []int64{70, 60, 50} {
		t.Run(fmt.Sprintf("%d%%", pct), func(t *testing.T) {
			pl := newPlanner(m.Graph, mem, tl, p, mem.Peak*pct/100)
			pl.Allowed[passes.Swap] = false
			pl.PeakFirst = true
			plan, err := pl.Run()
			if err != nil {
				t.Fatal(err)
			}
			ds := plan.Decisions
			for j, d := range ds {
				if d.Option != passes.Recompute {
					continue
				}
				recomputes++
				for _, e := range ds[:j] {
					if e.Option == passes.Recompute && e.Before == d.Before && reads(e.Value.Def, d.Value) {
						t.Errorf("%q is recomputed before position %d after the clone of %q, which reads it there", d.Value.Name, d.Before, e.Value.Name)
					}
				}
			}
		})
	}
	if recomputes == 0 {
		t.Fatal("no recomputation planned: the test checks nothing")
	}
}

// simulatedStep is the CI-sized family's training step at batch, its
// memory model and its simulated timeline on titan-rtx: what a test
// that drives the planner directly (newPlanner) starts from.
func simulatedStep(t *testing.T, family string, batch int64) (*ir.Model, *memory.Model, *passes.Timeline, *profile.Profile) {
	t.Helper()
	p, err := profile.Lookup("titan-rtx")
	if err != nil {
		t.Fatal(err)
	}
	m := plantest.Step(t, family, batch, compiler.TrainOptions{Optimizer: "sgd"})
	mem, err := memory.Analyze(m.Graph, memory.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return m, mem, passes.Simulate(m.Graph, mem, p), p
}
