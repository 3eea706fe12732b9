package policy

import (
	"bytes"
	"context"
	"testing"

	"github.com/tsplit/tsplit/compiler"
	"github.com/tsplit/tsplit/internal/oracle"
	"github.com/tsplit/tsplit/internal/plantest"
	"github.com/tsplit/tsplit/ir"
	. "github.com/tsplit/tsplit/ir/irtest"
	"github.com/tsplit/tsplit/memory"
)

// wideGemm is one MatMul of a [8, k] input by a [k, n] weight, trained
// with SGD.
func wideGemm(t *testing.T, k, n int64) *ir.Model {
	b := New(t)
	x := b.Input("x", ir.Float, 8, k)
	m := b.Return(b.Op("MatMul", V(x, plantest.Weight(b, "w", k, n))))
	if m.Meta == nil {
		m.Meta = map[string]string{}
	}
	if _, err := compiler.BuildTrainingStep(m, compiler.TrainOptions{Optimizer: "sgd"}); err != nil {
		t.Fatal(err)
	}
	return m
}

// Issue 14 item 3 (must-show 5): a single MatMul whose weight is twice
// the budget plans with weight tiles — the weight on the host, the
// MatMul and its weight gradient split along the weight's output
// dimension, each tile streamed in — and three capped steps compute
// bit for bit what the unplanned steps compute, with the measured peak
// the planned one.
func TestWeightTiles(t *testing.T) {
	oracle.Integration(t, "a MatMul whose weight is larger than the budget")
	const k, n = 64, 2048
	m := wideGemm(t, k, n)
	w := memory.Align(int64(k * n * 4))
	budget := w / 2
	in := plantest.Inputs(t, m)
	inBase := map[string][]byte{}
	for name, b := range in {
		inBase[name] = b
	}
	res, err := Plan(context.Background(), m, Tsplit, Options{Budget: budget, Offload: true})
	if err != nil {
		t.Fatalf("weight %d, budget %d: %v", w, budget, err)
	}
	r := res.Report
	tiles := 0
	for _, d := range r.Decisions {
		if d.Option == "split+swap" {
			t.Logf("%s split %d ways along dimension %d (%s)", d.At, d.PNum, d.Dim, d.Split)
			if d.Dim == 1 {
				tiles++
			}
		}
	}
	if r.Offloaded == 0 || tiles == 0 {
		t.Fatalf("weight %d in a budget of %d: %d weights on the host, %d ops split along the weight's output dimension", w, budget, r.Offloaded, tiles)
	}
	base := wideGemm(t, k, n)
	want := unplannedSteps(t, base, inBase, 3)
	got, high := cappedSteps(t, m, budget, in, 3)
	if high != r.Peak || high > budget {
		t.Errorf("measured high-water %d, planned peak %d, budget %d", high, r.Peak, budget)
	}
	for name, v := range want {
		if !bytes.Equal(got[name], v) {
			t.Errorf("%s after three steps differs from the unplanned run", name)
		}
	}
	t.Logf("weight %d bytes, budget %d: planned peak %d = measured, %d split, update on the host %v, step %.4g s predicted (unplanned %.4g s); %d outputs bit-identical after 3 steps",
		w, budget, r.Peak, r.Split, r.HostUpdate, r.Time, r.BaseTime, len(want))
}
