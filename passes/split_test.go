package passes

import (
	"bytes"
	"encoding/binary"
	"math"
	"testing"

	"github.com/tsplit/tsplit/compiler"
	"github.com/tsplit/tsplit/executor"
	"github.com/tsplit/tsplit/executor/cpu"
	"github.com/tsplit/tsplit/ir"
	. "github.com/tsplit/tsplit/ir/irtest"
	"github.com/tsplit/tsplit/memory"
)

func splitGraph(t *testing.T) (*ir.Model, *ir.Op) {
	b := New(t)
	x := b.Input("x", ir.Float, 64, 1024)
	w := b.Init("w", ir.TensorFromFloat64s(ir.Float, ir.Shape{1024}, func() []float64 {
		v := make([]float64, 1024)
		for i := range v {
			v[i] = float64(i%7) - 3
		}
		return v
	}()))
	h := b.Op("Mul", V(x, w))
	y := b.Op("Sum", V(b.Op("ReduceSum", V(h), Int("keepdims", 0))))
	return b.Return(y), h.Def
}

func runModel(t *testing.T, m *ir.Model, pool int64, in map[string][]byte) (*executor.Result, *memory.Model) {
	t.Helper()
	dev, err := cpu.New(pool)
	if err != nil {
		t.Fatal(err)
	}
	x, err := executor.New(m, dev, executor.Options{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := x.Run(in)
	if err != nil {
		t.Fatal(err)
	}
	return r, x.Mem
}

// Splitting the Mul 4 ways along the batch stages x and the product in
// host memory piece by piece: the device holds about 2/4 of them at a
// time, and the result is the same.
func TestInsertSplit(t *testing.T) {
	raw := make([]byte, 64*1024*4)
	for i := 0; i < 64*1024; i++ {
		binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(float32(i%13)/13-0.5))
	}
	in := map[string][]byte{"x": raw}
	m, op := splitGraph(t)
	before, memBefore := runModel(t, m, 8<<20, in)
	if err := InsertSplit(m, &SplitDecision{Op: op, PNum: 4, Dim: 0, InputDims: []int{0, -1}}); err != nil {
		t.Fatal(err)
	}
	if err := ir.Verify(m); err != nil {
		t.Fatal(err)
	}
	after, memAfter := runModel(t, m, 8<<20, in)
	for name, want := range before.Outputs {
		if !bytes.Equal(after.Outputs[name], want) {
			t.Fatalf("output %q changed by the split", name)
		}
	}
	t.Logf("peak %d → %d bytes", memBefore.Peak, memAfter.Peak)
	if memAfter.Peak >= memBefore.Peak {
		t.Fatalf("split did not lower the peak: %d → %d", memBefore.Peak, memAfter.Peak)
	}
}

// Split earns its place: every big op of this training step reads and
// writes more than the budget, so no swap/recompute plan exists; with
// splits the step runs under the budget on the capped device and
// computes the same loss and updates.
func TestSplitEarnsItsPlace(t *testing.T) {
	build := func() *ir.Model {
		b := New(t)
		x := b.Input("x", ir.Float, 64, 2048)
		vals := make([]float64, 2048)
		for i := range vals {
			vals[i] = float64(i%5)/5 - 0.3
		}
		w := b.Init("w", ir.TensorFromFloat64s(ir.Float, ir.Shape{2048}, vals))
		h := b.Op("Mul", V(x, w))
		y := b.Op("Relu", V(h))
		loss := b.Op("ReduceMean", V(y), Int("keepdims", 0))
		m := b.Return(loss)
		if _, err := compiler.BuildTrainingStep(m, compiler.TrainOptions{Loss: "none"}); err != nil {
			t.Fatal(err)
		}
		return m
	}
	raw := make([]byte, 64*2048*4)
	for i := 0; i < 64*2048; i++ {
		binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(float32(i%17)/17-0.4))
	}
	in := map[string][]byte{"x": raw}
	const budget = 1 << 20 // x alone is 512 KiB; Mul's inputs and output 1 MiB
	plain := build()
	want, plainMem := runModel(t, plain, 16<<20, in)

	noSplit := build()
	s := NewState(noSplit, &Options{Budget: budget, Policy: "tsplit-nosplit"})
	if err := s.Run(Pipeline...); err == nil {
		t.Fatalf("a swap/recompute plan fit %d bytes; the case does not need split", budget)
	}

	m := build()
	s = NewState(m, &Options{Budget: budget})
	s.Check = true
	if err := s.Run(Pipeline...); err != nil {
		t.Fatal(err)
	}
	r := s.Report
	t.Logf("base peak %d, planned peak %d, pool %d, %d splits, %d swaps", plainMem.Peak, r.Peak, r.Pool, r.Split, r.Swapped)
	if r.Split == 0 || r.Peak > budget || r.Pool > budget {
		t.Fatalf("plan: %d splits, peak %d, pool %d, budget %d", r.Split, r.Peak, r.Pool, budget)
	}
	mem, err := memory.Analyze(m.Graph, memory.Options{})
	if err != nil {
		t.Fatal(err)
	}
	l, err := memory.DecodeLayout(m.Meta[memory.LayoutKey])
	if err != nil {
		t.Fatal(err)
	}
	place, err := mem.Placement(l)
	if err != nil {
		t.Fatal(err)
	}
	dev, err := cpu.New(budget)
	if err != nil {
		t.Fatal(err)
	}
	x, err := executor.New(m, dev, executor.Options{Placement: place})
	if err != nil {
		t.Fatal(err)
	}
	got, err := x.Run(in)
	if err != nil {
		t.Fatal(err)
	}
	if got.HighWater > budget || got.HighWater != r.Peak {
		t.Fatalf("measured high-water %d, planned peak %d, budget %d", got.HighWater, r.Peak, budget)
	}
	for name, w := range want.Outputs {
		g := got.Outputs[name]
		if len(g) != len(w) {
			t.Fatalf("output %q missing", name)
		}
		a, b := floatsOf(w), floatsOf(g)
		for i := range a {
			if d := math.Abs(float64(a[i] - b[i])); d > 1e-5*math.Max(1, math.Abs(float64(a[i]))) {
				t.Fatalf("output %q[%d]: %g planned, %g unplanned", name, i, b[i], a[i])
			}
		}
	}
}

func floatsOf(b []byte) []float32 {
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}
