package tsplit

import (
	"fmt"

	"github.com/tsplit/tsplit/adapt"
	"github.com/tsplit/tsplit/executor"
	"github.com/tsplit/tsplit/executor/cpu"
	"github.com/tsplit/tsplit/ir"
	"github.com/tsplit/tsplit/memory"
	"github.com/tsplit/tsplit/passes"
)

// AdaptedIter is one iteration of a run with RunOptions.Adapt.
type AdaptedIter struct {
	Iter int `json:"iter"`
	// Step is the measured step (seconds). SwapInStall is the summed
	// time compute ops waited for swap-ins not done yet (adapt.Measure)
	// and Stalled how many swap-ins made one wait; Stall is the compute
	// stream's stall (executor.StreamStats.Stall).
	Step        float64 `json:"step_s"`
	SwapInStall float64 `json:"swap_in_stall_s"`
	Stalled     int     `json:"stalled_swap_ins"`
	Stall       float64 `json:"stall_s"`
	// ModelPeak is the memory model's peak of the order the iteration
	// ran, Peak the device's measured high-water, Pool the static
	// layout's pool and Budget the limit no adaptation passes.
	ModelPeak int64 `json:"model_peak_bytes"`
	Peak      int64 `json:"measured_peak_bytes"`
	Pool      int64 `json:"pool_bytes"`
	Budget    int64 `json:"budget_bytes"`
	// Moved counts the triggers moved after the iteration (for the
	// next), Refused the stalled swap-ins the budget or their swap-out
	// held in place.
	Moved   int `json:"moved"`
	Refused int `json:"refused"`
}

// adapter moves a planned model's swap-in triggers between the
// iterations of a run (RunOptions.Adapt).
type adapter struct {
	m     *ir.Model
	limit int64
	// xopts are the executor's options but the placement (the link, the
	// finite check); pool is the layout's pool of the order running.
	xopts executor.Options
	pool  int64
	// fixed: the run's pool was given, the device is never replaced.
	fixed bool
	iters []AdaptedIter
}

// newAdapter checks that m is a plan (a budget, a static layout) and
// sets the limit: the plan's budget, or the given pool when smaller.
func newAdapter(m *ir.Model, plan *passes.Report, xopts executor.Options, pool int64) (*adapter, error) {
	s, ok := m.Meta[memory.LayoutKey]
	if plan == nil || !ok || plan.Budget <= 0 {
		return nil, usage("Adapt", "moves the swap-in triggers of a plan, and %s is not a planned model (tsplitc plan makes one)", m.Path)
	}
	l, err := memory.DecodeLayout(s)
	if err != nil {
		return nil, inputError(m.Path, err)
	}
	a := &adapter{m: m, limit: plan.Budget, xopts: xopts, pool: l.Pool, fixed: pool > 0}
	if pool > 0 {
		a.limit = min(a.limit, pool)
	}
	return a, nil
}

// after records what iteration r measured and, unless it was the last,
// moves the stalled swap-ins' triggers: the executor (and, when the
// new layout's pool outgrows the device, the device) for the next
// iteration.
func (a *adapter) after(x *executor.Executor, dev *cpu.Device, r *executor.Result, last bool) (*executor.Executor, *cpu.Device, error) {
	stalls := adapt.Measure(r.Timeline)
	sum := executor.Summarize(r.Timeline)
	it := AdaptedIter{Iter: len(a.iters), Step: sum.Step.Seconds(), SwapInStall: adapt.Total(stalls).Seconds(),
		Stall: sum.Compute.Stall.Seconds(), ModelPeak: x.Mem.Peak, Peak: r.HighWater, Pool: a.pool, Budget: a.limit}
	for _, s := range stalls {
		if s.Wait > 0 {
			it.Stalled++
		}
	}
	defer func() { a.iters = append(a.iters, it) }()
	if last {
		return x, dev, nil
	}
	res, err := adapt.Adjust(a.m, r.Timeline, adapt.Options{Limit: a.limit})
	if err != nil {
		return nil, nil, err
	}
	it.Moved, it.Refused = len(res.Moves), res.Refused
	if len(res.Moves) == 0 {
		return x, dev, nil // the same order: the executor keeps its weights in place
	}
	place, err := res.Mem.Placement(res.Layout)
	if err != nil {
		return nil, nil, err
	}
	if res.Layout.Pool > dev.PoolBytes() {
		if a.fixed {
			return nil, nil, fmt.Errorf("adapt: the adapted layout needs %d bytes, the pool is %d", res.Layout.Pool, dev.PoolBytes())
		}
		if err := checkRunMemory(a.m, res.Layout.Pool, res.Mem.HostPeak); err != nil {
			return nil, nil, err
		}
		if dev, err = cpu.New(res.Layout.Pool); err != nil {
			return nil, nil, err
		}
	}
	xopts := a.xopts
	xopts.Placement = place
	nx, err := executor.New(a.m, dev, xopts)
	if err != nil {
		return nil, nil, err
	}
	nx.SetSteps(x.Steps()) // the same Dropout masks as without the move
	a.pool = res.Layout.Pool
	return nx, dev, nil
}

// finish puts what the adapted run ended with into res: the pool, the
// need and the peaks of the last order run, and the plan summary it
// now carries.
func (a *adapter) finish(res *RunResult, x *executor.Executor, dev *cpu.Device) error {
	res.Adapted = a.iters
	res.Pool, res.Need, res.ModelPeak = dev.PoolBytes(), a.pool, x.Mem.Peak
	plan, err := readPlan(a.m)
	if err != nil {
		return err
	}
	if plan != nil {
		res.Plan = planSummary(plan)
	}
	return nil
}
