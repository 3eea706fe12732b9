package passes

import (
	"bytes"
	"encoding/binary"
	"math"
	"testing"

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
