package policy

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/tsplit/tsplit/compiler"
	"github.com/tsplit/tsplit/executor"
	"github.com/tsplit/tsplit/executor/cpu"
	"github.com/tsplit/tsplit/internal/oracle"
	"github.com/tsplit/tsplit/internal/plantest"
	"github.com/tsplit/tsplit/ir"
	. "github.com/tsplit/tsplit/ir/irtest"
	"github.com/tsplit/tsplit/memory"
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
	res, err := Plan(context.Background(), planned, Tsplit, Options{Budget: budget})
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
	mem, err := memory.Analyze(unplanned.Graph, memory.Options{})
	if err != nil {
		t.Fatal(err)
	}
	dev, err := cpu.New(mem.Need())
	if err != nil {
		t.Fatal(err)
	}
	xb, err := executor.New(unplanned, dev, executor.Options{})
	if err != nil {
		t.Fatal(err)
	}
	want, _ := steps(t, unplanned, xb, inBase, 3)

	xopts, _, err := executor.PlannedOptions(planned)
	if err != nil {
		t.Fatal(err)
	}
	pdev, err := cpu.New(budget)
	if err != nil {
		t.Fatal(err)
	}
	xp, err := executor.New(planned, pdev, xopts)
	if err != nil {
		t.Fatal(err)
	}
	got, high := steps(t, planned, xp, in, 3)
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
