package policy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/tsplit/tsplit/compiler"
	"github.com/tsplit/tsplit/executor"
	"github.com/tsplit/tsplit/executor/cpu"
	"github.com/tsplit/tsplit/internal/oracle"
	"github.com/tsplit/tsplit/internal/plantest"
	"github.com/tsplit/tsplit/internal/units"
	"github.com/tsplit/tsplit/ir"
	. "github.com/tsplit/tsplit/ir/irtest"
	"github.com/tsplit/tsplit/memory"
	"github.com/tsplit/tsplit/passes"
	"github.com/tsplit/tsplit/profile"
)

// deepMLP is a chain of layers square MatMul → Relu layers of width
// width at batch 8, trained with Adam: its parameters and Adam's m and
// v are three times layers·width² floats, its activations a few
// kilobytes.
func deepMLP(t *testing.T, layers, width int64) *ir.Model {
	b := New(t)
	h := b.Input("x", ir.Float, 8, width)
	for i := range layers {
		h = b.Op("Relu", V(b.Op("MatMul", V(h, plantest.Weight(b, fmt.Sprintf("w%02d", i), width, width)))))
	}
	m := b.Return(b.Op("MatMul", V(h, plantest.Weight(b, "out", width, 10))))
	if m.Meta == nil {
		m.Meta = map[string]string{}
	}
	if _, err := compiler.BuildTrainingStep(m, compiler.TrainOptions{Optimizer: "adam"}); err != nil {
		t.Fatal(err)
	}
	return m
}

// steps runs n training steps of m on x, feeding the updated weights
// and optimizer state back, and returns the last step's outputs and the
// most device memory any step measured.
func steps(t *testing.T, m *ir.Model, x *executor.Executor, in map[string][]byte, n int) (map[string][]byte, int64) {
	t.Helper()
	ti, err := compiler.ReadTrainingInfo(m)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string][]byte
	var high int64
	for range n {
		r, err := x.Run(in)
		if err != nil {
			t.Fatal(err)
		}
		out, high = r.Outputs, max(high, r.HighWater)
		for _, fb := range ti.Feedback {
			in[fb[1]] = out[fb[0]]
		}
	}
	return out, high
}

// TestOffloadedStateTrains is issue 14's must-show 2: a model whose
// parameters and Adam state are more than four times the budget plans
// (the tsplit planner keeps that state on the host and swaps it in
// before each use), runs on the capped CPU device with the measured
// high-water equal to the planned peak and within the budget, and after
// three steps its weights and optimizer state are bit for bit those of
// the unplanned step.
func TestOffloadedStateTrains(t *testing.T) {
	oracle.Integration(t, "offloaded parameters and Adam state, three steps")
	const layers, width = 24, 32
	base := deepMLP(t, layers, width)
	var state int64
	for _, v := range base.Graph.Inits {
		if v.Next != nil {
			state += memory.Align(v.Bytes())
		}
	}
	budget := state / 4
	base.Meta = nil // the step's metadata stays on the planned copy
	planned := deepMLP(t, layers, width)
	res, err := Plan(context.Background(), planned, Tsplit, Options{Budget: budget, Offload: true})
	if err != nil {
		t.Fatalf("budget %d (state %d): %v", budget, state, err)
	}
	r := res.Report
	if r.Offloaded == 0 {
		t.Fatalf("the plan offloaded no state (report %+v)", r)
	}
	if r.Peak > budget || r.Pool > budget {
		t.Fatalf("planned peak %d, pool %d: over the budget %d", r.Peak, r.Pool, budget)
	}

	in := plantest.Inputs(t, planned)
	inBase := map[string][]byte{}
	for k, v := range in {
		inBase[k] = v
	}
	unplanned := deepMLP(t, layers, width)
	want := unplannedSteps(t, unplanned, inBase, 3)
	got, high := cappedSteps(t, planned, budget, in, 3)
	if high != r.Peak || high > budget {
		t.Errorf("measured high-water %d, planned peak %d, budget %d", high, r.Peak, budget)
	}
	ti, err := compiler.ReadTrainingInfo(planned)
	if err != nil {
		t.Fatal(err)
	}
	for _, fb := range ti.Feedback {
		if !bytes.Equal(got[fb[0]], want[fb[0]]) {
			t.Errorf("%s after three steps differs from the unplanned run", fb[0])
		}
	}
	t.Logf("state %d bytes (%.1f× the budget of %d): %d weights offloaded, planned peak %d = measured, host %d, step %.4g s predicted (unplanned %.4g s); %d fed-back values bit-identical after 3 steps",
		state, float64(state)/float64(budget), budget, r.Offloaded, r.Peak, r.HostPeak, r.Time, r.BaseTime, len(ti.Feedback))
}

// planAndTrain plans deepMLP (24 layers, width 32, Adam) into a quarter
// of its state with the update placed by u, and runs three steps capped
// at the budget: the report and the last step's outputs.
func planAndTrain(t *testing.T, u passes.UpdatePlace, prof *profile.Profile) (*passes.Report, map[string][]byte) {
	t.Helper()
	m := deepMLP(t, 24, 32)
	var state int64
	for _, v := range m.Graph.Inits {
		if v.Next != nil {
			state += memory.Align(v.Bytes())
		}
	}
	budget := state / 4
	in := plantest.Inputs(t, m)
	res, err := Plan(context.Background(), m, Tsplit, Options{Budget: budget, Update: u, Profile: prof, Offload: true})
	if err != nil {
		t.Fatalf("update %s: %v", u, err)
	}
	out, high := cappedSteps(t, m, budget, in, 3)
	if high != res.Report.Peak || high > budget {
		t.Errorf("update %s: measured high-water %d, planned peak %d, budget %d", u, high, res.Report.Peak, budget)
	}
	return res.Report, out
}

// Issue 14 item 2 (must-show 4): the optimizer update of offloaded state
// runs on the host's stream or on the device with bit-identical results
// after three steps, each capped at the budget with the measured peak
// the planned one.
func TestHostUpdateSameAsDevice(t *testing.T) {
	oracle.Integration(t, "host-side and device-side optimizer update, three steps each")
	dr, dev := planAndTrain(t, passes.UpdateDevice, nil)
	hr, host := planAndTrain(t, passes.UpdateHost, nil)
	if dr.HostUpdate || !hr.HostUpdate {
		t.Fatalf("host update: %v asked device, %v asked host", dr.HostUpdate, hr.HostUpdate)
	}
	if len(dev) == 0 || len(dev) != len(host) {
		t.Fatalf("%d outputs on the device, %d on the host", len(dev), len(host))
	}
	for k, v := range dev {
		if !bytes.Equal(host[k], v) {
			t.Errorf("%s differs between the host-side and the device-side update", k)
		}
	}
	t.Logf("device update: peak %d, host %d, step %.4g s; host update: peak %d, host %d, step %.4g s (titan-rtx); %d outputs bit-identical",
		dr.Peak, dr.HostPeak, dr.Time, hr.Peak, hr.HostPeak, hr.Time, len(dev))
}

// Under UpdateAuto the planner keeps the host-side update only where its
// simulated step is shorter than the device-side one's: on a profile
// whose host computes fast it is, on one whose host is slow it is not.
func TestPlannerPicksHostUpdateWhereFaster(t *testing.T) {
	oracle.Integration(t, "host- or device-side update chosen by simulated step")
	base, err := profile.Lookup("titan-rtx")
	if err != nil {
		t.Fatal(err)
	}
	fast, slow := *base, *base
	fast.Name, fast.HostBW, fast.HostFLOPS = "fast-host", 1e13, 1e14
	slow.Name, slow.HostBW, slow.HostFLOPS = "slow-host", 1e8, 1e8
	for _, p := range []*profile.Profile{&fast, &slow} {
		dr, _ := planAndTrain(t, passes.UpdateDevice, p)
		hr, _ := planAndTrain(t, passes.UpdateHost, p)
		ar, _ := planAndTrain(t, passes.UpdateAuto, p)
		wantHost := hr.Time < dr.Time
		if ar.HostUpdate != wantHost || (wantHost && ar.Time != hr.Time) || (!wantHost && ar.Time != dr.Time) {
			t.Errorf("%s: auto chose host update %v (step %.6g s); device %.6g s, host %.6g s", p.Name, ar.HostUpdate, ar.Time, dr.Time, hr.Time)
		}
		t.Logf("%s: device-side update %.6g s, host-side %.6g s: auto keeps host %v", p.Name, dr.Time, hr.Time, ar.HostUpdate)
	}
	if fr, _ := planAndTrain(t, passes.UpdateAuto, &fast); !fr.HostUpdate {
		t.Errorf("a host 10× faster than the link and the device still updates on the device")
	}
	if sr, _ := planAndTrain(t, passes.UpdateAuto, &slow); sr.HostUpdate {
		t.Errorf("a host at 100 MB/s still updates on the host")
	}
}

// Issue 14 item 4: a plan that fits the device but not the profile's
// pinned host memory fails with a *HostMemoryError that says host
// memory is short, by how much, and how much of it is the state kept
// there.
func TestHostMemoryShort(t *testing.T) {
	base, err := profile.Lookup("titan-rtx")
	if err != nil {
		t.Fatal(err)
	}
	m := deepMLP(t, 24, 32)
	var state int64
	for _, v := range m.Graph.Inits {
		if v.Next != nil {
			state += memory.Align(v.Bytes())
		}
	}
	small := *base
	small.Name, small.HostMemory = "small-host", state/2
	_, err = Plan(context.Background(), m, Tsplit, Options{Budget: state / 4, Profile: &small, Offload: true})
	var he *passes.HostMemoryError
	if !errors.As(err, &he) {
		t.Fatalf("host memory %d for %d bytes of state: %v, want a *HostMemoryError", state/2, state, err)
	}
	if he.Have != state/2 || he.Need <= he.Have || he.State < state-memory.Alignment || !strings.Contains(err.Error(), "host memory is short by "+units.Bytes(he.Need-he.Have)) {
		t.Errorf("%+v: %v", he, err)
	}
	t.Log(err)
}

// unplannedSteps runs n steps of the unplanned model m on a device with
// all the memory it needs and returns the last step's outputs.
func unplannedSteps(t *testing.T, m *ir.Model, in map[string][]byte, n int) map[string][]byte {
	t.Helper()
	mem, err := memory.Analyze(m.Graph, memory.Options{})
	if err != nil {
		t.Fatal(err)
	}
	dev, err := cpu.New(mem.Need())
	if err != nil {
		t.Fatal(err)
	}
	x, err := executor.New(m, dev, executor.Options{})
	if err != nil {
		t.Fatal(err)
	}
	out, _ := steps(t, m, x, in, n)
	return out
}

// cappedSteps runs n steps of the planned model m, at its static
// layout, on a device of exactly budget bytes, and returns the last
// step's outputs and the measured high-water mark.
func cappedSteps(t *testing.T, m *ir.Model, budget int64, in map[string][]byte, n int) (map[string][]byte, int64) {
	t.Helper()
	xopts, _, err := executor.PlannedOptions(m)
	if err != nil {
		t.Fatal(err)
	}
	dev, err := cpu.New(budget)
	if err != nil {
		t.Fatal(err)
	}
	x, err := executor.New(m, dev, xopts)
	if err != nil {
		t.Fatal(err)
	}
	return steps(t, m, x, in, n)
}
