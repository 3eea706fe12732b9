package passes

import (
	"fmt"

	"github.com/tsplit/tsplit/internal/units"
	"github.com/tsplit/tsplit/ir"
)

// A plan is what a memory policy hands to the rewriting passes: per
// tensor, evict it after one position and have it back before another,
// by swapping or recomputing; per op, split it. Positions refer to the
// order the plan was made on.

// Option is the memory option of a tensor (TSPLIT's sTensor opt).
type Option uint8

// Options of a tensor.
const (
	Reside Option = iota
	Swap
	Recompute
)

func (o Option) String() string { return [...]string{"reside", "swap", "recompute"}[o] }

// Decision is the plan for one tensor: evict it after position After
// (its last use before the bottleneck) and have it back before position
// Before (its next use). Positions refer to the order the plan was made
// on.
type Decision struct {
	Value  *ir.Value
	Option Option
	After  int
	Before int
	// Trigger is where a swap-in starts (swap only): early enough to
	// hide the transfer, late enough not to raise the peak.
	Trigger int
	// Release is how many ops after the SwapOut the device copy is
	// freed (swap only; 0 or 1: the next op): the ops that hide the
	// swap-out, the runtime waiting for the copy after the last of
	// them (ir.SwapOutRelease).
	Release int
	// At is the bottleneck position that chose this decision.
	At     int
	DeltaM int64
	DeltaT float64
}

// Plan is the result of planning.
type Plan struct {
	Budget    int64
	Decisions []*Decision
	Splits    []*SplitDecision
	// Partial marks a round that stopped at a bottleneck it could not
	// clear yet; planning continues on the rewritten graph.
	Partial bool
	// ShortReleases writes each swap-out's release window as the count
	// of ops the planner gave it, counted in the rewritten order, where
	// the ops inserted inside the window count too: the copy is freed
	// after fewer of the ops the planner meant to hide its transfer
	// (Options.ShortReleases). Otherwise the count runs to the op the
	// planner meant.
	ShortReleases bool
	// Detail is what the policy decided beyond the decisions (moDNN: its
	// sub-batch and convolution algorithms), for the caller: planning
	// keeps the last round's in State.Detail.
	Detail any
}

// InfeasibleError says no plan fits the budget.
type InfeasibleError struct {
	Budget     int64
	At         string // the op where nothing more could be freed
	Need       int64  // bytes live there after every possible eviction
	LowerBound int64  // no plan of this kind fits below this
	// HostState is the bytes of parameters and optimizer state the
	// plan kept on the host (OffloadState; 0: all on the device): the
	// bound is that of the step with them there.
	HostState int64
}

func (e *InfeasibleError) Error() string {
	// No budget above the bound is promised: the planner is greedy and
	// not monotonic in the budget (tsplit.Options.FindFeasible finds a
	// budget that plans by planning again).
	where := ""
	if e.HostState > 0 {
		where = fmt.Sprintf(", with %s of parameters and optimizer state on the host", units.Bytes(e.HostState))
	}
	return fmt.Sprintf("no plan fits a budget of %s: at %s, %s stay live after evicting every candidate (device memory short by %s); the lower bound for this graph is %s (the weights and kept outputs live at its largest op, plus that op's inputs, outputs and workspace, split to the limit where it can be%s)",
		units.Bytes(e.Budget), e.At, units.Bytes(e.Need), units.Bytes(max(e.Need-e.Budget, 0)), units.Bytes(e.LowerBound), where)
}

// HostMemoryError is a plan that fits the device but whose swapped
// tensors and host-resident state (OffloadState) need more pinned host
// memory at once than the profile has: host memory, not device memory,
// is short.
type HostMemoryError struct {
	Profile string
	// Need is the plan's host peak, State the part of it that is
	// parameters and optimizer state kept on the host, Have the
	// profile's pinned host memory.
	Need, State, Have int64
}

func (e *HostMemoryError) Error() string {
	state := ""
	if e.State > 0 {
		state = fmt.Sprintf(", %s of it parameters and optimizer state kept there", units.Bytes(e.State))
	}
	return fmt.Sprintf("host memory is short by %s: the plan fits the device but holds %s in pinned host memory at once%s, more than the %s profile's %s",
		units.Bytes(e.Need-e.Have), units.Bytes(e.Need), state, e.Profile, units.Bytes(e.Have))
}
