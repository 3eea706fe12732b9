package bound

import (
	"fmt"
	"math"

	"github.com/tsplit/tsplit/ir"
	"github.com/tsplit/tsplit/memory"
	"github.com/tsplit/tsplit/passes"
	"github.com/tsplit/tsplit/profile"
)

// Summary is the bound next to a plan, as the plan summary reports it.
type Summary struct {
	*Result
	// Order says which order the bound is of: "plan" (the order the
	// plan runs the step's own ops in) or "depth-first" (the plan
	// removed ops of the step — it split them — so its order could not
	// be recovered, and the bound is of the schedule pass's order).
	Order string `json:"order"`
	// Added is the time the plan adds to the base step; Gap is
	// (Added − bound) / bound (+Inf when the bound is 0 and the plan
	// adds time).
	PlanAdded float64 `json:"plan_added_s"`
	Gap       float64 `json:"gap"`
	// OutsideClass marks a plan that adds less than the bound: one the
	// class does not hold (it splits tensors); for a plan of the class
	// that would be a bug.
	OutsideClass bool `json:"outside_class,omitempty"`
}

// ForPlan computes the bound for a plan: step is the unplanned training
// step (any order; it is reordered), planned the plan made from it at
// budget, planAdded the step time the plan adds. The bound is of the
// order planned runs the step's ops in.
func ForPlan(step, planned *ir.Model, prof *profile.Profile, budget int64, planAdded float64) (*Summary, error) {
	s := &Summary{Order: "plan", PlanAdded: planAdded}
	if !PlanOrder(step, planned) {
		order, err := passes.DFSOrder(step.Graph)
		if err != nil {
			return nil, fmt.Errorf("bound: %v", err)
		}
		if err := step.Graph.SetOrder(order); err != nil {
			return nil, fmt.Errorf("bound: %v", err)
		}
		s.Order = "depth-first"
	}
	mem, err := memory.Analyze(step.Graph, memory.Options{})
	if err != nil {
		return nil, err
	}
	tl := passes.Simulate(step.Graph, mem, prof)
	if s.Result, err = Lower(step.Graph, mem, tl, prof, budget); err != nil {
		return nil, err
	}
	// A plan that adds nothing has Step − BaseStep of float64 rounding
	// (two sums of the same op costs, about 1e-15 of the step), either
	// sign: without this it could be "below" a zero bound (outside the
	// class) or infinitely far above it.
	if math.Abs(planAdded) <= 1e-9*s.BaseStep {
		planAdded = 0
	}
	s.PlanAdded = planAdded
	s.Gap = s.Result.Gap(planAdded)
	s.OutsideClass = planAdded < s.Added*(1-1e-9)
	return s, nil
}

// PlanOrder puts step's ops in the order planned runs them in, and
// reports whether it could: a plan keeps the step's ops (same IDs and
// names, as ir.Model.Clone keeps them) and adds its own, unless it
// split some.
func PlanOrder(step, planned *ir.Model) bool {
	n := step.Graph.NumOpIDs()
	order := make([]*ir.Op, 0, len(step.Graph.Order()))
	for _, op := range planned.Graph.Order() {
		if int(op.ID) >= n {
			continue
		}
		if o := step.Graph.OpByID(op.ID); o != nil && o.Name == op.Name && o.Type == op.Type {
			order = append(order, o)
		}
	}
	if len(order) != len(step.Graph.Order()) {
		return false
	}
	return step.Graph.SetOrder(order) == nil
}
