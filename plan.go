package tsplit

import (
	"context"
	"errors"
	"runtime/debug"
	"time"

	"github.com/tsplit/tsplit/backend"
	"github.com/tsplit/tsplit/backend/native"
	"github.com/tsplit/tsplit/bound"
	"github.com/tsplit/tsplit/compiler"
	"github.com/tsplit/tsplit/ir"
	"github.com/tsplit/tsplit/memory"
	"github.com/tsplit/tsplit/passes"
	"github.com/tsplit/tsplit/policy"
)

// Result is what planning did. Its JSON field names are the ones
// `tsplitc plan --json` prints.
type Result struct {
	// Model is the planned training step (the model Plan was given,
	// rewritten, or the sub-batched step built anew) and Report the
	// planner's full report (decisions, memory timelines).
	Model  *ir.Model      `json:"-"`
	Report *passes.Report `json:"-"`
	// Passes are the planning passes' durations, planning's rounds
	// included (tsplitc -d time prints them: passes.WriteTimings).
	Passes []passes.Timing  `json:"-"`
	File   string           `json:"model"`
	Dims   map[string]int64 `json:"dims"`
	Ops    int              `json:"ops"`
	Device string           `json:"device"`
	Policy string           `json:"policy"`
	// PolicyParams are the policy's parameters as given.
	PolicyParams map[string]string `json:"policy_params,omitempty"`
	// Budget, the unplanned step's peak (BasePeak: the whole batch's
	// step, also for a sub-batched plan), the planned peak, the
	// static layout's pool and the most bytes swapped out to the host at
	// once, all in bytes.
	Budget   int64 `json:"budget_bytes"`
	BasePeak int64 `json:"base_peak_bytes"`
	Peak     int64 `json:"peak_bytes"`
	Pool     int64 `json:"pool_bytes"`
	HostPeak int64 `json:"host_peak_bytes"`
	// BaseStep and Step are the simulated step times in seconds of the
	// unplanned step without a memory limit (the whole batch's, also for
	// a sub-batched plan) and of the step as planned.
	BaseStep float64 `json:"base_step_s"`
	Step     float64 `json:"step_s"`
	// Tensors swapped, recomputed and split, and planning rounds.
	Swapped    int `json:"swapped"`
	Recomputed int `json:"recomputed"`
	Split      int `json:"split"`
	Rounds     int `json:"rounds"`
	// Offloaded is how many weights (parameters, optimizer state,
	// running statistics) the plan keeps in host memory, brought in
	// before each use (docs/offload.md).
	Offloaded int `json:"offloaded_state,omitempty"`
	// HostUpdate says the optimizer update of that state runs on the
	// host.
	HostUpdate bool `json:"host_update,omitempty"`
	// Kept says which of tsplit's two plans was kept when both were
	// made ("" otherwise).
	Kept string `json:"kept"`
	// FusedTiles names the fused-tiled segments of the plan and their
	// tile grids ("" for a plan without; docs/sft.md).
	FusedTiles string `json:"fused_tiles,omitempty"`
	// Order is the op order the plan was made in: dfs, alap, as-built,
	// grad-first or shrink-early (passes.OpOrder).
	Order string `json:"order"`
	// SubBatching is moDNN's sub-batching, when the modnn policy chose
	// (nil otherwise).
	SubBatching *SubBatching `json:"sub_batching,omitempty"`
	// PlanningSeconds is the time planning took (not the import or the
	// training step's construction).
	PlanningSeconds float64 `json:"planning_s"`
	// LowerBoundStep bounds the step time of any swap + recompute plan
	// of the step in the plan's order at the budget (Options.Bound; nil
	// when not computed or when no such plan fits), and Bound says more.
	LowerBoundStep *float64   `json:"lower_bound_step_s"`
	Bound          *BoundInfo `json:"lower_bound,omitempty"`
	// Output is the file written ("" when Options.Output was empty) and
	// Target what it holds: "onnx" (the planned model) or "native" (a
	// native execution plan).
	Output string `json:"output"`
	Target string `json:"target"`
}

// BoundInfo is the lower bound of package bound next to a plan.
type BoundInfo struct {
	// AddedS is the bound on the time a plan adds to BaseStep, and Gap
	// the plan's (Step − BaseStep − AddedS) / AddedS (nil when the bound
	// is 0).
	AddedS float64  `json:"added_s"`
	Gap    *float64 `json:"gap,omitempty"`
	// Ratio is the same gap with its edge cases (bound.Result.Gap): 0
	// when the bound and the plan's added time are both 0, +Inf when
	// the bound is 0 and the plan adds time. Not in the JSON, which has
	// no infinity; Gap is nil there in both cases.
	Ratio float64 `json:"-"`
	// Order is the order bounded: "plan", or "depth-first" when the plan
	// split ops and its own order of the step could not be recovered.
	Order string `json:"order"`
	// OutsideClass marks a plan that adds less than the bound, or fits
	// where the bound says no plan of the class does: it splits tensors,
	// which the class does not.
	OutsideClass bool `json:"outside_class,omitempty"`
	// Infeasible: no swap + recompute plan fits the budget.
	Infeasible bool    `json:"infeasible,omitempty"`
	SolveS     float64 `json:"solve_s"`
	// Error says why the bound could not be computed ("" when it was).
	Error string `json:"error,omitempty"`
}

// SubBatching is what moDNN's sub-batch selection decided.
type SubBatching struct {
	// Batch is the step's batch; Eq3 is Eq. 3's sub-batch size and
	// Sizes the sub-batches the planned step runs (nil: the whole batch
	// at once, when it fits).
	Batch int64   `json:"batch"`
	Eq3   int64   `json:"eq3_sub_batch"`
	Sizes []int64 `json:"sizes,omitempty"`
	// LowerBound is Eq. 2's least budget, in bytes.
	LowerBound int64 `json:"lower_bound_bytes"`
	// BasePeak and BaseStep are the plain step's peak in bytes and
	// simulated time in seconds (the whole batch run unplanned, memory
	// unlimited). A sub-batched plan compares with them: they are the
	// Result's BasePeak and BaseStep then.
	BasePeak int64   `json:"base_peak_bytes"`
	BaseStep float64 `json:"base_step_s"`
	// SubBatchedPeak and SubBatchedStep are the unplanned sub-batched
	// step's peak and time (0 when the plan runs the whole batch): what
	// sub-batching alone saves and costs, before the policy plans it.
	SubBatchedPeak int64   `json:"sub_batched_base_peak_bytes,omitempty"`
	SubBatchedStep float64 `json:"sub_batched_base_step_s,omitempty"`
}

// Load reads an ONNX model, binding its symbolic dimensions with
// opts.Batch and opts.Dims. Errors about the file are *InputError.
func Load(ctx context.Context, path string, opts Options) (*ir.Model, error) {
	iopts, err := importOptions(opts.Batch, opts.Dims)
	if err != nil {
		return nil, err
	}
	return load(ctx, path, iopts, &progress{fn: opts.Progress})
}

// load is the one import of a file: the plain one, and the forward
// builder sub-batching calls at other batches.
func load(ctx context.Context, path string, iopts compiler.Options, pr *progress) (*ir.Model, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	pr.report(Progress{Stage: StageImport})
	if native.IsPlanFile(path) {
		// A protobuf decode error would say the file is corrupt.
		return nil, inputError(path, errors.New("a native execution plan (.tsplan), not an ONNX model: `tsplitc run` executes it; the other commands read ONNX models"))
	}
	m, err := compiler.Import(path, iopts)
	if err != nil {
		return nil, inputError(path, err)
	}
	pr.report(Progress{Stage: StageImport, Fraction: 1})
	return m, nil
}

// forwardOf rebuilds the model in path at any batch.
func forwardOf(ctx context.Context, path string, iopts compiler.Options) ForwardBuilder {
	return func(batch int64) (*ir.Model, error) {
		o := iopts
		o.Batch = batch
		return load(ctx, path, o, nil)
	}
}

// Train builds the training step of a forward model in place: loss,
// backward pass and optimizer update, in standard ONNX ops. A model that
// already is a training step, or one it cannot differentiate, is an
// *InputError.
func Train(ctx context.Context, m *ir.Model, opts TrainOptions) (*TrainingInfo, error) {
	return train(ctx, m, opts, nil)
}

func train(ctx context.Context, m *ir.Model, opts TrainOptions, pr *progress) (*TrainingInfo, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	pr.report(Progress{Stage: StageTrain})
	ti, err := compiler.BuildTrainingStep(m, opts)
	if err != nil {
		return nil, inputError(m.Path, err)
	}
	pr.report(Progress{Stage: StageTrain, Fraction: 1})
	return ti, nil
}

// TrainFile reads a forward model, builds its training step with
// opts.Train and writes it to opts.Output when that is set.
func TrainFile(ctx context.Context, path string, opts Options) (*ir.Model, *TrainingInfo, error) {
	iopts, err := importOptions(opts.Batch, opts.Dims)
	if err != nil {
		return nil, nil, err
	}
	if err := trainOptions(opts.Train); err != nil {
		return nil, nil, err
	}
	if err := checkOutput(opts.Output, path); err != nil {
		return nil, nil, err
	}
	pr := &progress{fn: opts.Progress}
	m, err := load(ctx, path, iopts, pr)
	if err != nil {
		return nil, nil, err
	}
	ti, err := train(ctx, m, opts.Train, pr)
	if err != nil {
		return nil, nil, err
	}
	if opts.Output != "" {
		if err := write(ctx, m, opts.Output, pr); err != nil {
			return nil, nil, err
		}
	}
	return m, ti, nil
}

// WriteModel writes a model as ONNX, atomically: the same model always
// gives the same bytes. It writes only regular files, never one the
// model was read from (a *UsageError for Output otherwise), and gives
// the model its own external data file when it is written to another
// folder than its source's (backend.WriteFileContext).
func WriteModel(m *ir.Model, path string) error { return write(context.Background(), m, path, nil) }

// checkOutput refuses an output path before any work: one that is not a
// regular file, or the input model itself (its external data files are
// checked when the model is written).
func checkOutput(path, input string) error {
	if path == "" {
		return nil
	}
	if _, err := backend.CheckOutput(path, input); err != nil {
		return &UsageError{Option: "Output", Err: err}
	}
	return nil
}

func write(ctx context.Context, m *ir.Model, path string, pr *progress) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	pr.report(Progress{Stage: StageWrite})
	if err := backend.WriteFileContext(ctx, m, path); err != nil {
		var oe *backend.OutputError
		if errors.As(err, &oe) {
			return &UsageError{Option: "Output", Err: err}
		}
		return err
	}
	pr.report(Progress{Stage: StageWrite, Fraction: 1})
	return nil
}

// PlanFile reads an ONNX model and plans its training step (built with
// opts.Train for a forward model) into the budget; see Plan. The error
// of a model that cannot be read is an *InputError naming the file and
// the node, checked after the options.
func PlanFile(ctx context.Context, path string, opts Options) (*Result, error) {
	iopts, err := importOptions(opts.Batch, opts.Dims)
	if err != nil {
		return nil, err
	}
	if _, _, err := opts.planOptions(); err != nil {
		return nil, err
	}
	if err := checkOutput(opts.Output, path); err != nil {
		return nil, err
	}
	pr := &progress{fn: opts.Progress}
	m, err := load(ctx, path, iopts, pr)
	if err != nil {
		return nil, err
	}
	ti, err := compiler.ReadTrainingInfo(m)
	if err != nil {
		return nil, inputError(path, err)
	}
	if ti == nil && opts.Forward == nil {
		// A forward model can be rebuilt at any batch, which moDNN's
		// sub-batching does; a training step cannot.
		opts.Forward = forwardOf(ctx, path, iopts)
	}
	return plan(ctx, m, opts, pr)
}

// Plan plans the training step of m into the budget with the policy:
// it builds the step first when m is a forward model, then schedules
// it, chooses what to swap, recompute and split, inserts that, and lays
// every tensor out in one pool of at most the budget. m is rewritten in
// place (Result.Model is the planned step). Errors: *UsageError for
// bad options (before anything else), *InputError for a model that
// cannot be trained, *InfeasibleError for a budget the policy cannot
// fit, the context's error once ctx is done (checked between planning
// passes and rounds). When planning itself fails the partial Result
// (the unplanned step's peak and time) comes with the error.
func Plan(ctx context.Context, m *ir.Model, opts Options) (*Result, error) {
	return plan(ctx, m, opts, &progress{fn: opts.Progress})
}

func plan(ctx context.Context, m *ir.Model, opts Options, pr *progress) (*Result, error) {
	pol, popts, err := opts.planOptions()
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ti, err := compiler.ReadTrainingInfo(m)
	if err != nil {
		return nil, inputError(m.Path, err)
	}
	var fwd *ir.Model // the forward model, for fused tiles
	if ti == nil {
		if fusedTilesApply(pol) && !opts.NoFusedTiles {
			fwd = m.Clone()
		}
		if _, err := train(ctx, m, opts.Train, pr); err != nil {
			return nil, err
		}
	}
	var unplanned *ir.Model
	if opts.FindFeasible || opts.Bound {
		// Planning rewrites m; the feasible-budget search (on failure)
		// and the bound (on success) need the step as it was.
		unplanned = m.Clone()
	}
	start := time.Now()
	pres, err := planModel(ctx, m, &opts, pol, popts, pr)
	if fwd != nil {
		pres, err = withFusedTiles(ctx, fwd, &opts, pol, popts, pr, pres, err)
	}
	res := result(pres, &opts)
	if res != nil {
		res.PlanningSeconds = time.Since(start).Seconds()
	}
	if err != nil {
		if ctx.Err() != nil {
			return res, withFile(m.Path, err)
		}
		err = planError(m.Path, err, pol, pres, popts)
		var ie *InfeasibleError
		if opts.FindFeasible && pres != nil && pres.Report != nil && errors.As(err, &ie) {
			findFeasible(ctx, unplanned, &opts, pol, popts, pres.Report, ie)
		}
		return res, err
	}
	if opts.Bound && (res.SubBatching == nil || len(res.SubBatching.Sizes) <= 1) && res.FusedTiles == "" {
		lowerBound(unplanned, res, popts)
	}
	pr.report(Progress{Stage: StagePlan, Round: res.Rounds, Fraction: 1, Peak: res.Peak})
	res.Target = TargetONNX
	if opts.Target == TargetNative {
		res.Target = TargetNative
	}
	if opts.Output != "" {
		write := write
		if res.Target == TargetNative {
			write = writeNative
		}
		if err := write(ctx, res.Model, opts.Output, pr); err != nil {
			return res, err
		}
		res.Output = opts.Output
	}
	return res, nil
}

// planModel is the one place this package calls the planner:
// policy.Plan on a training step, or policy.PlanSubBatched around it
// when the policy trains with sub-batches (modnn) and the forward model
// can be rebuilt. It returns the last plan made (nil when none started;
// for sub-batching, one with only SubBatching when no step could be
// planned). A panic in the planner is a *PanicError.
func planModel(ctx context.Context, step *ir.Model, o *Options, pol policy.Policy, popts *policy.Options, pr *progress) (res *policy.Result, err error) {
	var base int64 = -1
	popts.OnRound = func(round int, peak, target int64) {
		if base < 0 {
			base = peak
		}
		f := 0.0
		if base > target {
			f = float64(base-peak) / float64(base-target)
		}
		pr.report(Progress{Stage: StagePlan, Round: round, Fraction: min(f, 0.99), Peak: peak})
	}
	defer func() {
		if r := recover(); r != nil {
			err = &PanicError{Policy: pol.Name(), Value: r, Stack: debug.Stack()}
		}
	}()
	if pol.SubBatches() && o.Forward != nil {
		mb := policy.SubBatchBuild{Forward: o.Forward, Train: o.Train, MaxSubBatches: o.MaxSubBatches, MaxOps: o.MaxSubBatchOps}
		return policy.PlanSubBatched(ctx, step, mb, pol, *popts)
	}
	return policy.Plan(ctx, step, pol, *popts)
}

// maxFeasibleTries bounds the plans findFeasible makes.
const maxFeasibleTries = 8

// findFeasible looks for a budget the policy fits after it failed at
// r.Budget: it plans a copy of the unplanned step at the unplanned peak
// (which must fit), then bisects between the failed budget and the
// least budget seen to fit, until the two are within 1 % of the peak or
// maxFeasibleTries plans are made. The result is deterministic, and a
// budget that planned, not an estimate: the planner is not monotonic
// in the budget, so no bound can promise one. It fills ie.Feasible,
// ie.Infeasible and ie.Tries (Feasible stays 0 when even the peak does
// not plan, or ctx ends first).
func findFeasible(ctx context.Context, unplanned *ir.Model, o *Options, pol policy.Policy, popts *policy.Options, r *passes.Report, ie *InfeasibleError) {
	lo, hi := r.Budget, r.BasePeak
	if hi <= lo {
		return // failed at or above the peak: not a question of budget
	}
	fits := func(budget int64) bool {
		ie.Tries++
		po := *popts
		po.Budget = budget
		po.AnyFit = true
		_, err := planModel(ctx, unplanned.Clone(), o, pol, &po, &progress{})
		return err == nil
	}
	if !fits(hi) {
		return
	}
	step := max(hi/100, memory.Alignment)
	for ie.Tries < maxFeasibleTries && hi-lo > step && ctx.Err() == nil {
		mid := lo + (hi-lo)/2
		if fits(mid) {
			hi = mid
		} else {
			lo = mid
		}
	}
	ie.Feasible, ie.Infeasible = hi, lo
}

// result gathers what the planner reported (nil when no plan started).
func result(pr *policy.Result, o *Options) *Result {
	if pr == nil {
		return nil
	}
	res := &Result{PolicyParams: o.PolicyParams, Passes: pr.Timings}
	if sub := pr.SubBatching; sub != nil {
		res.SubBatching = &SubBatching{Batch: sub.Batch, Eq3: sub.SubBatch, Sizes: sub.SubBatches, LowerBound: sub.LowerBound,
			BasePeak: sub.BasePeak, BaseStep: sub.BaseTime}
	}
	r, m := pr.Report, pr.Model
	if r == nil || m == nil {
		if res.SubBatching == nil {
			return nil
		}
		return res
	}
	sb := res.SubBatching
	res = &Result{SubBatching: sb, Model: m, Report: r, Passes: pr.Timings, File: m.Path, Dims: m.Dims, Ops: len(m.Graph.Order()), Device: r.Device,
		Policy: r.Policy, PolicyParams: o.PolicyParams, Budget: r.Budget, BasePeak: r.BasePeak, Peak: r.Peak,
		Pool: r.Pool, HostPeak: r.HostPeak, BaseStep: r.BaseTime, Step: r.Time, Swapped: r.Swapped,
		Recomputed: r.Recomputed, Split: r.Split, Rounds: r.Rounds, Offloaded: r.Offloaded, HostUpdate: r.HostUpdate, Kept: r.Chosen, Order: r.Order, FusedTiles: r.FusedTiles}
	if sb != nil && len(sb.Sizes) > 1 && sb.BasePeak > 0 {
		// The planned step runs sub-batches: the report's base is that
		// step unplanned, but the step a user would otherwise run is
		// the whole batch, and the overhead is against it (issue 12
		// item 4: +35 % read against the sub-batched step, +88 %
		// against the whole batch).
		sb.SubBatchedPeak, sb.SubBatchedStep = res.BasePeak, res.BaseStep
		res.BasePeak, res.BaseStep = sb.BasePeak, sb.BaseStep
		r.Whole = &passes.WholeBatch{Peak: sb.BasePeak, Time: sb.BaseStep, SubBatches: len(sb.Sizes)}
	}
	return res
}

// lowerBound fills res.LowerBoundStep and res.Bound for a whole-batch
// plan made from step. The bound is a diagnostic: when it cannot be
// computed (its LP solver failed) the plan stands and Bound.Error says
// why.
func lowerBound(step *ir.Model, res *Result, popts *policy.Options) {
	s, err := bound.ForPlan(step, res.Model, popts.Profile, res.Budget, res.Step-res.BaseStep)
	if err != nil {
		res.Bound = &BoundInfo{Error: err.Error()}
		return
	}
	b := &BoundInfo{Order: s.Order, OutsideClass: s.OutsideClass || s.Infeasible, Infeasible: s.Infeasible, SolveS: s.Solve.Seconds()}
	if !s.Infeasible {
		b.AddedS, b.Ratio = s.Added, s.Gap
		t := s.Step()
		res.LowerBoundStep = &t
		if s.Added > 0 {
			gap := s.Gap
			b.Gap = &gap
		}
	}
	res.Bound = b
}

// Overhead is the planned step's added time over the unconstrained
// step, in percent.
func (r *Result) Overhead() float64 {
	if r.BaseStep <= 0 {
		return 0
	}
	return 100 * (r.Step/r.BaseStep - 1)
}
