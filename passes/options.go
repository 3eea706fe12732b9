package passes

import (
	"context"

	"github.com/tsplit/tsplit/profile"
)

// Options configure the planning pipeline.
type Options struct {
	// Budget is the device memory budget in bytes (0: the profile's).
	Budget int64
	// Profile is the device; nil means titan-rtx.
	Profile *profile.Profile
	// Policy is the memory policy (package policy has them); PlanMemory
	// needs one.
	Policy Policy
	// Order is the op order to plan under; OrderAuto (the zero value)
	// lets the policy choose (Schedule).
	Order OpOrder
	// SwapPenalty adds to the ΔT of swapping a value (by name) what the
	// simulated timeline of an earlier plan showed its copies cost
	// beyond Eq. 3's estimate (tsplit's simulate-and-repair).
	SwapPenalty map[string]float64
	// MaxRelease caps how many ops after its SwapOut tsplit's planner
	// may keep a swapped tensor's device copy to hide the transfer
	// (0 or 1: the next op only; policy, Decision.Release).
	MaxRelease int
	// ShortReleases frees swapped copies sooner than tsplit's planner
	// planned (Plan.ShortReleases): fewer bytes held across the windows,
	// and waits where a copy has not ended. The search plans a variant
	// so where it found no plan otherwise.
	ShortReleases bool
	// LinkQueue prices tsplit's swap-outs (and its splits' copies to the
	// host) by the device-to-host link's queue: each copy after the ones
	// issued before it, charged the waits it adds to those issued after
	// it (policy, linkQueue), instead of Eq. 3's occupancy. The search
	// plans its window variants so.
	LinkQueue bool
	// ChainFit makes tsplit's planner judge whether a recompute chain's
	// clones fit against what is live before the op that reads the
	// chain's target allocates its outputs and workspace (the clones run
	// before it), not against everything live while it runs (policy,
	// chainSaving). The search plans the shrink-early order both ways.
	ChainFit bool
	// OutputSwaps lets tsplit's planner swap a graph output (an updated
	// weight, made in the backward pass and read by nothing after) over
	// the rest of the step, swapped back in by its end (policy,
	// candidates). The search plans the best order's variants so too.
	OutputSwaps bool
	// PeakFirst makes tsplit's planner visit the bottlenecks from the
	// peak down instead of in op order (policy, planner.walk).
	PeakFirst bool
	// Segments lets tsplit's planner evict and recompute whole runs of
	// the forward pass between two kept checkpoints (policy, segment
	// candidates, TSPLIT §V-D's speed-centric recomputation).
	Segments bool
	// LinkPrice charges each swap candidate of tsplit's planner this
	// fraction of its transfers' time in its ranking (not in its ΔT),
	// and lets recomputation chains read the copies this round's
	// swap-ins restore (policy, swapCandidate, chainSourceOf): the
	// search's link-priced variants (at 0.1, 0.05 and 0.02), for steps
	// whose link cannot move everything a budget evicts.
	LinkPrice float64
	// AnyFit: any plan that fits will do (a search for a budget that
	// fits, tsplit.Options.FindFeasible). tsplit's search under
	// OrderAuto then stops after its order variants, skipping the peak
	// walk, the repair and the no-split search: those only make a plan
	// that fits faster, never one that does not fit fit.
	AnyFit bool
	// NoSwap and NoRecompute restrict the tsplit planner's options.
	NoSwap, NoRecompute bool
	// OffloadState keeps the parameters and optimizer state on the host
	// (OffloadState) before the first planning round. PlanMemory sets
	// it for a policy that offloads (StateOffloader) when the plan
	// cannot fit with the state on the device; a caller may force it.
	OffloadState bool
	// Offload lets a policy that offloads (StateOffloader) keep the
	// state on the host where it cannot plan the step with the state
	// on the device. It is off unless asked for (tsplitc --offload):
	// the host's cost model is not measured yet, and it predicts
	// host-updated steps faster than resident ones, which would make
	// plans jump between the two as the budget moves (docs/offload.md).
	Offload bool
	// Update is where a plan with its state on the host runs the
	// optimizer update (UpdateAuto: the placement whose simulated step
	// is shorter).
	Update UpdatePlace
	// PolicyParams are the policy's parameters, as text, already checked
	// against what it declares (package policy).
	PolicyParams map[string]string
	// Context, when set, is checked before every pass and every planning
	// round, so a caller can stop a long plan: once it is done, planning
	// returns its error (context.Canceled or DeadlineExceeded).
	Context context.Context
	// OnRound, when set, is called at the start of every planning round
	// with the round (0 first), the peak of the graph it plans (the
	// unplanned step's in round 0) and the budget it aims at, for
	// progress reports. tsplit's swap/recompute-only alternative plan
	// (tsplit's PlanStep, package policy) reports its rounds too, from
	// round 0 again.
	OnRound func(round int, peak, target int64)
}

// interrupted is the context's error once it is done, else nil.
func (o *Options) interrupted() error {
	if o == nil || o.Context == nil {
		return nil
	}
	return o.Context.Err()
}

// UpdatePlace is where a plan that keeps the training state on the host
// (OffloadState) runs the optimizer update.
type UpdatePlace uint8

// Update placements.
const (
	// UpdateAuto plans both placements and keeps the shorter simulated
	// step (the device's on a tie).
	UpdateAuto UpdatePlace = iota
	// UpdateDevice brings the parameter and its optimizer state to the
	// device for the update.
	UpdateDevice
	// UpdateHost runs the update on the host (ZeRO-Offload's placement):
	// the gradient goes out, the updated values stay there.
	UpdateHost
)

func (u UpdatePlace) String() string { return [...]string{"auto", "device", "host"}[u] }

// ParseUpdatePlace reads "auto", "device" or "host".
func ParseUpdatePlace(s string) (UpdatePlace, bool) {
	for u := UpdateAuto; u <= UpdateHost; u++ {
		if u.String() == s {
			return u, true
		}
	}
	return 0, false
}
