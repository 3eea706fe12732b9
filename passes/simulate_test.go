package passes

import (
	"math"
	"testing"

	"github.com/tsplit/tsplit/ir"
	. "github.com/tsplit/tsplit/ir/irtest"
	"github.com/tsplit/tsplit/memory"
	"github.com/tsplit/tsplit/profile"
)

func simGraph(t *testing.T, swap bool) *ir.Model {
	b := New(t)
	x := b.Input("x", ir.Float, 1024, 1024)
	w := b.Input("w", ir.Float, 1024, 1024)
	a := b.Op("Relu", V(x))
	var h *ir.Value
	if swap {
		h = b.OpDomain(ir.Domain, "SwapOut", 1, V(a))[0]
	}
	m1 := b.Op("MatMul", V(x, w))
	m2 := b.Op("MatMul", V(m1, w))
	back := a
	if swap {
		back = b.OpDomain(ir.Domain, "SwapIn", 1, V(h))[0]
	}
	return b.Return(b.Op("Add", V(m2, back)))
}

func simulate(t *testing.T, m *ir.Model) *Timeline {
	mem, err := memory.Analyze(m.Graph, memory.Options{})
	if err != nil {
		t.Fatal(err)
	}
	p, _ := profile.Lookup("titan-rtx")
	return Simulate(m.Graph, mem, p)
}

func TestSimulateNoTransfers(t *testing.T) {
	tl := simulate(t, simGraph(t, false))
	if tl.Stall != 0 || math.Abs(tl.StepTime-tl.ComputeTime) > 1e-12 {
		t.Fatalf("step %g compute %g stall %g", tl.StepTime, tl.ComputeTime, tl.Stall)
	}
}

func TestSimulateSwapOverlaps(t *testing.T) {
	m := simGraph(t, true)
	tl := simulate(t, m)
	// positions: 0 Relu, 1 SwapOut, 2 MatMul, 3 MatMul, 4 SwapIn, 5 Add
	if tl.Stream[1] != StreamD2H || tl.Stream[4] != StreamH2D {
		t.Fatalf("streams %v", tl.Stream)
	}
	if !(tl.Start[1] < tl.End[2] && tl.Start[2] < tl.End[1]) {
		t.Fatalf("swap-out [%g,%g] does not overlap MatMul [%g,%g]", tl.Start[1], tl.End[1], tl.Start[2], tl.End[2])
	}
	if tl.OutOcc[2] <= 0 {
		t.Fatalf("Oc of the overlapped MatMul is %g", tl.OutOcc[2])
	}
	// 4 MiB at 12 GB/s ≈ 0.35 ms against MatMuls of ~0.2 ms each on a
	// TITAN RTX: the swap-in waits for the link and the Add stalls.
	if tl.StepTime < tl.ComputeTime {
		t.Fatalf("step %g shorter than compute %g", tl.StepTime, tl.ComputeTime)
	}
	t.Logf("step %.3g ms, compute %.3g ms, stall %.3g ms", tl.StepTime*1e3, tl.ComputeTime*1e3, tl.Stall*1e3)
}

// With a wake latency, the swap-out starts that long after the Relu it
// copies and the swap-in that long after the swap-out; compute ops
// waiting for a copy, and the issue held by a free waiting for one,
// resume as the copy ends, and ops of one stream follow each other.
func TestSimulateWakeLatency(t *testing.T) {
	m := simGraph(t, true)
	mem, err := memory.Analyze(m.Graph, memory.Options{})
	if err != nil {
		t.Fatal(err)
	}
	p, _ := profile.Lookup("titan-rtx")
	plain := Simulate(m.Graph, mem, p)
	const w = 1e-3
	p.WakeLatency = w
	woken := Simulate(m.Graph, mem, p)
	// positions: 0 Relu, 1 SwapOut, 2 MatMul, 3 MatMul, 4 SwapIn, 5 Add
	if got := woken.Start[1] - woken.End[0]; math.Abs(got-w) > 1e-12 {
		t.Errorf("swap-out starts %g after the Relu, want %g", got, w)
	}
	if got := woken.Start[3] - woken.End[1]; got != 0 {
		t.Errorf("the second MatMul is issued %g after the swap-out its free waits for", got)
	}
	if got := woken.Start[4] - woken.End[1]; got < w-1e-12 {
		t.Errorf("the swap-in starts %g after the swap-out, want at least %g", got, w)
	}
	if got := woken.Start[5] - woken.End[4]; got != 0 {
		t.Errorf("the Add starts %g after its swap-in", got)
	}
	if got := woken.Start[2] - woken.End[0]; got != 0 {
		t.Errorf("the first MatMul waits %g for the Relu", got)
	}
	if woken.StepTime <= plain.StepTime || woken.ComputeTime != plain.ComputeTime {
		t.Errorf("step %g with a wake latency, %g without; compute %g, %g", woken.StepTime, plain.StepTime, woken.ComputeTime, plain.ComputeTime)
	}
}
