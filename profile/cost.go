package profile

import (
	"github.com/tsplit/tsplit/ir"
)

// Work is an op's arithmetic and memory traffic.
type Work struct {
	FLOPs float64
	Bytes float64 // bytes read and written
	// View marks ops a GPU runtime performs without moving data
	// (Reshape and friends): only a launch.
	View bool
}

func elems(v *ir.Value) float64 {
	if v == nil {
		return 0
	}
	n, _ := v.Shape.NumElements()
	return float64(n)
}

func prod(xs []int64) float64 {
	p := 1.0
	for _, x := range xs {
		p *= float64(x)
	}
	return p
}

// views are ops that only reinterpret a buffer.
var views = map[string]bool{"Reshape": true, "Flatten": true, "Squeeze": true, "Unsqueeze": true, "Identity": true,
	"Shape": true, "Size": true, "Constant": true}

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
	if op.Domain == "" && views[op.Type] {
		w.View = true
		return w
	}
	out := elems(op.Output(0))
	in := elems(op.Input(0))
	switch op.Type {
	case "Conv":
		wt := op.Input(1)
		if wt != nil && len(wt.Shape) >= 2 {
			// 2 · outputs · (C_in / group) · kernel area
			w.FLOPs = 2 * out * float64(wt.Shape[1]) * prod(wt.Shape[2:])
		}
	case "ConvTranspose":
		wt := op.Input(1)
		if wt != nil && len(wt.Shape) >= 2 {
			w.FLOPs = 2 * in * float64(wt.Shape[1]) * prod(wt.Shape[2:])
		}
	case "MatMul":
		a := op.Input(0)
		if a != nil && len(a.Shape) > 0 {
			w.FLOPs = 2 * out * float64(a.Shape[len(a.Shape)-1])
		}
	case "Gemm":
		a := op.Input(0)
		if a != nil && len(a.Shape) == 2 {
			k := a.Shape[1]
			if op.AttrInt("transA", 0) != 0 {
				k = a.Shape[0]
			}
			w.FLOPs = 2 * out * float64(k)
		}
	case "MaxPool", "AveragePool":
		w.FLOPs = out * prod(op.AttrInts("kernel_shape", nil))
	case "BatchNormalization", "LayerNormalization", "InstanceNormalization":
		w.FLOPs = 8 * in
	case "Softmax", "LogSoftmax":
		w.FLOPs = 5 * in
	case "Erf", "Exp", "Log", "Tanh", "Sigmoid", "Gelu", "Pow", "Sqrt":
		w.FLOPs = 4 * out
	default:
		w.FLOPs = max(in, out)
	}
	return w
}

// OpTime estimates an op's time in seconds: a launch plus the larger of
// compute time and memory time, with compute efficiency falling for
// small kernels.
func (p *Profile) OpTime(op *ir.Op) float64 {
	return p.WorkTime(OpWork(op))
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

// TransferTime is the time to copy n bytes between host and device.
func (p *Profile) TransferTime(n int64, toHost bool) float64 {
	bw := p.H2D
	if toHost {
		bw = p.D2H
	}
	return float64(n) / bw
}

// HostTime is the time of a host-placed op moving n bytes.
func (p *Profile) HostTime(n float64) float64 {
	bw := p.HostBW
	if bw <= 0 {
		bw = 10 * GB
	}
	return n / bw
}
