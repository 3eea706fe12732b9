package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/tsplit/tsplit"
	"github.com/tsplit/tsplit/compiler"
	"github.com/tsplit/tsplit/ir"
	"github.com/tsplit/tsplit/policy"
	"github.com/tsplit/tsplit/profile"
	"github.com/tsplit/tsplit/zoo"
)

// Probe is one planning run: a model at one batch and width, planned by
// one policy into the device budget with the whole pipeline.
type Probe struct {
	Model  string
	Batch  int64
	Width  int64 // parameter scale k (channels × k, hidden × k)
	Policy string
	// OK says the plan fits the device and the host; Err says why not.
	OK  bool
	Err string
	// SubBatched marks a probe of modnn with moDNN's sub-batching
	// (policy.PlanSubBatched): the step it plans runs SubBatches sub-batches
	// of at most SubBatch samples (1 and the batch: the whole batch at
	// once), where the other probes plan the plain step.
	// SubBatchEq3 is Eq. 3's sub-batch; SubBatch is below it where
	// policy.PlanSubBatched halved it for the plan to fit.
	SubBatched  bool
	SubBatch    int64
	SubBatches  int
	SubBatchEq3 int64
	// From the planner's report (zero where planning failed before
	// filling them). BaseTime is always the plain step's at this batch,
	// sub-batched or not.
	BasePeak, Peak, Pool, HostPeak int64
	BaseTime, Time                 float64 // unconstrained and planned step, seconds
	Swapped, Recomputed, Split     int
}

// Throughput is samples per second of the planned step (0 if not OK).
func (p *Probe) Throughput() float64 {
	if !p.OK || p.Time <= 0 {
		return 0
	}
	return float64(p.Batch) / p.Time
}

// Relative is the planned step's throughput over the unconstrained
// step's at the same batch (BaseTime / Time; 0 if not OK).
func (p *Probe) Relative() float64 {
	if !p.OK || p.Time <= 0 {
		return 0
	}
	return p.BaseTime / p.Time
}

type probeKey struct {
	model        string
	batch, width int64
	policy       string
	swapOnly     bool
	subBatched   bool
}

type probeEntry struct {
	done chan struct{}
	p    *Probe
	err  error
}

// prober runs probes once each: searches and the sweep ask for the same
// points, and a probe is a pure function of its key.
type prober struct {
	cfg  *Config
	prof *profile.Profile
	mu   sync.Mutex
	memo map[probeKey]*probeEntry
	runs int // probes actually planned
	// onDone, when set, is called after each plan (from the planning
	// goroutine); it is set between phases only.
	onDone func(runs int)
}

func newProber(cfg *Config, prof *profile.Profile) *prober {
	return &prober{cfg: cfg, prof: prof, memo: map[probeKey]*probeEntry{}}
}

func (pr *prober) count() int {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	return pr.runs
}

// probe plans model m at (batch, width) with policy, or returns the
// result of the same probe made before. The error is for failures that
// are not about fitting (the model or its training step cannot be
// built): those end the benchmark.
func (pr *prober) probe(m Model, batch, width int64, policy string) (*Probe, error) {
	return pr.probeOpts(m, batch, width, policy, false)
}

// probeOpts is probe with tsplit's planner restricted to swapping
// (policy.Options.NoRecompute) when swapOnly is set.
func (pr *prober) probeOpts(m Model, batch, width int64, policy string, swapOnly bool) (*Probe, error) {
	return pr.probeAt(probeKey{m.Name, batch, width, policy, swapOnly, false}, m)
}

// probeSubBatched plans model m at batch (width 1) with the modnn
// policy and moDNN's sub-batching.
func (pr *prober) probeSubBatched(m Model, batch int64) (*Probe, error) {
	return pr.probeAt(probeKey{m.Name, batch, 1, "modnn", false, true}, m)
}

func (pr *prober) probeAt(k probeKey, m Model) (*Probe, error) {
	pr.mu.Lock()
	e, ok := pr.memo[k]
	if !ok {
		e = &probeEntry{done: make(chan struct{})}
		pr.memo[k] = e
		pr.runs++
	}
	pr.mu.Unlock()
	if ok {
		<-e.done
		return e.p, e.err
	}
	e.p, e.err = pr.plan(m, k)
	close(e.done)
	if pr.onDone != nil {
		pr.onDone(pr.count())
	}
	return e.p, e.err
}

// Build returns the training step of benchmark model m at a batch and
// parameter scale k, with its weights as graph inputs (no weight data
// is generated), in the benchmark's configuration (cfg.Small: the zoo's
// CI-sized family configuration).
func Build(m Model, batch, width int64, small bool, optimizer string) (*ir.Model, *compiler.TrainingInfo, error) {
	g, err := BuildForward(m, width, small)(batch)
	if err != nil {
		return nil, nil, err
	}
	ti, err := tsplit.Train(context.Background(), g, compiler.TrainOptions{Optimizer: optimizer})
	if err != nil {
		return nil, nil, fmt.Errorf("%s at batch %d, width ×%d: training step: %w", m.Name, batch, width, err)
	}
	return g, ti, nil
}

// BuildForward returns the builder of benchmark model m's forward graph
// at parameter scale k, with its weights as graph inputs, as Build uses
// it (and moDNN's sub-batching, to rebuild a step as sub-batches).
func BuildForward(m Model, width int64, small bool) compiler.ForwardBuilder {
	return func(batch int64) (*ir.Model, error) {
		zc := zoo.Config{}
		if small {
			zc = zoo.SmallConfig(m.Zoo)
		}
		if zc.Width == 0 {
			zc.Width = 1
		}
		zc.Width *= float64(width)
		zc.Batch = batch
		zc.WeightsAsInputs = true
		mp, err := zoo.Build(m.Zoo, zc)
		if err != nil {
			return nil, err
		}
		g, err := compiler.FromProto(mp, "", compiler.Options{Batch: batch})
		if err != nil {
			return nil, fmt.Errorf("%s at batch %d, width ×%d: %w", m.Name, batch, width, err)
		}
		return g, nil
	}
}

// Plan plans a training step into the profile's budget with a policy
// (tsplit.Plan). A policy that panics is reported as a planning error
// (*tsplit.PanicError), like one that fails.
func Plan(g *ir.Model, prof *profile.Profile, policy string) (*tsplit.Result, error) {
	return tsplit.Plan(context.Background(), g, tsplit.Options{Profile: prof, Policy: policy})
}

func (pr *prober) plan(m Model, k probeKey) (*Probe, error) {
	batch, width, pol := k.batch, k.width, k.policy
	p := &Probe{Model: m.Name, Batch: batch, Width: width, Policy: pol, SubBatched: k.subBatched}
	g, _, err := Build(m, batch, width, pr.cfg.Small, pr.cfg.Optimizer)
	if err != nil {
		return nil, err
	}
	opts := tsplit.Options{Budget: pr.prof.Budget(), Profile: pr.prof, Policy: pol, NoRecompute: k.swapOnly, Offload: pr.cfg.Offload}
	if k.subBatched {
		// Given the forward builder, modnn rebuilds the step as
		// sub-batches (moDNN's sub-batching).
		opts.Forward, opts.Train = BuildForward(m, width, pr.cfg.Small), compiler.TrainOptions{Optimizer: pr.cfg.Optimizer}
		opts.MaxSubBatches, opts.MaxSubBatchOps = pr.cfg.MaxSubBatches, pr.cfg.MaxSubBatchOps
	}
	res, err := tsplit.Plan(context.Background(), g, opts)
	var pe *tsplit.PanicError
	if k.subBatched && (res == nil || res.SubBatching == nil) && !errors.As(err, &pe) {
		// Eq. 1–3 could not be computed: the model, not the budget.
		return nil, fmt.Errorf("%s at batch %d: %w", m.Name, batch, err)
	}
	if res != nil && res.Report != nil {
		p.BasePeak, p.Peak, p.Pool, p.HostPeak = res.BasePeak, res.Peak, res.Pool, res.HostPeak
		p.BaseTime, p.Time = res.BaseStep, res.Step
		p.Swapped, p.Recomputed, p.Split = res.Swapped, res.Recomputed, res.Split
	}
	if res != nil && res.SubBatching != nil {
		sb := res.SubBatching
		p.BaseTime = sb.BaseStep // the plain step's, not the sub-batched one's
		p.SubBatchEq3, p.SubBatch, p.SubBatches = sb.Eq3, batch, 1
		if len(sb.Sizes) > 0 {
			p.SubBatch, p.SubBatches = sb.Sizes[0], len(sb.Sizes)
		}
		var lim *policy.SubBatchLimitError
		if errors.As(err, &lim) {
			p.SubBatch, p.SubBatches = lim.Tried, lim.SubBatches
		}
	}
	if err != nil {
		p.Err = err.Error()
		return p, nil
	}
	p.OK = true
	return p, nil
}
