package measure

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/tsplit/tsplit/compiler"
	"github.com/tsplit/tsplit/executor"
	"github.com/tsplit/tsplit/executor/cpu"
	"github.com/tsplit/tsplit/ir"
	"github.com/tsplit/tsplit/memory"
	"github.com/tsplit/tsplit/profile"
)

// Options configure Run.
type Options struct {
	// Runs is the number of timed steps (0: 5) and Warmup the untimed
	// ones before them (0: 1; negative: none).
	Runs, Warmup int
	// Seed seeds the random input data.
	Seed uint64
	// Pacing also measures how late a paced copy ends while the step
	// computes (Measurements.PaceOverheadS): what an emulated link adds
	// to a copy, and how long a goroutine waiting for another stream
	// waits for a core (the profile's WakeLatency).
	Pacing bool
	// Progress, when set, is told after every step (warm-up included).
	Progress func(done, total int)
}

// Sample is what was measured for one op key.
type Sample struct {
	Key string
	// Type is the op's qualified type and Work its roofline work.
	Type string
	Work profile.Work
	// Time is the median kernel time in seconds over every op of the
	// key in every timed step; N the number of times it was seen.
	Time float64
	N    int
}

// Measurements are what Run measured: the input of Build.
type Measurements struct {
	Model  string
	Dims   map[string]int64
	Device string
	Runs   int
	Warmup int
	// Samples by key, sorted by key.
	Samples []Sample
	// StepS is the median step (first op start to last op end),
	// ComputeS the median sum of kernel times, and GapS the median gap
	// between one compute op's end and the next one's start: what the
	// runtime adds per op.
	StepS, ComputeS, GapS float64
	// TailScale is what every key's median was multiplied by so that
	// the step's ops sum to ComputeS (Run).
	TailScale float64
	// CopyBytesPerS is the device's measured host↔device copy
	// bandwidth, each way.
	H2D, D2H float64
	// PaceOverheadS is the mean time a paced copy took beyond its pace
	// while the step ran, the longest 2 % left out (Options.Pacing; 0
	// otherwise).
	PaceOverheadS float64
}

// Run executes the training step m (unplanned) on the CPU device:
// opts.Warmup steps untimed, then opts.Runs timed ones, with the same
// seeded inputs each time, and measures the device's copy bandwidth
// (and, with opts.Pacing, a paced copy's overhead during a few more
// steps). It stops between ops once ctx is done.
func Run(ctx context.Context, m *ir.Model, opts Options) (*Measurements, error) {
	runs, warm := opts.Runs, opts.Warmup
	if runs == 0 {
		runs = 5
	}
	if warm == 0 {
		warm = 1
	}
	warm = max(warm, 0)
	if runs < 0 {
		return nil, fmt.Errorf("measure: %d runs", runs)
	}
	x, _, err := newExecutor(m)
	if err != nil {
		return nil, err
	}
	inputs, err := compiler.RandomInputs(m, opts.Seed)
	if err != nil {
		return nil, fmt.Errorf("measure: %w", err)
	}
	rec := NewRecorder(m)
	rec.Warmup = warm
	for r := range warm + runs {
		res, err := x.RunContext(ctx, inputs)
		if err != nil {
			return nil, fmt.Errorf("measure: %w", err)
		}
		if opts.Progress != nil {
			opts.Progress(r+1, warm+runs)
		}
		if r >= warm {
			rec.Add(res.Timeline)
		}
	}
	if opts.Pacing {
		probe, err := StartProbe()
		if err != nil {
			return nil, err
		}
		for step := 0; step < probeSteps && probe.Samples() < probeSamples; step++ {
			if _, err := x.RunContext(ctx, inputs); err != nil {
				probe.Stop()
				return nil, fmt.Errorf("measure: %w", err)
			}
		}
		rec.AddOverheads(probe.Stop())
	}
	if rec.H2D, rec.D2H, err = CopyBandwidth(ctx, copyProbeBytes, 5); err != nil {
		return nil, err
	}
	return rec.Measurements(), nil
}

// Recorder gathers the timed steps of one training step into
// Measurements: the runs of Run, or those a benchmark makes of the
// unplanned step between the runs of its plans.
type Recorder struct {
	model *ir.Model
	keys  []string // by position of the step's order ("" for copies)
	times map[string][]float64
	steps []float64
	comps []float64
	tasks int
	over  []float64
	// Warmup is the number of untimed steps before the recorded ones
	// (for the record); H2D and D2H the device's copy bandwidths.
	Warmup   int
	H2D, D2H float64
}

// NewRecorder records timed steps of m.
func NewRecorder(m *ir.Model) *Recorder {
	r := &Recorder{model: m, times: map[string][]float64{}}
	for _, op := range m.Graph.Order() {
		k := ""
		if ir.CopyOf(op) == ir.NoCopy {
			k = profile.OpKey(op)
		}
		r.keys = append(r.keys, k)
	}
	return r
}

// Add records one timed step's timeline.
func (r *Recorder) Add(tl []executor.Record) {
	st := executor.Summarize(tl)
	r.steps = append(r.steps, st.Step.Seconds())
	r.comps = append(r.comps, st.Compute.Busy.Seconds())
	r.tasks = st.Compute.Tasks
	for i := range tl {
		rec := &tl[i]
		if rec.Stream != executor.Compute || i >= len(r.keys) || r.keys[i] == "" {
			continue
		}
		r.times[r.keys[i]] = append(r.times[r.keys[i]], (rec.End - rec.Start).Seconds())
	}
}

// AddOverheads records how late paced copies ended (Probe.Stop).
func (r *Recorder) AddOverheads(over []float64) { r.over = append(r.over, over...) }

// Runs is the number of steps recorded.
func (r *Recorder) Runs() int { return len(r.steps) }

// Measurements are what the recorded steps measured: per key the
// median kernel time, spread so that the step's ops sum to the median
// step's kernel time, the per-op gap, the copy bandwidths and the
// mean pacing overhead (without the longest 2 %).
func (r *Recorder) Measurements() *Measurements {
	m := r.model
	meas := &Measurements{Model: m.Path, Dims: m.Dims, Device: (&cpu.Device{}).Name(), Runs: len(r.steps), Warmup: r.Warmup,
		StepS: Median(slices.Clone(r.steps)), ComputeS: Median(slices.Clone(r.comps)), H2D: r.H2D, D2H: r.D2H,
		PaceOverheadS: trimmedMean(r.over, paceTrim)}
	if r.tasks > 1 {
		// What the runtime adds per op, such that the ops' times and
		// gaps add up to the median step.
		meas.GapS = max(meas.StepS-meas.ComputeS, 0) / float64(r.tasks-1)
	}
	seen := map[string]int{}
	var sumMedians float64
	for i, op := range m.Graph.Order() {
		k := r.keys[i]
		if k == "" || len(r.times[k]) == 0 {
			continue
		}
		if at, ok := seen[k]; ok {
			sumMedians += meas.Samples[at].Time
			continue
		}
		seen[k] = len(meas.Samples)
		t := Median(slices.Clone(r.times[k]))
		sumMedians += t
		meas.Samples = append(meas.Samples, Sample{Key: k, Type: op.QualifiedType(), Work: profile.OpWork(op), Time: t, N: len(r.times[k])})
	}
	// A key's median leaves out the slow outliers (a preemption, a
	// garbage collection) that every step has somewhere, so the medians
	// sum to less than a step's kernels take: spread the difference
	// over every op, so that the step priced op by op takes what the
	// median step took.
	meas.TailScale = 1
	if sumMedians > 0 && meas.ComputeS > 0 {
		meas.TailScale = meas.ComputeS / sumMedians
		for i := range meas.Samples {
			meas.Samples[i].Time *= meas.TailScale
		}
	}
	slices.SortFunc(meas.Samples, func(a, b Sample) int { return cmpString(a.Key, b.Key) })
	return meas
}

// StaticOptions are the executor options that run m in a static
// layout, as a plan runs: the planned model's own, or for a step that
// was not planned one made now (memory.Model.MakeLayout), and the pool
// it needs. A step is measured this way so that its ops are timed with
// the runtime's cost per op of a planned step: placing a tensor at a
// fixed offset costs the issuing thread less than the best-fit
// allocator does, which shows on a step of many small ops.
func StaticOptions(m *ir.Model) (executor.Options, int64, error) {
	if _, ok := m.Meta[memory.LayoutKey]; ok {
		return executor.PlannedOptions(m)
	}
	mem, err := memory.Analyze(m.Graph, memory.Options{})
	if err != nil {
		return executor.Options{}, 0, err
	}
	l := mem.MakeLayout()
	place, err := mem.Placement(l)
	if err != nil {
		return executor.Options{}, 0, err
	}
	return executor.Options{Placement: place}, l.Pool, nil
}

// newExecutor places the step on a CPU device of the pool it needs, in
// a static layout.
func newExecutor(m *ir.Model) (*executor.Executor, *cpu.Device, error) {
	xopts, need, err := StaticOptions(m)
	if err != nil {
		return nil, nil, fmt.Errorf("measure: %w", err)
	}
	dev, err := cpu.New(need)
	if err != nil {
		return nil, nil, fmt.Errorf("measure: %w", err)
	}
	x, err := executor.New(m, dev, xopts)
	if err != nil {
		return nil, nil, fmt.Errorf("measure: %w", err)
	}
	return x, dev, nil
}

// copyProbeBytes is the size of the copies that measure the device's
// bandwidth: large enough that a copy's fixed cost does not count.
const copyProbeBytes = 16 << 20

// CopyBandwidth measures the CPU device's unpaced copies of n bytes
// each way, the median of reps copies: bytes per second, host to
// device and device to host.
func CopyBandwidth(ctx context.Context, n int64, reps int) (h2d, d2h float64, err error) {
	dev, err := cpu.New(n)
	if err != nil {
		return 0, 0, fmt.Errorf("measure: %w", err)
	}
	host := make([]byte, n)
	for i := range host {
		host[i] = byte(i)
	}
	ref := executor.Ref{DType: ir.Uint8, Shape: ir.Shape{n}, Bytes: n}
	var up, down []float64
	for range reps + 1 { // the first copy of each way touches the pages
		if err := ctx.Err(); err != nil {
			return 0, 0, err
		}
		t := time.Now()
		if err := dev.ToDevice(ref, host); err != nil {
			return 0, 0, err
		}
		up = append(up, time.Since(t).Seconds())
		t = time.Now()
		if err := dev.ToHost(host, ref); err != nil {
			return 0, 0, err
		}
		down = append(down, time.Since(t).Seconds())
	}
	return float64(n) / max(Median(up[1:]), 1e-9), float64(n) / max(Median(down[1:]), 1e-9), nil
}

// paceTrim is the share of the longest pacing overheads left out of
// their mean: the rare preemptions of tens of milliseconds, which one
// probe may or may not meet, and which would otherwise decide the mean
// of a few hundred samples.
const paceTrim = 0.02

// trimmedMean is the mean of xs without the largest share of them (0
// for none).
func trimmedMean(xs []float64, share float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	s = s[:len(s)-int(share*float64(len(s)))]
	var sum float64
	for _, x := range s {
		sum += x
	}
	return sum / float64(max(len(s), 1))
}

// Median of xs (0 for none); xs is reordered. bench's gap summaries
// use it too.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	slices.Sort(xs)
	n := len(xs)
	if n%2 == 1 {
		return xs[n/2]
	}
	return (xs[n/2-1] + xs[n/2]) / 2
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
