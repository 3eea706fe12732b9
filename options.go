package tsplit

import (
	"io"
	"maps"

	"github.com/tsplit/tsplit/compiler"
	"github.com/tsplit/tsplit/passes"
	"github.com/tsplit/tsplit/policy"
	"github.com/tsplit/tsplit/profile"
)

// TrainOptions choose the loss and the optimizer of a training step.
type TrainOptions = compiler.TrainOptions

// TrainingInfo is what a training step records about itself: its loss,
// optimizer, parameters and the outputs fed back as the next step's
// inputs.
type TrainingInfo = compiler.TrainingInfo

// ForwardBuilder builds a model's forward graph at a batch, a fresh
// model each call.
type ForwardBuilder = compiler.ForwardBuilder

// Options configure Load, Train and Plan. The zero value plans a model
// at batch 1 into the titan-rtx profile's memory with the tsplit policy.
type Options struct {
	// Batch is bound to the leading symbolic (or unknown) dimension of
	// the model's inputs (0: 1); Dims binds other symbolic dimensions by
	// name.
	Batch int64
	Dims  map[string]int64

	// Train chooses the loss and optimizer of the training step built
	// for a forward model. A model that already is a training step is
	// planned as it is.
	Train TrainOptions

	// Device names a built-in device profile (profile.Names) or a JSON
	// profile file ("": titan-rtx); Profile, when set, is used instead.
	Device  string
	Profile *profile.Profile
	// Budget is the device memory budget in bytes (0: the profile's
	// memory less what it reserves).
	Budget int64
	// Policy is the memory policy (policy.Names; "": tsplit), looked up
	// once by Plan, and PolicyParams its parameters by name, as text.
	Policy       string
	PolicyParams map[string]string
	// NoSwap and NoRecompute restrict tsplit's planner to the other
	// options; NoFusedTiles keeps it from planning fused-tiled segments
	// (docs/sft.md).
	NoSwap, NoRecompute, NoFusedTiles bool
	// Order is the op order to plan under ("", "auto": the policy's
	// choice — tsplit searches them all; "dfs", "alap", "as-built",
	// "grad-first", "shrink-early").
	Order string
	// Update is where a plan that keeps the parameters and optimizer
	// state on the host runs the optimizer update ("", "auto": the
	// faster simulated step; "device", "host"; docs/offload.md).
	Update string
	// Offload lets tsplit keep the parameters and optimizer state on the
	// host where they cannot stay on the device (off by default;
	// docs/offload.md).
	Offload bool

	// Forward rebuilds the model's forward graph at another batch. With
	// a policy that trains with sub-batches (modnn: Policy.SubBatches) it
	// turns on moDNN's sub-batching (policy.PlanSubBatched): the step is
	// rebuilt as sub-batches with gradient accumulation where Eq. 3 says
	// the whole batch does not fit. PlanFile sets it for a forward
	// model; without it modnn plans the step as it is.
	Forward ForwardBuilder
	// MaxSubBatches and MaxSubBatchOps, when positive, bound the
	// sub-batched step (it is unrolled, one copy per sub-batch): more is
	// an InfeasibleError wrapping a *policy.SubBatchLimitError.
	MaxSubBatches, MaxSubBatchOps int

	// FindFeasible makes a budget the policy cannot fit cost more plans:
	// planning again, by bisection between that budget and the
	// unplanned peak (at most maxFeasibleTries plans), finds a budget
	// the policy does fit, reported in InfeasibleError.Feasible. Off,
	// a failed plan costs nothing more (the benchmark probes many).
	FindFeasible bool

	// Check runs ir.Verify after every pass; DumpAfter names the passes
	// after which the IR is written to DumpTo (a name such as
	// plan/round-2/insert, a path.Match pattern, or a last element such
	// as insert: passes.State.DumpAfter).
	Check     bool
	DumpAfter string
	DumpTo    io.Writer

	// Bound computes, after planning, a lower bound on the step time of
	// any swap + recompute plan of the step in the plan's order (package
	// bound) and the plan's gap to it: Result.LowerBoundStep and
	// Result.Bound. It takes up to about a second on a large step.
	Bound bool

	// Output, when set, is where Plan and Train write the resulting
	// ONNX model (atomically).
	Output string
	// Target is what Plan writes to Output: "" or "onnx", the planned
	// ONNX model; "native", a native execution plan (a .tsplan file,
	// package backend/native: the pool, every tensor's offset and one
	// command list per stream), which Run and RunFile execute.
	Target string

	// Progress, when set, is told how the work advances (from the
	// calling goroutine).
	Progress func(Progress)
}

// Targets of Options.Target.
const (
	TargetONNX   = "onnx"
	TargetNative = "native"
)

// Stage is a step of the work Progress reports on.
type Stage string

// The stages, in the order they happen.
const (
	StageImport Stage = "import" // reading the ONNX file
	StageTrain  Stage = "train"  // building the training step
	StagePlan   Stage = "plan"   // planning rounds
	StageWrite  Stage = "write"  // writing the output file
	StageRun    Stage = "run"    // executing iterations
)

// Progress is one report of how far the work is.
type Progress struct {
	Stage Stage
	// Round is the planning round (StagePlan) or the iteration
	// (StageRun), 0 first.
	Round int
	// Fraction of the stage done, in [0, 1], never decreasing within a
	// stage: for planning, how much of the way from the unplanned peak
	// down to the budget the plan has come; 1 when the stage is over.
	Fraction float64
	// Peak is the memory peak of the graph being planned (StagePlan).
	Peak int64
	// Loss is the last iteration's loss of a training step (StageRun;
	// NaN for a model that is not a training step).
	Loss float64
}

// progress sends p to fn (when set), keeping Fraction monotone within
// a stage.
type progress struct {
	fn    func(Progress)
	stage Stage
	frac  float64
}

func (p *progress) report(q Progress) {
	if p == nil || p.fn == nil {
		return
	}
	if q.Stage != p.stage {
		p.stage, p.frac = q.Stage, 0
	}
	q.Fraction = max(min(q.Fraction, 1), p.frac)
	p.frac = q.Fraction
	p.fn(q)
}

// importOptions checks and returns the frontend's options.
func importOptions(batch int64, dims map[string]int64) (compiler.Options, error) {
	if batch < 0 {
		return compiler.Options{}, usage("Batch", "must be positive, got %d", batch)
	}
	for name, n := range dims {
		if name == "" || n < 0 {
			return compiler.Options{}, usage("Dims", "%q=%d: want a name and a size >= 0", name, n)
		}
	}
	return compiler.Options{Batch: batch, Dims: maps.Clone(dims)}, nil
}

// trainOptions checks the options of a training step: a *UsageError
// naming the field (Train.LR, say).
func trainOptions(o TrainOptions) error {
	if field, err := o.Check(); err != nil {
		return &UsageError{Option: "Train." + field, Err: err}
	}
	return nil
}

// planOptions checks the planning options, before any model is read,
// and returns the policy — looked up by name here, once — and the
// planner's options.
func (o *Options) planOptions() (policy.Policy, *policy.Options, error) {
	if err := trainOptions(o.Train); err != nil {
		return nil, nil, err
	}
	prof := o.Profile
	if prof == nil {
		var err error
		if prof, err = profile.Lookup(o.Device); err != nil {
			return nil, nil, &UsageError{Option: "Device", Err: err}
		}
	}
	if o.Budget < 0 {
		return nil, nil, usage("Budget", "must not be negative, got %d", o.Budget)
	}
	budget := o.Budget
	if budget == 0 {
		budget = prof.Budget()
	}
	pol, err := policy.Lookup(o.Policy)
	if err != nil {
		return nil, nil, &UsageError{Option: "Policy", Err: err}
	}
	if err := policy.CheckParams(pol, o.PolicyParams); err != nil {
		return nil, nil, &UsageError{Option: "PolicyParams", Err: err}
	}
	order, err := passes.ParseOrder(o.Order)
	if err != nil {
		return nil, nil, &UsageError{Option: "Order", Err: err}
	}
	update := passes.UpdateAuto
	if o.Update != "" {
		var ok bool
		if update, ok = passes.ParseUpdatePlace(o.Update); !ok {
			return nil, nil, usage("Update", "is %q; it is auto, device or host", o.Update)
		}
	}
	if o.Target != "" && o.Target != TargetONNX && o.Target != TargetNative {
		return nil, nil, usage("Target", "is %q; targets are %s and %s", o.Target, TargetONNX, TargetNative)
	}
	if o.MaxSubBatches < 0 || o.MaxSubBatchOps < 0 {
		return nil, nil, usage("MaxSubBatches", "limits must not be negative")
	}
	return pol, &policy.Options{Budget: budget, Profile: prof, Params: o.PolicyParams,
		NoSwap: o.NoSwap, NoRecompute: o.NoRecompute, Order: order, Update: update, Offload: o.Offload, Check: o.Check, DumpAfter: o.DumpAfter, DumpTo: o.DumpTo}, nil
}
