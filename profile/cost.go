package profile

import (
	"github.com/tsplit/tsplit/ir"
)

// Work is an op's arithmetic and memory traffic.
type Work struct {
	FLOPs float64
	Bytes float64 // bytes read and written
	// View marks ops a GPU runtime performs without moving data
	// (Reshape and friends, Shape): only a launch.
	View bool
}

// Cost is an op's entry in the op registry's cost slot.
//
// Bytes are not part of it: every op reads each input and writes each
// output once (OpWork). Nor is the workspace: an op's scratch is what
// the kernel of the device that runs it asks for (kernels.Kernel's
// Workspace, in the device's kernel slot), which the memory model
// counts; keeping it there leaves one source when a device with other
// kernels (CUDA) declares its own.
type Cost struct {
	// FLOPs estimates the op's arithmetic from its values and
	// attributes.
	FLOPs func(op *ir.Op) float64
	// Launch marks ops that move no data on a device: views and ops a
	// runtime computes from shapes or attributes alone. They cost a
	// kernel launch.
	Launch bool
}

// costs is the cost slot. Entries are registered per op in costs.go;
// views (ir.Schema.View) and elementwise ops share the slot's declared
// default.
var costs = ir.NewSlot[Cost]("cost")

// OpWork estimates FLOPs and bytes of one op.
func OpWork(op *ir.Op) Work {
	var w Work
	for _, v := range op.Inputs() {
		if v != nil {
			w.Bytes += float64(v.Bytes())
		}
	}
	for _, v := range op.Outputs() {
		if v != nil {
			w.Bytes += float64(v.Bytes())
		}
	}
	c, ok := costs.Of(op)
	switch {
	case !ok:
		// An op outside the registry (never in a verified graph): one
		// operation per element.
		w.FLOPs = perElement(op)
	case c.Launch:
		w.View = true
	default:
		w.FLOPs = c.FLOPs(op)
	}
	return w
}

// OpTime is an op's time in seconds: a launch plus its kernel's time.
// The kernel's time is measured when the profile has a time for the
// op's key (OpTimes, OpKey); otherwise it is the roofline's estimate —
// the larger of compute time and memory time, with compute efficiency
// falling for small kernels — times the measured correction of its op
// type when the profile has one (TypeScale). A built-in profile has
// neither: the roofline alone.
func (p *Profile) OpTime(op *ir.Op) float64 {
	if len(p.OpTimes) > 0 {
		if t, ok := p.OpTimes[OpKey(op)]; ok {
			return p.Launch + t
		}
	}
	t := p.WorkTime(OpWork(op))
	if s, ok := p.TypeScale[op.QualifiedType()]; ok {
		t = p.Launch + s*(t-p.Launch)
	}
	return t
}

// WorkTime is OpTime for a given amount of work.
func (p *Profile) WorkTime(w Work) float64 {
	if w.View {
		return p.Launch
	}
	eff := p.Efficiency
	if p.HalfWork > 0 {
		eff *= w.FLOPs / (w.FLOPs + p.HalfWork)
	}
	compute := 0.0
	if w.FLOPs > 0 {
		compute = w.FLOPs / (p.FLOPS * max(eff, 1e-6))
	}
	memory := w.Bytes / p.MemBW
	return p.Launch + max(compute, memory)
}

// TransferTime is the time to copy n bytes between host and device:
// the link's latency plus the bytes over its bandwidth (0 for no bytes:
// no copy).
func (p *Profile) TransferTime(n int64, toHost bool) float64 {
	if n <= 0 {
		return 0
	}
	bw := p.H2D
	if toHost {
		bw = p.D2H
	}
	return p.LinkLatency + float64(n)/bw
}

// HostTime is the time of a host-placed op moving n bytes.
func (p *Profile) HostTime(n float64) float64 {
	bw := p.HostBW
	if bw <= 0 {
		bw = 10 * GB
	}
	return n / bw
}

// HostWorkTime is the time of a host-placed op doing w: the larger of
// its memory time (HostTime) and its compute time at HostFLOPS. The
// ops that rearrange swapped pieces (Slice, Concat) compute nothing
// and take their memory time; an optimizer update run by the host is
// bound by whichever is slower.
func (p *Profile) HostWorkTime(w Work) float64 {
	f := p.HostFLOPS
	if f <= 0 {
		f = 50e9
	}
	return max(p.HostTime(w.Bytes), w.FLOPs/f)
}
