package policy

import (
	"context"
	"io"

	"github.com/tsplit/tsplit/ir"
	"github.com/tsplit/tsplit/passes"
	"github.com/tsplit/tsplit/profile"
)

// Options are what planning needs beyond the model and the policy.
type Options struct {
	// Budget is the device memory budget in bytes (0: the profile's).
	Budget int64
	// Profile is the device; nil means titan-rtx.
	Profile *profile.Profile
	// Params are the policy's parameters as text (Policy.Params declares
	// them); Plan checks them before anything else.
	Params map[string]string
	// NoSwap and NoRecompute restrict the tsplit planner's options.
	NoSwap, NoRecompute bool
	// Segments offers the tsplit planner segment candidates under an
	// explicit Order (passes.Options.Segments; under OrderAuto its
	// search tries them itself).
	Segments bool
	// Update is where a plan that keeps the training state on the host
	// runs the optimizer update (passes.UpdateAuto: the faster).
	Update passes.UpdatePlace
	// Offload lets tsplit keep the training state on the host where it
	// cannot stay on the device (passes.Options.Offload).
	Offload bool
	// Order is the op order to plan under (passes.OrderAuto: the
	// policy's choice).
	Order passes.OpOrder
	// AnyFit asks only whether the budget fits: the policy may return
	// the first plan that fits instead of searching for the fastest
	// (passes.Options.AnyFit). Whether a plan is found is the same.
	AnyFit bool
	// Check runs ir.Verify after every pass, planning's rounds included.
	Check bool
	// DumpAfter names the passes after which the IR is dumped to DumpTo
	// (passes.State.DumpAfter: a name, a pattern, or a last element).
	DumpAfter string
	DumpTo    io.Writer
	// OnPass, when set, is called after every pass with its timing.
	OnPass func(passes.Timing)
	// OnRound, when set, is called at the start of every planning round
	// (passes.Options.OnRound), for progress reports.
	OnRound func(round int, peak, target int64)
}

// Result is a plan.
type Result struct {
	// Model is the planned step: the model given to Plan, rewritten, or
	// the step PlanSubBatched built.
	Model *ir.Model
	// Report is what planning did. A failed plan keeps what it got to
	// (the base peak and timeline at least, when planning started).
	Report *passes.Report
	// Timings are the passes' durations, planning's rounds included.
	Timings []passes.Timing
	// Detail is what the policy's last round said beyond its plan
	// (moDNN: *ModnnResult), nil for most policies.
	Detail any
	// SubBatching is what PlanSubBatched decided (nil from Plan).
	SubBatching *SubBatching
}

// Plan plans m's training step into the budget with pol: the pipeline
// of package passes (schedule, plan in rounds, control edges, layout),
// the policy choosing what to evict each round. m is rewritten in place.
// A nil pol is Tsplit. The error of a failed plan comes with the Result
// as far as it got; a cancelled ctx stops planning between two passes.
func Plan(ctx context.Context, m *ir.Model, pol Policy, opts Options) (*Result, error) {
	if pol == nil {
		pol = Tsplit
	}
	if err := CheckParams(pol, opts.Params); err != nil {
		return nil, err
	}
	s := passes.NewState(m, &passes.Options{Budget: opts.Budget, Profile: opts.Profile, Policy: pol,
		NoSwap: opts.NoSwap, NoRecompute: opts.NoRecompute, Order: opts.Order, PolicyParams: opts.Params, Context: ctx, OnRound: opts.OnRound,
		AnyFit: opts.AnyFit, Update: opts.Update, Offload: opts.Offload, Segments: opts.Segments})
	s.Check, s.OnPass = opts.Check, opts.OnPass
	s.DumpAfter, s.DumpTo = opts.DumpAfter, opts.DumpTo
	err := s.Run(passes.Pipeline...)
	return &Result{Model: m, Report: s.Report, Timings: s.Timings, Detail: s.Detail}, err
}
