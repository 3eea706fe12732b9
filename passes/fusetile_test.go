package passes

import (
	"path/filepath"
	"testing"

	"github.com/tsplit/tsplit/backend"
	"github.com/tsplit/tsplit/internal/oracle"
	"github.com/tsplit/tsplit/internal/plantest"
	"github.com/tsplit/tsplit/ir"
	"github.com/tsplit/tsplit/memory"
)

// fuseAndCompare runs m, rewrites every segment FindSegments finds at
// budget with ChooseTiles' tiling, runs it again and compares the
// outputs; it returns the memory model's peak before and after.
func fuseAndCompare(t *testing.T, m *ir.Model, budget int64, in map[string][]byte) (before, after int64, segs []*FTSegment, want map[string][]byte) {
	t.Helper()
	whole := plantest.RunUnplanned(t, m, in)
	want = whole.Outputs
	before = plantest.Peak(t, m)
	segs, err := FindSegments(m, AnalyzeFT(m), SegmentOptions{Budget: budget})
	if err != nil {
		t.Fatal(err)
	}
	var weights int64
	for _, v := range m.Graph.Values() {
		if memory.Resident(v) {
			weights += memory.Align(v.Bytes())
		}
	}
	for _, seg := range segs {
		tl, err := ChooseTiles(seg, budget-weights)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("segment [%s]: %v tiles, %d bytes per tile with its checkpoints", segNames(seg), tl.Counts, tl.WorkingSet())
		if _, err := InsertFusedTiles(m, tl); err != nil {
			t.Fatal(err)
		}
		if err := ir.Verify(m); err != nil {
			t.Fatal(err)
		}
	}
	plantest.UniqueNames(t, m)
	after = plantest.Peak(t, m)
	// The capped CPU device of the budget's size runs the tiled model,
	// every tensor at its offset of a static layout (as a planned model
	// runs: the runtime's own best-fit placement fragments the pool).
	mem, err := memory.Analyze(m.Graph, memory.Options{})
	if err != nil {
		t.Fatal(err)
	}
	l := mem.MakeLayout()
	if l.Pool > budget {
		t.Fatalf("the layout needs a pool of %d bytes, the budget is %d", l.Pool, budget)
	}
	if m.Meta == nil {
		m.Meta = map[string]string{}
	}
	m.Meta[memory.LayoutKey] = l.Encode()
	got, _ := plantest.RunPlanned(t, m, budget, in)
	if got.HighWater != after {
		t.Errorf("measured high-water %d bytes, the memory model's peak %d", got.HighWater, after)
	}
	for _, v := range m.Graph.Outputs {
		if err := plantest.SameOutput(m.Graph, v.Name, got.Outputs[v.Name], want[v.Name], 1e-5); err != nil {
			t.Error(err)
		}
	}
	return before, after, segs, want
}

// The VGG-like stack at a 64 KiB budget: its segment (conv1 … conv3)
// runs as fused tiles on a capped device of the budget's size, the
// result equals the untiled forward within 1e-5, and the memory model's
// peak (activations and the convolutions' im2col scratch), which the
// device measures, falls to within the budget.
func TestFusedTilesVGG(t *testing.T) {
	m := sftVGG(t)
	in := map[string][]byte{"x": plantest.Ramp(3*32*32, 97)}
	const budget = 64 << 10
	before, after, segs, _ := fuseAndCompare(t, m, budget, in)
	t.Logf("peak %d -> %d bytes (budget %d)", before, after, budget)
	if len(segs) != 1 {
		t.Fatalf("%d segments, want 1", len(segs))
	}
	if before <= budget || after > budget {
		t.Errorf("peak %d -> %d bytes, want above the %d-byte budget before and within it after", before, after, budget)
	}
	// No op of the rewritten model writes a 32 KiB activation.
	for _, op := range m.Graph.Order() {
		for _, v := range op.Outputs() {
			if v != nil && v.Bytes() >= 32<<10 {
				t.Errorf("%s writes %q of %d bytes", op.Describe(), v.Name, v.Bytes())
			}
		}
	}
}

// The window chain (dilation, stride 2, odd sizes, a pool dropping the
// last row): the tiled forward matches for every grid ChooseTiles may
// pick, and for a hand-picked uneven one.
func TestFusedTilesWindows(t *testing.T) {
	for _, counts := range [][]int{{1, 3}, {2, 3}, {3, 2}, {3, 3}} {
		m, seg := sftChain(t, 13, 11)
		in := map[string][]byte{"x": plantest.Ramp(2*13*11, 31)}
		want := plantest.RunUnplanned(t, m, in)
		tl, err := ComputeTileSize(seg, seg.Dims, counts)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := InsertFusedTiles(m, tl); err != nil {
			t.Fatalf("%v: %v", counts, err)
		}
		if err := ir.Verify(m); err != nil {
			t.Fatalf("%v: %v", counts, err)
		}
		got := plantest.RunUnplanned(t, m, in)
		for _, v := range m.Graph.Outputs {
			if err := plantest.SameOutput(m.Graph, v.Name, got.Outputs[v.Name], want.Outputs[v.Name], 1e-6); err != nil {
				t.Errorf("%v tiles: %v", counts, err)
			}
		}
	}
}

// ONNX Runtime runs the fused-tiled VGG-like stack (Slice, the tiles'
// Conv, Relu and MaxPool with explicit pads, Concat: standard ops) and
// gets the untiled result.
func TestFusedTilesORT(t *testing.T) {
	if !oracle.ORTAvailable() {
		t.Skip("ONNX Runtime is not installed (make deps)")
	}
	m := sftVGG(t)
	in := map[string][]byte{"x": plantest.Ramp(3*32*32, 97)}
	_, _, _, want := fuseAndCompare(t, m, 64<<10, in)
	path := filepath.Join(t.TempDir(), "tiled.onnx")
	if err := backend.WriteFile(m, path); err != nil {
		t.Fatal(err)
	}
	x := m.Graph.Inputs[0]
	ort := oracle.ORTRun(t, path, map[string]*oracle.Tensor{"x": {Type: "float32", Dims: x.Shape.Clone(), Data: in["x"]}}, true)
	for name, w := range want {
		got := ort[name]
		if got == nil {
			t.Fatalf("ONNX Runtime gave no output %q", name)
		}
		if err := plantest.SameOutput(m.Graph, name, got.Data, w, 1e-5); err != nil {
			t.Errorf("ONNX Runtime: %v", err)
		}
	}
}

// Branches: the segment [wide pool a b] forks at the pool and has two
// outputs, each merged from its tiles; with the Add taken in too (by
// hand) an op reads two tiles of the segment. Both match the untiled
// forward.
func TestFusedTilesBranches(t *testing.T) {
	in := map[string][]byte{"x": plantest.Ramp(4*16*16, 53)}
	const budget = 32 << 10
	m := sftBranches(t)
	before, after, segs, _ := fuseAndCompare(t, m, budget, in)
	if len(segs) != 1 || len(segs[0].Outputs) != 2 || after >= before {
		t.Errorf("%d segments, peak %d -> %d", len(segs), before, after)
	}

	m = sftBranches(t)
	want := plantest.RunUnplanned(t, m, in)
	ops := m.Graph.Order()[1:] // wide … add
	seg, err := newSegment(m.Graph, AnalyzeFT(m), ops, make([]bool, len(ops)), func(*ir.Value) bool { return true })
	if err != nil {
		t.Fatal(err)
	}
	tl, err := ComputeTileSize(seg, seg.Dims[len(seg.Dims)-2:], []int{3, 2})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := InsertFusedTiles(m, tl); err != nil {
		t.Fatal(err)
	}
	if err := ir.Verify(m); err != nil {
		t.Fatal(err)
	}
	got := plantest.RunUnplanned(t, m, in)
	for _, v := range m.Graph.Outputs {
		if err := plantest.SameOutput(m.Graph, v.Name, got.Outputs[v.Name], want.Outputs[v.Name], 1e-6); err != nil {
			t.Error(err)
		}
	}
}

// The training step built from the fused-tiled forward (MSE loss, SGD):
// autodiff through the tiles' Slices (whose gradients add the tiles'
// input-region gradients into the whole, the overlap-add on the halos),
// the per-tile ops (whose weight gradients add over the tiles) and the
// Concats gives the loss and updated weights of the untiled step. Alone
// it does not reduce the peak: every tile's activations wait for the
// backward pass. With each cell recomputed in the backward
// (RecomputeTiles) the results stay the same and the peak falls below
// the untiled step's.
func TestFusedTilesTrainingStep(t *testing.T) {
	train := func(m *ir.Model) *ir.Model {
		if err := trainSGD(m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	base := train(sftVGG(t))
	in := plantest.Inputs(t, base)
	want := plantest.RunUnplanned(t, base, in)

	m := sftVGG(t)
	segs, err := FindSegments(m, AnalyzeFT(m), SegmentOptions{Budget: 64 << 10})
	if err != nil || len(segs) != 1 {
		t.Fatalf("%d segments, %v", len(segs), err)
	}
	tl, err := ChooseTiles(segs[0], 64<<10-8704)
	if err != nil {
		t.Fatal(err)
	}
	ft, err := InsertFusedTiles(m, tl)
	if err != nil {
		t.Fatal(err)
	}
	m = train(m)
	if len(base.Graph.Outputs) != 7 { // the loss and six updated weights
		t.Fatalf("%d outputs", len(base.Graph.Outputs))
	}
	check := func(what string) {
		got := plantest.RunUnplanned(t, m, in)
		for _, v := range base.Graph.Outputs {
			if err := plantest.SameOutput(base.Graph, v.Name, got.Outputs[v.Name], want.Outputs[v.Name], 1e-5); err != nil {
				t.Errorf("%s: %v", what, err)
			}
		}
	}
	check("tiled forward")
	kept := plantest.Peak(t, m)
	if err := RecomputeTiles(m, ft); err != nil {
		t.Fatal(err)
	}
	if err := ir.Verify(m); err != nil {
		t.Fatal(err)
	}
	check("cells recomputed in the backward")
	untiled, recomputed := plantest.Peak(t, base), plantest.Peak(t, m)
	t.Logf("training step peak: untiled %d bytes, fused-tiled forward %d bytes, cells recomputed %d bytes", untiled, kept, recomputed)
	if kept <= untiled || recomputed >= untiled {
		t.Errorf("peaks: untiled %d, tiles kept %d, recomputed %d bytes; want the kept tiles above the untiled step and the recompute below", untiled, kept, recomputed)
	}
}
