package measure

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"

	"github.com/tsplit/tsplit/profile"
)

// BuildOptions say what a measured profile is called and what it
// inherits.
type BuildOptions struct {
	// Name of the profile ("": "cpu").
	Name string
	// Base gives what the run does not measure: the memory capacity,
	// what the framework reserves of it and the host memory swaps may
	// use (nil: Emulate's, else titan-rtx's).
	Base *profile.Profile
	// Emulate, when set, is the GPU profile whose host link the CPU
	// device's copy streams emulate, scaled to the measured step
	// (Emulation; the measurements need PaceOverheadS).
	Emulate *profile.Profile
	// Link, when set instead, is an emulated link the steps ran on
	// already: the profile keeps its bandwidths and latency and takes
	// the overhead measured now. A benchmark re-measures the profile
	// over its whole run this way, the link its plans were paced to
	// unchanged.
	Link *profile.Emulation
}

// Fitting thresholds: an op counts as compute-bound for the throughput
// fit at this many FLOPs per byte moved or more, and as memory-bound for
// the bandwidth fit below lowIntensity with at least minStreamBytes
// moved (smaller ones are all per-op cost).
const (
	highIntensity  = 4.0
	lowIntensity   = 0.5
	minStreamBytes = 256 << 10
)

// Build turns measurements into a device profile: every measured op
// time by key, the runtime's per-op cost as the launch, the copy
// bandwidths, a roofline fitted to the measured ops for the ops the run
// did not see, and per op type the ratio of measured to fitted time.
// The same measurements give the same profile.
func Build(meas *Measurements, o BuildOptions) (*profile.Profile, error) {
	base := o.Base
	if base == nil {
		base = o.Emulate
	}
	if base == nil {
		var err error
		if base, err = profile.Lookup("titan-rtx"); err != nil {
			return nil, err
		}
	}
	if len(meas.Samples) == 0 {
		return nil, fmt.Errorf("measure: the run timed no op")
	}
	if !(meas.H2D > 0 && meas.D2H > 0) {
		return nil, fmt.Errorf("measure: no copy bandwidth measured")
	}
	name := o.Name
	if name == "" {
		name = "cpu"
		if o.Emulate != nil || o.Link != nil {
			name = "cpu-emulated"
		}
	}
	p := &profile.Profile{
		Name: name, Memory: base.Memory, Reserved: base.Reserved, HostMemory: base.HostMemory,
		H2D: meas.H2D, D2H: meas.D2H,
		// Host ops rearrange pieces in host memory: a copy, whose bytes
		// OpWork counts read and written.
		HostBW:     meas.H2D + meas.D2H,
		Efficiency: 1,
		Launch:     meas.GapS,
		// A goroutine waiting for another stream's event waits for a
		// core as a paced copy's does after its sleep.
		WakeLatency: meas.PaceOverheadS,
		// The CPU device has one convolution kernel; its scratch is what
		// the kernel asks for, which the memory model counts.
		ConvAlgos: []profile.ConvAlgo{{Name: "implicit_gemm", Speed: 1}},
		OpTimes:   map[string]float64{},
		TypeScale: map[string]float64{},
		Measured: &profile.Measured{Model: meas.Model, Dims: maps.Clone(meas.Dims), Runs: meas.Runs, Warmup: meas.Warmup,
			Device: meas.Device, StepS: meas.StepS, ComputeS: meas.ComputeS, TailScale: meas.TailScale, CopyBytesPerS: (meas.H2D + meas.D2H) / 2},
	}
	if p.Measured.Dims == nil {
		p.Measured.Dims = map[string]int64{}
	}
	for _, s := range meas.Samples {
		p.OpTimes[s.Key] = s.Time
	}
	p.FLOPS, p.HalfWork = fitCompute(meas.Samples)
	p.MemBW = fitMemory(meas.Samples, meas.H2D+meas.D2H)
	// The roofline as fitted, against every measured op of a type.
	fitted := *p
	fitted.OpTimes, fitted.TypeScale = nil, nil
	ratios := map[string][]float64{}
	for _, s := range meas.Samples {
		if s.Work.View {
			continue // the roofline says a launch: nothing to scale
		}
		est := fitted.WorkTime(s.Work) - fitted.Launch
		if est > 0 && s.Time > 0 {
			ratios[s.Type] = append(ratios[s.Type], s.Time/est)
		}
	}
	for _, t := range slices.Sorted(maps.Keys(ratios)) {
		p.TypeScale[t] = Median(ratios[t])
	}
	switch {
	case o.Emulate != nil:
		emulate(p, o.Emulate, meas)
	case o.Link != nil:
		e := *o.Link
		e.Overhead = meas.PaceOverheadS
		p.H2D, p.D2H, p.Emulation = e.H2D, e.D2H, &e
	}
	round(p)
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("measure: the profile built does not validate: %v", err)
	}
	return p, nil
}

// emulate sets p's link to target's, scaled by how much slower than
// target's roofline the measured step is: the step's time on target
// (its roofline, op by op) over its measured time (p's, op by op: the
// median step). A copy then takes the same share of a step on the CPU
// device as on target. Bandwidths are multiplied by the ratio and the
// latency divided by it; the profile's latency adds how late a paced
// copy was measured to end.
func emulate(p, target *profile.Profile, meas *Measurements) {
	var onTarget, measured float64
	for _, s := range meas.Samples {
		perStep := float64(s.N) / float64(max(meas.Runs, 1))
		onTarget += perStep * target.WorkTime(s.Work)
		measured += perStep * (p.Launch + s.Time)
	}
	ratio := onTarget / measured
	e := &profile.Emulation{Of: target.Name, Ratio: ratio, H2D: target.H2D * ratio, D2H: target.D2H * ratio,
		Latency: target.LinkLatency / ratio, Overhead: meas.PaceOverheadS}
	p.H2D, p.D2H, p.LinkLatency = e.H2D, e.D2H, e.Latency+e.Overhead
	p.Emulation = e
}

// digits is the precision a measured profile keeps: run-to-run noise
// is larger than the fourth digit, and short numbers keep the file
// readable.
const digits = 4

// round rounds every measured or fitted number of p to digits
// significant digits.
func round(p *profile.Profile) {
	for _, x := range []*float64{&p.H2D, &p.D2H, &p.HostBW, &p.FLOPS, &p.MemBW, &p.Launch, &p.HalfWork, &p.LinkLatency, &p.WakeLatency,
		&p.Measured.StepS, &p.Measured.ComputeS, &p.Measured.TailScale, &p.Measured.CopyBytesPerS} {
		*x = roundSig(*x)
	}
	if e := p.Emulation; e != nil {
		for _, x := range []*float64{&e.Ratio, &e.H2D, &e.D2H, &e.Latency, &e.Overhead} {
			*x = roundSig(*x)
		}
		// The latency as rounded, plus the overhead as rounded.
		p.LinkLatency = e.Latency + e.Overhead
	}
	for k, t := range p.OpTimes {
		p.OpTimes[k] = roundSig(t)
	}
	for k, s := range p.TypeScale {
		p.TypeScale[k] = roundSig(s)
	}
}

func roundSig(x float64) float64 {
	if x == 0 || math.IsInf(x, 0) || math.IsNaN(x) {
		return x
	}
	r, _ := strconv.ParseFloat(strconv.FormatFloat(x, 'g', digits, 64), 64)
	return r
}

// fitCompute fits the compute side of the roofline to the
// compute-bound ops: with efficiency 1, a kernel of w FLOPs takes
// (w + HalfWork) / FLOPS, a line in w whose slope and intercept a least
// squares fit on relative error gives. Too few such ops: the measured
// rate over all of them, and no small-kernel drop.
func fitCompute(samples []Sample) (flops, halfWork float64) {
	var xs, ys []float64
	var sumF, sumT float64
	for _, s := range samples {
		if s.Work.View || s.Work.FLOPs <= 0 || s.Time <= 0 || s.Work.FLOPs < highIntensity*s.Work.Bytes {
			continue
		}
		xs, ys = append(xs, s.Work.FLOPs), append(ys, s.Time)
		sumF += s.Work.FLOPs
		sumT += s.Time
	}
	if len(xs) == 0 {
		// No compute-bound op: a CPU core's order of magnitude, which
		// the type scales correct for the ops measured.
		return 1e10, 0
	}
	slope, icept, ok := relativeLine(xs, ys)
	if !ok || slope <= 0 {
		return sumF / sumT, 0
	}
	return 1 / slope, max(icept, 0) / slope
}

// fitMemory is the bandwidth memory-bound ops reach: the median of
// their bytes over time, or fallback when the run had none.
func fitMemory(samples []Sample, fallback float64) float64 {
	var bw []float64
	for _, s := range samples {
		if s.Work.View || s.Time <= 0 || s.Work.Bytes < minStreamBytes || s.Work.FLOPs > lowIntensity*s.Work.Bytes {
			continue
		}
		bw = append(bw, s.Work.Bytes/s.Time)
	}
	if len(bw) == 0 {
		return fallback
	}
	return Median(bw)
}

// relativeLine fits y = a + b·x minimizing Σ ((a + b·x − y) / y)²: the
// normal equations of least squares with weights 1/y², so that small
// and large ops count alike.
func relativeLine(xs, ys []float64) (b, a float64, ok bool) {
	var sw, sx, sy, sxx, sxy float64
	for i := range xs {
		w := 1 / (ys[i] * ys[i])
		sw += w
		sx += w * xs[i]
		sy += w * ys[i]
		sxx += w * xs[i] * xs[i]
		sxy += w * xs[i] * ys[i]
	}
	det := sw*sxx - sx*sx
	if len(xs) < 2 || det <= 0 || math.Abs(det) < 1e-12*sw*sxx {
		return 0, 0, false
	}
	b = (sw*sxy - sx*sy) / det
	a = (sy - b*sx) / sw
	return b, a, true
}
