package measure

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"testing"

	"github.com/tsplit/tsplit/compiler"
	"github.com/tsplit/tsplit/internal/plantest"
	"github.com/tsplit/tsplit/ir"
	"github.com/tsplit/tsplit/profile"
)

// synthetic are measurements of ops that take exactly what a roofline
// with the given throughput and half-efficiency work says, plus a
// memory-bound op at 5 GB/s.
func synthetic(flops, half float64) *Measurements {
	m := &Measurements{Model: "m.onnx", Dims: map[string]int64{"batch": 2}, Device: "cpu", Runs: 3, Warmup: 1,
		StepS: 1, ComputeS: 0.9, GapS: 1e-5, TailScale: 1, H2D: 1e10, D2H: 1.2e10, PaceOverheadS: 2e-4}
	for i, w := range []float64{1e6, 1e7, 1e8, 1e9} {
		m.Samples = append(m.Samples, Sample{Key: "Conv#" + string(rune('a'+i)), Type: "Conv",
			Work: profile.Work{FLOPs: w, Bytes: w / 100}, Time: (w + half) / flops, N: 3})
	}
	m.Samples = append(m.Samples, Sample{Key: "Relu#a", Type: "Relu", Work: profile.Work{FLOPs: 1e6, Bytes: 8e6}, Time: 8e6 / 5e9, N: 6})
	return m
}

// The roofline fitted to ops that follow one recovers its throughput,
// its half-efficiency work and the memory bandwidth, and the type
// scales are then 1; the same measurements give the same bytes.
func TestBuildFitsRoofline(t *testing.T) {
	meas := synthetic(2e10, 5e6)
	p, err := Build(meas, BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rel(p.FLOPS, 2e10) > 1e-3 || rel(p.HalfWork, 5e6) > 1e-3 || rel(p.MemBW, 5e9) > 1e-3 {
		t.Errorf("fitted %.4g FLOPS, half at %.4g, %.4g B/s; want 2e10, 5e6, 5e9", p.FLOPS, p.HalfWork, p.MemBW)
	}
	for ty, s := range p.TypeScale {
		if rel(s, 1) > 1e-3 {
			t.Errorf("%s scale %v, want 1", ty, s)
		}
	}
	if len(p.OpTimes) != len(meas.Samples) || p.Launch != 1e-5 || p.H2D != 1e10 || p.D2H != 1.2e10 || p.Name != "cpu" {
		t.Errorf("profile %+v", p)
	}
	again, err := Build(synthetic(2e10, 5e6), BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	a, _ := json.Marshal(p)
	b, _ := json.Marshal(again)
	if !bytes.Equal(a, b) {
		t.Errorf("the same measurements built two profiles:\n%s\n%s", a, b)
	}
}

// An emulated link is the GPU's scaled by its roofline's time for the
// measured step over the measured time; its latency adds the measured
// pacing overhead.
func TestBuildEmulates(t *testing.T) {
	titan, err := profile.Lookup("titan-rtx")
	if err != nil {
		t.Fatal(err)
	}
	meas := synthetic(2e10, 5e6)
	p, err := Build(meas, BuildOptions{Emulate: titan})
	if err != nil {
		t.Fatal(err)
	}
	var onTitan, measured float64
	for _, s := range meas.Samples {
		onTitan += 1 * titan.WorkTime(s.Work) * float64(s.N) / 3
		measured += (meas.GapS + s.Time) * float64(s.N) / 3
	}
	e := p.Emulation
	if e == nil || e.Of != "titan-rtx" || rel(e.Ratio, onTitan/measured) > 1e-3 || rel(p.H2D, titan.H2D*e.Ratio) > 1e-3 || rel(p.D2H, titan.D2H*e.Ratio) > 1e-3 {
		t.Fatalf("emulation %+v, H2D %v; want ratio %v", e, p.H2D, onTitan/measured)
	}
	if p.LinkLatency != e.Latency+e.Overhead || e.Overhead != 2e-4 || p.Name != "cpu-emulated" || p.Memory != titan.Memory {
		t.Errorf("profile %+v", p)
	}
	if err := p.Validate(); err != nil {
		t.Error(err)
	}
}

func rel(a, b float64) float64 { return math.Abs(a-b) / math.Abs(b) }

// Measuring a small training step times every op it computes, under
// the key planning will look up; the profile built validates and prices
// the step's ops with their measured times.
func TestRunTimesEveryOp(t *testing.T) {
	m := plantest.Step(t, "resnet18", 2, compiler.TrainOptions{Optimizer: "sgd"})
	meas, err := Run(context.Background(), m, Options{Runs: 2, Warmup: 1, Pacing: true})
	if err != nil {
		t.Fatal(err)
	}
	titan, _ := profile.Lookup("titan-rtx")
	p, err := Build(meas, BuildOptions{Emulate: titan})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, op := range m.Graph.Order() {
		if ir.CopyOf(op) != ir.NoCopy {
			continue
		}
		n++
		if _, ok := p.OpTimes[profile.OpKey(op)]; !ok {
			t.Errorf("%s: not timed (%s)", op.Describe(), profile.OpKey(op))
		}
	}
	if n == 0 || meas.Runs != 2 || meas.Warmup != 1 || p.Emulation == nil || p.Measured == nil || p.Measured.StepS <= 0 {
		t.Errorf("%d ops, measurements %+v", n, meas)
	}
	if _, err := Run(context.Background(), m, Options{Runs: -1}); err == nil {
		t.Error("-1 runs measured")
	}
}
