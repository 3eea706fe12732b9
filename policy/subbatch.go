package policy

import (
	"context"
	"fmt"
	"slices"

	"github.com/tsplit/tsplit/compiler"
	"github.com/tsplit/tsplit/ir"
	"github.com/tsplit/tsplit/memory"
	"github.com/tsplit/tsplit/passes"
	"github.com/tsplit/tsplit/profile"
)

// Sub-batching (moDNN §IV-A: "the gradients are accumulated from all the
// sub-batches") sits above the policies: when Eq. 3's sub-batch b is
// below the batch B, the step is rebuilt as sub-batches of b samples
// (compiler.AccumulateSubBatches: k replicas of the step at b, gradients
// accumulated, one optimizer update; the last sub-batch smaller when b
// does not divide B), and that step is planned with a policy like any
// other. moDNN's Alg. 1 is the policy it was written for, and the only
// one tsplitc and tsplitc bench combine it with (Policy.SubBatches).
// Another policy plans a sub-batched step the same way (a test plans
// one with tsplit), but no front end offers that yet and no test runs
// such a plan on the device.
//
// Eq. 1–3 count what each task reads and writes. Which bytes of a
// tensor grow with b is exact because the step is also built at B + 1:
// bytes(B) = F + P·B per tensor (modnnTasksExact).

// SubBatching is what the sub-batching layer decided.
type SubBatching struct {
	// Batch is the step's batch and SubBatch Eq. 3's sub-batch size.
	Batch, SubBatch int64
	// SubBatches are the sub-batches the planned step runs (nil: the
	// whole batch at once).
	SubBatches []int64
	LowerBound int64 // Eq. 2
	// BasePeak and BaseTime are the peak and simulated time of the
	// plain step run unplanned (the whole batch, in the order it was
	// built, every tensor resident, memory unlimited): what a
	// sub-batched plan compares with, since the unplanned sub-batched
	// step is not what the user would otherwise run (issue 12 item 4).
	BasePeak int64
	BaseTime float64
	ops      int // the plain step's
}

// SubBatchBuild says how the sub-batching layer rebuilds a plain step.
type SubBatchBuild struct {
	// Forward builds the model's forward graph at a batch and Train are
	// the plain step's training options.
	Forward compiler.ForwardBuilder
	Train   compiler.TrainOptions
	// MaxSubBatches > 0 bounds the number of sub-batches and MaxOps > 0
	// the ops of the unrolled step (about the sub-batches × the plain
	// step's ops): the step is unrolled, one copy of the sub-batch step
	// per sub-batch, and planning time grows faster than its size. More
	// is a *SubBatchLimitError.
	MaxSubBatches, MaxOps int
}

// SubBatchLimitError is the error of SubBatchedStep and PlanSubBatched when a
// sub-batch would need more sub-batches than the caller unrolls.
type SubBatchLimitError struct {
	// Batch is the step's, SubBatch Eq. 3's and Tried the sub-batch
	// that would need SubBatches > Max sub-batches.
	Batch, SubBatch, Tried int64
	SubBatches, Max        int
	// MaxOps and Ops: the same bound and need in ops (0: not the
	// bound that was hit).
	MaxOps, Ops int
	// After is why the plan at a larger sub-batch did not fit (nil:
	// Tried is Eq. 3's).
	After error
}

func (e *SubBatchLimitError) Error() string {
	msg := fmt.Sprintf("modnn: at batch %d, sub-batches of %d (Eq. 3: %d) are %d sub-batches, more than the %d unrolled at most", e.Batch, e.Tried, e.SubBatch, e.SubBatches, e.Max)
	if e.MaxOps > 0 {
		msg = fmt.Sprintf("modnn: at batch %d, sub-batches of %d (Eq. 3: %d) are %d sub-batches, an unrolled step of about %d ops, more than the %d built at most", e.Batch, e.Tried, e.SubBatch, e.SubBatches, e.Ops, e.MaxOps)
	}
	if e.After != nil {
		msg += fmt.Sprintf(" (a larger sub-batch did not plan: %v)", e.After)
	}
	return msg
}

// selectSubBatch is Eq. 1–3 on a step's memory model; other, when not
// nil, is the same step at batch + 1 (modnnTasksExact).
func selectSubBatch(g *ir.Graph, mem *memory.Model, other *ir.Graph, p *profile.Profile, budget int64) SubBatching {
	batch := modnnBatch(g)
	var weights int64
	for _, iv := range mem.Intervals {
		if iv.Kind == memory.Weight {
			weights += iv.Bytes
		}
	}
	var tasks []modnnTask
	if other != nil && modnnBatch(other) == batch+1 {
		tasks = modnnTasksExact(mem, other, p, batch)
	}
	if tasks == nil {
		tasks = modnnTasks(mem, p, batch)
	}
	res := SubBatching{Batch: batch, LowerBound: modnnLowerBound(weights, tasks)}
	res.SubBatch = modnnSubBatch(budget, weights, tasks, batch)
	return res
}

// selectPlain computes Eq. 1–3 for a plain training step before it is
// planned, on its depth-first schedule (as the policy sees it), with
// opts' budget and profile. With other, the same step built at the
// batch + 1, Eq. 1 splits every tensor exactly into what grows with the
// sub-batch and what does not (otherwise a tensor scales when its
// leading dimension is the batch). m's op order is left as it was.
func selectPlain(m, other *ir.Model, opts Options) (*SubBatching, error) {
	p := opts.Profile
	if p == nil {
		var err error
		if p, err = profile.Lookup("titan-rtx"); err != nil {
			return nil, err
		}
	}
	budget := opts.Budget
	if budget <= 0 {
		budget = p.Budget()
	}
	g := m.Graph
	// The plain step unplanned, as built (what the planner's report
	// calls the base step of a plan that is not sub-batched).
	plain, err := memory.Analyze(g, memory.Options{})
	if err != nil {
		return nil, err
	}
	basePeak, baseTime := plain.Peak, passes.Simulate(g, plain, p).StepTime
	was := slices.Clone(g.Order())
	order, err := passes.DFSOrder(g)
	if err != nil {
		return nil, err
	}
	if err := g.SetOrder(order); err != nil {
		return nil, err
	}
	mem, err := memory.Analyze(g, memory.Options{})
	var res SubBatching
	if err == nil {
		var og *ir.Graph
		if other != nil {
			og = other.Graph
		}
		res = selectSubBatch(g, mem, og, p, budget)
		res.BasePeak, res.BaseTime = basePeak, baseTime
	}
	if err2 := g.SetOrder(was); err == nil {
		err = err2
	}
	if err != nil {
		return nil, err
	}
	return &res, nil
}

// SubBatchedStep returns the training step sub-batching plans for a
// plain step at its batch: the step itself when Eq. 3's sub-batch is the
// whole batch (or when not even a sub-batch of 1 fits: planning then
// fails with the policy's reason), else the step rebuilt by
// compiler.AccumulateSubBatches as sub-batches of Eq. 3's size, the
// last one smaller when that size does not divide the batch. Eq. 1–3 are
// computed exactly (with the step built at the batch + 1).
// The plain step is left as it was.
func SubBatchedStep(step *ir.Model, mb SubBatchBuild, opts Options) (*ir.Model, *SubBatching, error) {
	res, err := selectExact(step, mb, opts)
	if err != nil {
		return nil, nil, err
	}
	if res.SubBatch <= 0 || res.SubBatch >= res.Batch {
		return step, res, nil
	}
	m, err := subBatched(res, mb, res.SubBatch, nil)
	if err != nil {
		return nil, res, err
	}
	return m, res, nil
}

// PlanSubBatched plans a plain training step with pol and sub-batching,
// as tsplitc and tsplitc bench run modnn: the step SubBatchedStep
// builds, planned with Plan. Eq. 3 counts what each task reads and
// writes; moDNN's Alg. 1 here cannot offload everything else (not what
// the previous task read: its swap-out overlaps the next task; not what
// was not used since it was made), so a plan at Eq. 3's sub-batch can
// still not fit. Then, unlike the paper, the whole batch is tried (Alg.
// 1's offloading alone may fit it: sub-batching is then never worse than
// the policy without it), then the sub-batch is halved and the step
// rebuilt and planned again, at most SubBatchHalvings times: a smaller
// sub-batch frees what grows with it, not the whole batch's inputs, the
// weights or the gradient sums, so halving further rarely helps, and
// each try plans a larger unrolled step. A step whose Eq. 3 sub-batch is
// the whole batch is planned whole first. Result.SubBatching.SubBatches
// are the sub-batches of the plan that fit. It returns the last plan
// made (its Model is that step; nil when the step could not be built)
// with the last error; a nil Result when Eq. 1–3 could not be computed.
func PlanSubBatched(ctx context.Context, step *ir.Model, mb SubBatchBuild, pol Policy, opts Options) (*Result, error) {
	if pol == nil {
		pol = Tsplit
	}
	if err := CheckParams(pol, opts.Params); err != nil {
		return nil, err
	}
	res, err := selectExact(step, mb, opts)
	if err != nil {
		return nil, err
	}
	out := &Result{SubBatching: res}
	plan := func(m *ir.Model) error {
		r, err := Plan(ctx, m, pol, opts)
		if r != nil {
			r.SubBatching = res
			out = r
		}
		return err
	}
	b := res.SubBatch
	var last error
	if b <= 0 || b >= res.Batch {
		if last = plan(step); last == nil || b <= 0 || res.Batch == 1 {
			return out, last
		}
		b = res.Batch / 2
	}
	for halved := 0; ; halved++ {
		m, err := subBatched(res, mb, b, last)
		if err != nil {
			return out, err
		}
		if last = plan(m); last == nil || b == 1 || halved == SubBatchHalvings {
			return out, last
		}
		if halved == 0 && b == res.SubBatch {
			// Eq. 3's sub-batch did not plan: the whole batch may.
			failed := out
			if err := plan(step); err == nil {
				res.SubBatches = nil
				return out, nil
			}
			out = failed
		}
		b /= 2
	}
}

// SubBatchHalvings bounds how many times PlanSubBatched halves Eq. 3's
// sub-batch when its plan does not fit.
const SubBatchHalvings = 2

// selectExact is selectPlain with the step built at the batch + 1.
func selectExact(step *ir.Model, mb SubBatchBuild, opts Options) (*SubBatching, error) {
	if sb, err := compiler.ReadSubBatching(step); err != nil || sb != nil {
		if err == nil {
			err = fmt.Errorf("modnn: the step already runs as %d sub-batches", len(sb.Sizes))
		}
		return nil, err
	}
	batch := modnnBatch(step.Graph)
	other, err := mb.Forward(batch + 1)
	if err == nil {
		_, err = compiler.BuildTrainingStep(other, mb.Train)
	}
	if err != nil {
		return nil, fmt.Errorf("modnn: the step at batch %d, for Eq. 1: %w", batch+1, err)
	}
	res, err := selectPlain(step, other, opts)
	if res != nil {
		res.ops = len(step.Graph.Order())
	}
	return res, err
}

// subBatched builds the step of res.Batch as sub-batches of b and
// records them in res. after is why a larger sub-batch did not plan.
func subBatched(res *SubBatching, mb SubBatchBuild, b int64, after error) (*ir.Model, error) {
	sizes, err := compiler.SubBatchesOf(res.Batch, b)
	if err != nil {
		return nil, err
	}
	lim := &SubBatchLimitError{Batch: res.Batch, SubBatch: res.SubBatch, Tried: b, SubBatches: len(sizes), Max: mb.MaxSubBatches, After: after}
	if mb.MaxSubBatches > 0 && len(sizes) > mb.MaxSubBatches {
		return nil, lim
	}
	if n := len(sizes) * res.ops; mb.MaxOps > 0 && n > mb.MaxOps {
		lim.MaxOps, lim.Ops = mb.MaxOps, n
		return nil, lim
	}
	m, _, err := compiler.AccumulateSubBatches(mb.Forward, sizes, mb.Train)
	if err != nil {
		return nil, fmt.Errorf("modnn: sub-batches of %d: %w", b, err)
	}
	res.SubBatches = sizes
	return m, nil
}
