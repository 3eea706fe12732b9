package passes

import (
	"fmt"
	"slices"

	"github.com/tsplit/tsplit/internal/units"
	"github.com/tsplit/tsplit/ir"
	"github.com/tsplit/tsplit/memory"
	"github.com/tsplit/tsplit/profile"
)

// Policy is a memory policy as planning sees it: each round, it chooses
// what to evict (PolicyContext → Plan), and the passes of this package
// realize the plan — insertion, schedule, layout, emission — the same
// way for every policy (DESIGN decision 6). Package policy holds the
// policies (tsplit and the baselines) and their table; this package
// knows them only as values of this interface, so it never imports them.
type Policy interface {
	// Name is the policy's name in reports and errors ("tsplit").
	Name() string
	// Plan makes one round's plan.
	Plan(c *PolicyContext) (*Plan, error)
	// OwnTriggers reports whether the policy's swap-in triggers are part
	// of its algorithm (vDNN's layer-synchronous swap-ins, TFLMS's lb/ub
	// control ops, …): ControlEdges then leaves them where they are.
	OwnTriggers() bool
	// DefaultOrder is the op order the policy plans under when the
	// options name none (OrderAuto): the order its system runs in.
	DefaultOrder() OpOrder
}

// StepPlanner is a Policy that drives planning itself instead of one
// PlanRounds: tsplit plans twice, with and without splits, and keeps the
// faster plan. PlanMemory calls PlanStep when the policy has it.
type StepPlanner interface {
	Policy
	PlanStep(s *State) error
}

// StateOffloader is a Policy whose plans may keep the training state
// (parameters, optimizer state, running statistics) on the host
// (OffloadState) when it cannot plan the step with that state on the
// device. The baselines do not: they reproduce systems that keep
// weights resident.
type StateOffloader interface {
	Policy
	OffloadsState() bool
}

// UpdateSearcher is a StateOffloader whose own search places the
// update of offloaded state: given Options.Update == UpdateAuto (with
// OffloadState), the plans it compares include both placements, each
// with Update set. PlanMemory then makes one search instead of one per
// placement. SearchesUpdate says whether it does under opts.
type UpdateSearcher interface {
	StateOffloader
	SearchesUpdate(opts *Options) bool
}

// LowerBounder is a Policy that can say how little memory any of its
// plans needs on a graph; PlanRounds puts the bound of the graph it
// started from into an InfeasibleError.
type LowerBounder interface {
	Policy
	LowerBound(c *PolicyContext) int64
}

// PolicyContext is what a memory policy sees in one planning round: the
// current graph in its final order, its exact memory model, its
// simulated timeline, the device and the target budget.
type PolicyContext struct {
	Model *ir.Model
	G     *ir.Graph
	Mem   *memory.Model
	TL    *Timeline
	Prof  *profile.Profile
	// Budget is what the round aims at: the budget, lowered when the
	// static layout of a fitting plan needed a larger pool.
	Budget int64
	// Given is the budget planning was given (Budget or more); 0 where
	// the caller set none, read as Budget.
	Given int64
	// Round counts planning rounds (0 first). A policy that decides
	// everything at once returns an empty plan in later rounds, which
	// ends planning with an error if the budget is still exceeded.
	Round int
	// Opts are the planning options (parameters, tsplit's NoSwap and
	// NoRecompute).
	Opts *Options
	// FT carries FT maps from round to round (SplitChoices); nil
	// computes them afresh.
	FT *FTCache
}

// BudgetText describes the round's budget for an error message: the
// budget planning was given, and what the round aimed at when the
// static layout's fragmentation lowered it (a user who asked for 3.46
// MiB must not read "the budget of 2.65 MiB" without the reason).
func (c *PolicyContext) BudgetText() string {
	if c.Given > c.Budget {
		return fmt.Sprintf("%s (aiming at %s to leave the static layout room for fragmentation)", units.Bytes(c.Given), units.Bytes(c.Budget))
	}
	return units.Bytes(c.Budget)
}

// SplitChoices tells a split planner how each op of m's graph may be
// split: the FT-compatible splits (FTCompat) that InsertSplit can
// realize — every concat or sum split of a deterministic op that leaves
// pinned values whole (slicesPinned). A random op
// (Dropout in training) is never split: its micro-ops would draw other
// masks and the planned step would differ from the unplanned one. The
// analysis runs on first use: most rounds never split. c, when not
// nil, keeps the maps of ops a round leaves alone for the next.
func SplitChoices(m *ir.Model, c *FTCache) func(op *ir.Op) []DimMap {
	var ft *FTResult
	return func(op *ir.Op) []DimMap {
		if ft == nil {
			ft = c.analyze(m)
		}
		var out []DimMap
		for _, d := range ft.Of(op) {
			if !d.Random && !slicesPinned(op, &d) {
				out = append(out, d)
			}
		}
		return out
	}
}

// slicesPinned reports whether splitting op along d would turn a value
// that must be a compile-time constant into an op result: an output that
// is pinned (ir.Value.Pinned; the merge of micro-outputs is not
// constant), or an input the op needs constant (ir.Schema.ConstIn) that
// d slices. Such splits are never offered.
func slicesPinned(op *ir.Op, d *DimMap) bool {
	for _, v := range op.Outputs() {
		if v != nil && v.Pinned() {
			return true
		}
	}
	s := ir.LookupSchema(op.Domain, op.Type)
	for j, in := range d.Inputs {
		if !in.Whole() && s != nil && slices.Contains(s.ConstIn, j) {
			return true
		}
	}
	return false
}

// Clonable reports whether InsertSwapRecompute can recompute v by
// cloning its producer: an op on the device that is not a copy. A random
// op (ir.Schema.Random) is never recomputed: the clone, under another
// name, would draw different numbers. Nor is a pinned value
// (ir.Value.Pinned): the clone's output would not be a compile-time
// constant.
func Clonable(v *ir.Value) bool {
	d := v.Def
	return d != nil && ir.CopyOf(d) == ir.NoCopy && !d.Host && !ir.IsRandom(d) && !v.Pinned()
}
