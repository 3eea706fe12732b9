package bench

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/tsplit/tsplit/policy"
	"github.com/tsplit/tsplit/profile"
)

// Config selects what the benchmark measures.
type Config struct {
	// Device is a built-in profile name or a JSON profile file ("":
	// titan-rtx).
	Device string
	// Models are benchmark model names (nil: DefaultModels).
	Models []string
	// Policies are the memory policies to compare (nil: every registered
	// policy, in OrderPolicies order).
	Policies []string
	// Jobs is how many searches run at once (< 1: 1). It changes the
	// wall time only, never the results.
	Jobs int
	// Small is the CI-sized variant: the zoo's small family
	// configurations on the device with every memory size divided by
	// SmallScale.
	Small bool
	// MaxBatch caps the sample-scale searches (0: 65536).
	MaxBatch int64
	// MaxWidth caps the parameter-scale searches (0: as far as the zoo
	// builds, a width multiplier of 1024 over the family's default).
	MaxWidth int64
	// ParamBatch is the batch of the parameter-scale table (0: 16).
	ParamBatch int64
	// Thresholds are the x of "largest batch at no less than x% of the
	// unconstrained throughput" (nil: 60 and 50).
	Thresholds []int
	// ThresholdPolicies are the policies of that table (nil: Policies).
	ThresholdPolicies []string
	// SweepMin is the smallest batch of the throughput sweep (0: 16);
	// SweepSteps the sweep's batches per doubling (0: 4).
	SweepMin   int64
	SweepSteps int
	// Optimizer is the training step's optimizer ("": sgd).
	Optimizer string
	// Tables are the tables to compute and write (nil: all of
	// TableNames). TableParamScale alone is Table V's searches and
	// param_scale.{md,csv}; a subset writes only its own files (the
	// README, the limits table and the sweep's plots need every table).
	Tables []string
	// Offload lets the policies that can keep the training state on
	// the host do so where it does not fit on the device
	// (tsplit.Options.Offload: tsplit and tsplit-nosplit; docs/offload.md).
	// The other policies plan as without it.
	Offload bool
	// MaxSubBatches and MaxSubBatchOps bound the step of modnn with
	// sub-batching (Results.SubBatched), which is unrolled, one copy of
	// the sub-batch step per sub-batch: at most MaxSubBatches
	// sub-batches (0: 64) and MaxSubBatchOps ops (0: 16384), beyond
	// which planning time grows too fast.
	MaxSubBatches, MaxSubBatchOps int
	// Progress receives a progress bar (nil: none).
	Progress io.Writer
	// Command is the command line recorded in the README.
	Command string
}

// Table names (Config.Tables, tsplitc bench --tables).
const (
	// TableSampleScale is Table IV and what follows from its searches:
	// Fig. 14a, the throughput sweep (Fig. 12), modnn sub-batched.
	TableSampleScale = "sample-scale"
	// TableParamScale is Table V.
	TableParamScale = "param-scale"
)

// TableNames are the tables Config.Tables selects from.
var TableNames = []string{TableSampleScale, TableParamScale}

// wants reports whether the benchmark computes table t.
func (c Config) wants(t string) bool { return c.Tables == nil || slices.Contains(c.Tables, t) }

// partial reports whether the benchmark computes only some tables.
func (c Config) partial() bool {
	return slices.ContainsFunc(TableNames, func(t string) bool { return !c.wants(t) })
}

// SmallScale divides every memory size of the device in the CI-sized
// variant: the small zoo models are about a thousand times smaller than
// the full ones too.
const SmallScale = 1024

// Resolve fills in the defaults and checks the names.
func (c Config) Resolve() (Config, error) {
	if c.Device == "" {
		c.Device = "titan-rtx"
	}
	if c.Models == nil {
		c.Models = DefaultModels()
	}
	for _, m := range c.Models {
		if _, err := LookupModel(m); err != nil {
			return c, err
		}
	}
	if c.Policies == nil {
		c.Policies = OrderPolicies(policy.Names())
	}
	for _, p := range c.Policies {
		if _, err := policy.Lookup(p); err != nil {
			return c, fmt.Errorf("bench: %w", err)
		}
	}
	if c.ThresholdPolicies == nil {
		c.ThresholdPolicies = c.Policies
	}
	for _, p := range c.ThresholdPolicies {
		if !slices.Contains(c.Policies, p) {
			return c, fmt.Errorf("bench: threshold policy %q is not among the benchmarked policies", p)
		}
	}
	for _, t := range c.Tables {
		if !slices.Contains(TableNames, t) {
			return c, fmt.Errorf("bench: unknown table %q (tables: %s)", t, strings.Join(TableNames, ", "))
		}
	}
	if c.Tables != nil && len(c.Tables) == 0 {
		return c, fmt.Errorf("bench: no table selected (tables: %s)", strings.Join(TableNames, ", "))
	}
	if c.Jobs < 1 {
		c.Jobs = 1
	}
	if c.MaxBatch <= 0 {
		c.MaxBatch = 65536
	}
	if c.ParamBatch <= 0 {
		c.ParamBatch = 16
	}
	if c.Thresholds == nil {
		c.Thresholds = []int{60, 50}
	}
	for _, x := range c.Thresholds {
		if x <= 0 || x > 100 {
			return c, fmt.Errorf("bench: threshold %d%% is not in (0, 100]", x)
		}
	}
	if c.SweepMin <= 0 {
		c.SweepMin = 16
	}
	if c.SweepSteps <= 0 {
		c.SweepSteps = 4
	}
	if c.Optimizer == "" {
		c.Optimizer = "sgd"
	}
	if c.MaxSubBatches <= 0 {
		c.MaxSubBatches = 64
	}
	if c.MaxSubBatchOps <= 0 {
		c.MaxSubBatchOps = 16384
	}
	return c, nil
}

// DeviceProfile is the profile the benchmark plans for: the named
// device, scaled down by SmallScale in the CI-sized variant.
func (c Config) DeviceProfile() (*profile.Profile, error) {
	p, err := profile.Lookup(c.Device)
	if err != nil {
		return nil, err
	}
	if c.Small {
		p.Name += fmt.Sprintf("/%d", SmallScale)
		p.Memory /= SmallScale
		p.Reserved /= SmallScale
		p.HostMemory /= SmallScale
	}
	return p, nil
}

// widthLimit is the largest k the zoo builds for a model: its widths
// stop at 1024 times the default.
func (c Config) widthLimit() int64 {
	lim := int64(1024)
	if c.Small {
		lim = int64(math.Floor(1024 / 0.125)) // the small configs' width is 1/8
	}
	if c.MaxWidth > 0 {
		lim = min(lim, c.MaxWidth)
	}
	return lim
}

// Results are everything the benchmark measured. Tables are indexed
// [model][policy] in the order of Models and Policies.
type Results struct {
	Config   Config
	Profile  *profile.Profile
	Models   []Model
	Policies []string
	// SampleScale is Table IV: the largest batch each policy plans.
	SampleScale [][]Search
	// ParamScale is Table V: the largest width multiplier k at batch
	// Config.ParamBatch.
	ParamScale [][]Search
	// HostBound is, per model, the largest k whose parameters,
	// gradients and optimizer state fit the host memory (hostBoundOf;
	// nil without Table V).
	HostBound []int64
	// UnderX is Fig. 14a: per threshold (Config.Thresholds), the largest
	// batch each of Config.ThresholdPolicies plans at no less than x% of
	// the unconstrained step's throughput. [threshold][model][policy of
	// ThresholdPolicies].
	UnderX [][][]Search
	// Sweep is Fig. 12: per model, every policy's planned step over a
	// range of batches.
	Sweep []Sweep
	// SubBatched is, per model, the largest batch modnn plans with
	// moDNN's sub-batching (policy.SubBatchedStep): the step then runs as
	// sub-batches with gradient accumulation, which for models with
	// BatchNormalization is not the step the other policies plan
	// (statistics per sub-batch), so it is kept out of the tables that
	// compare policies. Nil when modnn is not among the policies.
	SubBatched []Search
	// Diagnoses follow Violations: each is tsplit planned again, swapping
	// only, at the size another policy reached.
	Diagnoses []*Diagnosis
	// Probes counts planning runs; Elapsed is the wall time (neither is
	// written to the tables, which must not depend on the machine).
	Probes  int
	Elapsed time.Duration
}

// Diagnosis is one place where another policy goes further than tsplit,
// with tsplit's plan there when it may swap but not recompute.
type Diagnosis struct {
	Violation
	SwapOnly *Probe
}

// Sweep is one model's throughput sweep.
type Sweep struct {
	Batches []int64
	// Probes[i][j] is policy j at Batches[i].
	Probes [][]*Probe
	// Unconstrained[i] is the step time with unlimited memory at
	// Batches[i] (seconds).
	Unconstrained []float64
	// SubBatched[i] is modnn with sub-batching at Batches[i] (nil
	// entries when modnn is not among the policies).
	SubBatched []*Probe
}

// sweepBatches are the sweep's batches: SweepSteps evenly spaced
// batches per doubling from SweepMin (16, 24, 32, 48, … for 2 steps)
// up to top, and top itself.
func sweepBatches(from, top int64, steps int) []int64 {
	var out []int64
	if top < from {
		from = 1
	}
	for oct := from; oct <= top; oct *= 2 {
		for j := 0; j < steps; j++ {
			b := oct + oct*int64(j)/int64(steps)
			if b > top {
				break
			}
			if len(out) == 0 || b > out[len(out)-1] {
				out = append(out, b)
			}
		}
	}
	if top >= 1 && (len(out) == 0 || out[len(out)-1] != top) {
		out = append(out, top)
	}
	return out
}

// Run runs the benchmark: the searches of Tables IV, V and Fig. 14a,
// then the throughput sweep of Fig. 12 up to the largest batch any
// policy reached.
func Run(cfg Config) (*Results, error) {
	start := time.Now()
	cfg, err := cfg.Resolve()
	if err != nil {
		return nil, err
	}
	prof, err := cfg.DeviceProfile()
	if err != nil {
		return nil, err
	}
	r := &Results{Config: cfg, Profile: prof, Policies: cfg.Policies}
	for _, name := range cfg.Models {
		m, _ := LookupModel(name)
		r.Models = append(r.Models, m)
	}
	pr := newProber(&cfg, prof)
	nm, np := len(r.Models), len(r.Policies)
	r.SampleScale = grid[Search](nm, np)
	r.ParamScale = grid[Search](nm, np)
	r.UnderX = make([][][]Search, len(cfg.Thresholds))
	for t := range r.UnderX {
		r.UnderX[t] = grid[Search](nm, len(cfg.ThresholdPolicies))
	}

	// Phase 1: the searches. One job per model and policy does the batch
	// search, then the threshold searches, whose probes are mostly the
	// batch search's (so they never wait on another job's probes);
	// another does the width search.
	var jobs []job
	for i, m := range r.Models {
		for j, pol := range r.Policies {
			if !cfg.wants(TableSampleScale) {
				break
			}
			jobs = append(jobs, job{fmt.Sprintf("%s %s batch", m.Name, pol), func() error {
				s, err := maxPassing(cfg.MaxBatch, func(b int64) (*Probe, bool, error) {
					p, err := pr.probe(m, b, 1, pol)
					return p, err == nil && p.OK, err
				})
				if err != nil {
					return err
				}
				r.SampleScale[i][j] = s
				tj := slices.Index(cfg.ThresholdPolicies, pol)
				if tj < 0 {
					return nil
				}
				for t, x := range cfg.Thresholds {
					// Every policy's search probes the same batches (the same
					// limit as the batch search, not this policy's maximum):
					// the step time is not monotone in the batch (a plan is a
					// greedy choice per batch), so a bisection's answer
					// depends on where it probes. With one probe sequence, a
					// policy whose plan qualifies at every batch another's
					// does gets at least the other's answer, and the probes
					// up to the first failure are the batch search's own.
					u := Search{Stop: s.Stop}
					if s.Max > 0 {
						u, err = maxPassing(cfg.MaxBatch, func(b int64) (*Probe, bool, error) {
							p, err := pr.probe(m, b, 1, pol)
							return p, err == nil && p.OK && meets(p, x), err
						})
						if err != nil {
							return err
						}
						if u.Capped {
							u.Capped, u.Stop = s.Capped, s.Stop
						}
					}
					r.UnderX[t][i][tj] = u
				}
				return nil
			}})
		}
		for j, pol := range r.Policies {
			if !cfg.wants(TableParamScale) {
				break
			}
			jobs = append(jobs, job{fmt.Sprintf("%s %s width", m.Name, pol), func() error {
				s, err := maxPassing(cfg.widthLimit(), func(k int64) (*Probe, bool, error) {
					p, err := pr.probe(m, cfg.ParamBatch, k, pol)
					return p, err == nil && p.OK, err
				})
				r.ParamScale[i][j] = s
				return err
			}})
		}
	}
	// modnn with sub-batching: a search of its own (see
	// Results.SubBatched).
	subBatched := slices.Contains(r.Policies, "modnn") && cfg.wants(TableSampleScale)
	if subBatched {
		r.SubBatched = make([]Search, nm)
		for i, m := range r.Models {
			jobs = append(jobs, job{fmt.Sprintf("%s modnn sub-batched batch", m.Name), func() error {
				s, err := maxPassing(cfg.MaxBatch, func(b int64) (*Probe, bool, error) {
					p, err := pr.probeSubBatched(m, b)
					return p, err == nil && p.OK, err
				})
				r.SubBatched[i] = s
				return err
			}})
		}
	}
	if err := runJobs(cfg, "searching", jobs, pr); err != nil {
		return nil, err
	}
	if cfg.wants(TableParamScale) {
		for _, m := range r.Models {
			k, err := hostBoundOf(r, m)
			if err != nil {
				return nil, fmt.Errorf("bench: %s: host bound: %w", m.Name, err)
			}
			r.HostBound = append(r.HostBound, k)
		}
	}

	// Where another policy goes further than tsplit, plan that size again
	// with tsplit restricted to swapping: it tells a planner that runs out
	// of candidates because of its own recomputations from one that
	// cannot fit at all.
	jobs = nil
	if ts := slices.Index(r.Policies, "tsplit"); ts >= 0 {
		for _, v := range r.Violations() {
			i := slices.IndexFunc(r.Models, func(m Model) bool { return m.Name == v.Model })
			d := &Diagnosis{Violation: v}
			r.Diagnoses = append(r.Diagnoses, d)
			m := r.Models[i]
			jobs = append(jobs, job{fmt.Sprintf("%s tsplit swap-only %s %d", m.Name, v.Table, v.Value), func() error {
				batch, width := v.Value, int64(1)
				if v.Table == ParamScaleTable {
					batch, width = cfg.ParamBatch, v.Value
				}
				p, err := pr.probeOpts(m, batch, width, "tsplit", true)
				d.SwapOnly = p
				return err
			}})
		}
	}
	if err := runJobs(cfg, "diagnosing", jobs, pr); err != nil {
		return nil, err
	}

	// Phase 2: the sweep, up to the largest batch any policy reached.
	jobs = nil
	r.Sweep = make([]Sweep, nm)
	for i, m := range r.Models {
		if !cfg.wants(TableSampleScale) {
			break
		}
		var top int64
		for j := range r.Policies {
			top = max(top, r.SampleScale[i][j].Max)
		}
		sw := &r.Sweep[i]
		sw.Batches = sweepBatches(cfg.SweepMin, top, cfg.SweepSteps)
		sw.Probes = grid[*Probe](len(sw.Batches), np)
		sw.Unconstrained = make([]float64, len(sw.Batches))
		sw.SubBatched = make([]*Probe, len(sw.Batches))
		for bi, b := range sw.Batches {
			if subBatched {
				jobs = append(jobs, job{fmt.Sprintf("%s modnn sub-batched batch %d", m.Name, b), func() error {
					p, err := pr.probeSubBatched(m, b)
					sw.SubBatched[bi] = p
					return err
				}})
			}
			for j, pol := range r.Policies {
				jobs = append(jobs, job{fmt.Sprintf("%s %s batch %d", m.Name, pol, b), func() error {
					p, err := pr.probe(m, b, 1, pol)
					sw.Probes[bi][j] = p
					return err
				}})
			}
		}
	}
	if err := runJobs(cfg, "throughput sweep", jobs, pr); err != nil {
		return nil, err
	}
	for i := range r.Sweep {
		sw := &r.Sweep[i]
		for bi := range sw.Batches {
			for _, p := range sw.Probes[bi] {
				if p.BaseTime > 0 {
					sw.Unconstrained[bi] = p.BaseTime
					break
				}
			}
		}
	}
	r.Probes = pr.count()
	r.Elapsed = time.Since(start)
	return r, nil
}

// meets says a plan keeps at least x% of the unconstrained step's
// throughput at its batch.
func meets(p *Probe, x int) bool {
	return p.Time > 0 && p.BaseTime*100 >= float64(x)*p.Time
}

func grid[T any](n, m int) [][]T {
	out := make([][]T, n)
	for i := range out {
		out[i] = make([]T, m)
	}
	return out
}

type job struct {
	name string
	run  func() error
}

// runJobs runs jobs on cfg.Jobs workers and returns the first error in
// job order. The progress bar counts jobs and names the plans made.
func runJobs(cfg Config, what string, jobs []job, pr *prober) error {
	if len(jobs) == 0 {
		return nil
	}
	var bar *progressbar.ProgressBar
	var mu sync.Mutex
	last := "" // the last job finished
	note := func(runs int, done string) {}
	if cfg.Progress != nil {
		bar = progressbar.NewOptions(len(jobs), progressbar.OptionSetWriter(cfg.Progress),
			progressbar.OptionSetDescription(what), progressbar.OptionShowCount(), progressbar.OptionShowElapsedTimeOnFinish(),
			progressbar.OptionSetWidth(30), progressbar.OptionThrottle(200*time.Millisecond),
			progressbar.OptionOnCompletion(func() { fmt.Fprintln(cfg.Progress) }))
		note = func(runs int, done string) {
			mu.Lock()
			defer mu.Unlock()
			if done != "" {
				last = "; done " + done
				bar.Add(1)
			}
			bar.Describe(fmt.Sprintf("%s: %d plans%s", what, runs, last))
		}
		pr.onDone = func(runs int) { note(runs, "") }
		defer func() { pr.onDone = nil }()
	}
	errs := make([]error, len(jobs))
	var next atomic.Int64
	var failed atomic.Bool
	var wg sync.WaitGroup
	for w := 0; w < min(cfg.Jobs, len(jobs)); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				k := int(next.Add(1) - 1)
				if k >= len(jobs) || failed.Load() {
					return
				}
				if err := jobs[k].run(); err != nil {
					errs[k] = fmt.Errorf("bench: %s: %w", jobs[k].name, err)
					failed.Store(true)
				}
				note(pr.count(), jobs[k].name)
			}
		}()
	}
	wg.Wait()
	if bar != nil && !failed.Load() {
		bar.Finish()
	}
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
