package passes_test

import (
	"bytes"
	"testing"

	"github.com/tsplit/tsplit/internal/plantest"
	"github.com/tsplit/tsplit/ir"
	. "github.com/tsplit/tsplit/ir/irtest"
	"github.com/tsplit/tsplit/memory"
	"github.com/tsplit/tsplit/passes"
)

// offloadMLP is a three-layer MLP's SGD training step.
func offloadMLP(t *testing.T) *ir.Model {
	b := New(t)
	h := b.Input("x", ir.Float, 4, 16)
	for _, w := range []string{"wa", "wb"} {
		h = b.Op("Relu", V(b.Op("MatMul", V(h, plantest.Weight(b, w, 16, 16)))))
	}
	return plantest.Train(t, b.Return(b.Op("MatMul", V(h, plantest.Weight(b, "wout", 16, 10)))))
}

// OffloadState keeps every trained weight on the host: the memory model
// gives them no device allocation and counts them in host memory for
// the whole step, each device reader reads a swap-in's copy, the updated
// weights leave as host outputs under their names, and the step
// computes exactly what it computed before.
func TestOffloadStateKeepsWeightsOnHost(t *testing.T) {
	want := offloadMLP(t)
	m := offloadMLP(t)
	in := plantest.Inputs(t, m)
	before := plantest.RunUnplanned(t, want, in)

	n, err := passes.OffloadState(m, false)
	if err != nil {
		t.Fatal(err)
	}
	if n != 3 {
		t.Fatalf("offloaded %d weights, want the 3 parameters", n)
	}
	if err := ir.Verify(m); err != nil {
		t.Fatal(err)
	}
	mem, err := memory.Analyze(m.Graph, memory.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var state int64
	for _, name := range []string{"wa", "wb", "wout"} {
		v := m.Graph.Lookup(name)
		if !memory.HostResident(v) || mem.ByValue[v.ID] >= 0 {
			t.Errorf("%s: host-resident %v, device interval %d", name, memory.HostResident(v), mem.ByValue[v.ID])
		}
		state += memory.Align(v.Bytes())
		for _, u := range v.Uses() {
			if u.Op.Type != "SwapIn" {
				t.Errorf("%s is read by %s, not by a swap-in", name, u.Op.Describe())
			}
		}
		if nx := v.Next; nx == nil || !memory.OnHost(nx) {
			t.Errorf("%s: its update is not a host tensor", name)
		}
	}
	if mem.HostState != state || mem.HostPeak < state {
		t.Errorf("host state %d, host peak %d; the weights are %d bytes", mem.HostState, mem.HostPeak, state)
	}
	base, err := memory.Analyze(want.Graph, memory.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if mem.Resident >= base.Resident {
		t.Errorf("resident before the first op: %d offloaded, %d not", mem.Resident, base.Resident)
	}
	after, _ := plantest.Run(t, m, mem.Need(), in)
	for _, v := range want.Graph.Outputs {
		if !bytes.Equal(after.Outputs[v.Name], before.Outputs[v.Name]) {
			t.Errorf("output %q changed by offloading", v.Name)
		}
	}
}
