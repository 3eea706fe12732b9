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
	// computes (Measurements.PaceOverheadS), which an emulated link
	// needs.
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
	// PaceOverheadS is the median time a paced copy took beyond its
	// pace while the step ran (Options.Pacing; 0 otherwise).
	PaceOverheadS float64
}

// Run executes the training step m (unplanned) on the CPU device:
// opts.Warmup steps untimed, then opts.Runs timed ones, with the same
// seeded inputs each time, and measures the device's copy bandwidth.
// It stops between ops once ctx is done.
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
	x, dev, err := newExecutor(m)
	if err != nil {
		return nil, err
	}
	inputs, err := compiler.RandomInputs(m, opts.Seed)
	if err != nil {
		return nil, fmt.Errorf("measure: %w", err)
	}
	order := m.Graph.Order()
	times := make(map[string][]float64)
	var steps, computes []float64
	tasks := 0
	for r := range warm + runs {
		res, err := x.RunContext(ctx, inputs)
		if err != nil {
			return nil, fmt.Errorf("measure: %w", err)
		}
		if opts.Progress != nil {
			opts.Progress(r+1, warm+runs)
		}
		if r < warm {
			continue
		}
		st := executor.Summarize(res.Timeline)
		steps = append(steps, st.Step.Seconds())
		computes = append(computes, st.Compute.Busy.Seconds())
		tasks = st.Compute.Tasks
		for i := range res.Timeline {
			rec := &res.Timeline[i]
			if rec.Stream != executor.Compute {
				continue
			}
			k := profile.OpKey(order[i])
			times[k] = append(times[k], (rec.End - rec.Start).Seconds())
		}
	}
	meas := &Measurements{Model: m.Path, Dims: m.Dims, Device: dev.Name(), Runs: runs, Warmup: warm,
		StepS: median(steps), ComputeS: median(computes)}
	if tasks > 1 {
		// What the runtime adds per op, such that the ops' times and
		// gaps add up to the median step.
		meas.GapS = max(meas.StepS-meas.ComputeS, 0) / float64(tasks-1)
	}
	seen := map[string]int{}
	var sumMedians float64
	for _, op := range order {
		if ir.CopyOf(op) != ir.NoCopy {
			continue
		}
		k := profile.OpKey(op)
		if len(times[k]) == 0 {
			continue
		}
		if at, ok := seen[k]; ok {
			sumMedians += meas.Samples[at].Time
			continue
		}
		seen[k] = len(meas.Samples)
		t := median(slices.Clone(times[k]))
		sumMedians += t
		meas.Samples = append(meas.Samples, Sample{Key: k, Type: op.QualifiedType(), Work: profile.OpWork(op), Time: t, N: len(times[k])})
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
	if meas.H2D, meas.D2H, err = CopyBandwidth(ctx, copyProbeBytes, 5); err != nil {
		return nil, err
	}
	if opts.Pacing {
		if meas.PaceOverheadS, err = paceOverhead(ctx, x, inputs); err != nil {
			return nil, err
		}
	}
	return meas, nil
}

// newExecutor places the step on a CPU device of the pool it needs.
func newExecutor(m *ir.Model) (*executor.Executor, *cpu.Device, error) {
	xopts, need, err := executor.PlannedOptions(m)
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
	return float64(n) / max(median(up[1:]), 1e-9), float64(n) / max(median(down[1:]), 1e-9), nil
}

// median of xs (0 for none); xs is reordered.
func median(xs []float64) float64 {
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
