package plantest

import (
	"testing"

	"github.com/tsplit/tsplit/compiler"
	"github.com/tsplit/tsplit/executor"
	"github.com/tsplit/tsplit/executor/cpu"
	"github.com/tsplit/tsplit/ir"
	"github.com/tsplit/tsplit/ir/irtest"
	"github.com/tsplit/tsplit/memory"
	"github.com/tsplit/tsplit/zoo"
)

// Floats are n deterministic values in [-0.1, 0.1], varied by seed.
func Floats(n int64, seed float64) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = float64((int64(i)*7919+int64(seed*1000))%201-100) / 1000
	}
	return out
}

// Weight adds an initializer of the given shape with Floats seeded by
// its name's length.
func Weight(b *irtest.B, name string, dims ...int64) *ir.Value {
	n := int64(1)
	for _, d := range dims {
		n *= d
	}
	return b.Init(name, ir.TensorFromFloat64s(ir.Float, ir.Shape(dims), Floats(n, float64(len(name)))))
}

// Train turns a forward model into its training step (SGD).
func Train(t testing.TB, m *ir.Model) *ir.Model {
	t.Helper()
	if m.Meta == nil {
		// BuildTrainingStep writes its metadata into m.Meta and panics
		// on a nil map (irtest models have none).
		m.Meta = map[string]string{}
	}
	if _, err := compiler.BuildTrainingStep(m, compiler.TrainOptions{Optimizer: "sgd"}); err != nil {
		t.Fatal(err)
	}
	return m
}

// Step builds the training step of a zoo family at its CI-sized
// configuration (zoo.SmallConfig) and batch.
func Step(t testing.TB, family string, batch int64, opts compiler.TrainOptions) *ir.Model {
	t.Helper()
	cfg := zoo.SmallConfig(family)
	cfg.Batch = batch
	mp, err := zoo.Build(family, cfg)
	if err != nil {
		t.Fatal(err)
	}
	m, err := compiler.FromProto(mp, "", compiler.Options{Batch: batch})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := compiler.BuildTrainingStep(m, opts); err != nil {
		t.Fatalf("%s: %v", family, err)
	}
	return m
}

// Peak is the memory model's peak of m's current order.
func Peak(t testing.TB, m *ir.Model) int64 {
	t.Helper()
	mem, err := memory.Analyze(m.Graph, memory.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return mem.Peak
}

// Inputs makes seeded inputs for a training step (compiler.RandomInputs).
func Inputs(t testing.TB, m *ir.Model) map[string][]byte {
	t.Helper()
	in, err := compiler.RandomInputs(m, 7)
	if err != nil {
		t.Fatal(err)
	}
	return in
}

// Run runs m on a CPU device of pool bytes, tensors placed by the
// executor's allocator; it returns the result and the executor's memory
// model.
func Run(t testing.TB, m *ir.Model, pool int64, in map[string][]byte) (*executor.Result, *memory.Model) {
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

// RunUnplanned runs a step on a CPU device with the pool its best-fit
// allocation needs.
func RunUnplanned(t testing.TB, m *ir.Model, in map[string][]byte) *executor.Result {
	t.Helper()
	mem, err := memory.Analyze(m.Graph, memory.Options{})
	if err != nil {
		t.Fatal(err)
	}
	res, _ := Run(t, m, mem.Need(), in)
	return res
}

// RunPlanned runs a planned step as `tsplitc --run` does: on a CPU
// device whose pool is pool bytes, every tensor at its layout offset.
func RunPlanned(t testing.TB, m *ir.Model, pool int64, in map[string][]byte) (*executor.Result, *executor.Executor) {
	t.Helper()
	if _, ok := m.Meta[memory.LayoutKey]; !ok {
		t.Fatal("the planned model has no layout")
	}
	xopts, _, err := executor.PlannedOptions(m)
	if err != nil {
		t.Fatal(err)
	}
	dev, err := cpu.New(pool)
	if err != nil {
		t.Fatal(err)
	}
	x, err := executor.New(m, dev, xopts)
	if err != nil {
		t.Fatal(err)
	}
	res, err := x.Run(in)
	if err != nil {
		t.Fatalf("planned step on a %d-byte device: %v", pool, err)
	}
	return res, x
}

// UniqueNames checks that the graph's ops have distinct names, as an
// ONNX file must (ONNX Runtime refuses one that does not).
func UniqueNames(t testing.TB, m *ir.Model) {
	t.Helper()
	seen := map[string]int{}
	for _, op := range m.Graph.Order() {
		if op.Name != "" {
			seen[op.Name]++
		}
	}
	dup := 0
	for n, k := range seen {
		if k > 1 {
			if dup++; dup <= 3 {
				t.Errorf("%d ops of the graph are named %q: not a valid ONNX graph", k, n)
			}
		}
	}
	if dup > 3 {
		t.Errorf("%d op names are used more than once", dup)
	}
}

// WideVGG is a small VGG-like forward model on a one-channel hw×hw
// image, whose first two activations are eight times the image
// (fused-tiled segments, docs/sft.md):
//
//	conv1 1→8 3×3 p1 → relu → conv2 8→8 → relu → pool1 2×2/2
//	→ conv3 8→16 → relu → pool2 2×2/2 → global average pool
func WideVGG(t testing.TB, hw int64) *ir.Model {
	b := irtest.New(t)
	x := b.Input("x", ir.Float, 1, 1, hw, hw)
	conv := func(name string, x *ir.Value, cin, cout int64) *ir.Value {
		w := Weight(b, name+".w", cout, cin, 3, 3)
		bias := Weight(b, name+".b", cout)
		y := b.Op("Conv", irtest.V(x, w, bias), irtest.Ints("pads", 1, 1, 1, 1))
		y.Def.Name = name
		return b.Op("Relu", irtest.V(y))
	}
	pool := func(name string, x *ir.Value) *ir.Value {
		p := b.Op("MaxPool", irtest.V(x), irtest.Ints("kernel_shape", 2, 2), irtest.Ints("strides", 2, 2))
		p.Def.Name = name
		return p
	}
	h := pool("pool1", conv("conv2", conv("conv1", x, 1, 8), 8, 8))
	h = pool("pool2", conv("conv3", h, 8, 16))
	y := b.Op("GlobalAveragePool", irtest.V(h))
	y.Def.Name = "gap"
	return b.Return(y)
}
