package passes

import (
	"path/filepath"
	"testing"

	"github.com/tsplit/tsplit/backend"
	"github.com/tsplit/tsplit/compiler"
	"github.com/tsplit/tsplit/internal/oracle"
	"github.com/tsplit/tsplit/internal/plantest"
	"github.com/tsplit/tsplit/ir"
	"github.com/tsplit/tsplit/memory"
)

// sftVGGWide is plantest.WideVGG on an 80×80 image: conv1's and
// conv2's outputs take 200 KiB each, pool1's 50 KiB, conv3's 100 KiB,
// pool2's 25 KiB.
func sftVGGWide(t *testing.T) *ir.Model { return plantest.WideVGG(t, 80) }

func trainSGD(m *ir.Model) error {
	m.Meta = map[string]string{}
	_, err := compiler.BuildTrainingStep(m, compiler.TrainOptions{Optimizer: "sgd", Loss: "mse"})
	return err
}

// The training step of sftVGGWide under a 160 KiB budget, less than
// its largest single activation (200 KiB): the fused-tiled forward with
// each cell recomputed in the backward (FuseForTraining) needs less
// than the budget, where the untiled step needs about a megabyte (the
// convolutions' im2col scratch and their gradients) and the tiled
// forward without the recompute keeps every cell's tiles for the
// backward. The step runs on a capped CPU device of the budget's size
// with a static layout: the measured high-water is the planned peak,
// the loss and the updated weights equal the untiled step's within
// 1e-5, and ONNX Runtime runs the planned file to the same result.
func TestFusedTilesTrainingStepBudget(t *testing.T) {
	const budget = 160 << 10
	base := sftVGGWide(t)
	if err := trainSGD(base); err != nil {
		t.Fatal(err)
	}
	in := plantest.Inputs(t, base)
	want := plantest.RunUnplanned(t, base, in)
	var largest int64
	for _, op := range base.Graph.Order() {
		for _, v := range op.Outputs() {
			if v != nil {
				largest = max(largest, v.Bytes())
			}
		}
	}
	if largest <= budget {
		t.Fatalf("the largest activation has %d bytes, the budget %d", largest, budget)
	}

	step, err := FuseForTraining(sftVGGWide(t), budget, trainSGD)
	if err != nil {
		t.Fatal(err)
	}
	if step == nil || len(step.Fused) != 1 || !step.Fits {
		t.Fatalf("no fused-tiled segment: %+v", step)
	}
	m := step.Model
	if err := ir.Verify(m); err != nil {
		t.Fatal(err)
	}
	plantest.UniqueNames(t, m)
	tl := step.Fused[0].Tiling
	t.Logf("segment [%s] on %v tiles; training-step peak %d bytes (pool %d), untiled %d, largest activation %d, budget %d",
		segNames(tl.Seg), tl.Counts, step.Peak, step.Layout.Pool, plantest.Peak(t, base), largest, budget)
	if step.Peak > budget || step.Peak >= plantest.Peak(t, base) {
		t.Errorf("peak %d bytes, want within the budget %d and below the untiled %d", step.Peak, budget, plantest.Peak(t, base))
	}
	// Without the recompute the same tiling keeps every cell's tiles.
	keep := sftVGGWide(t)
	segs, err := FindSegments(keep, AnalyzeFT(keep), SegmentOptions{Budget: budget})
	if err != nil || len(segs) != 1 {
		t.Fatalf("%d segments, %v", len(segs), err)
	}
	var dims []FTDim // the same dimensions of the fresh model's segment
	for _, d := range tl.Dims {
		for _, e := range segs[0].Dims {
			if e.In == d.In {
				dims = append(dims, e)
			}
		}
	}
	tl2, err := ComputeTileSize(segs[0], dims, tl.Counts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := InsertFusedTiles(keep, tl2); err != nil {
		t.Fatal(err)
	}
	if err := trainSGD(keep); err != nil {
		t.Fatal(err)
	}
	if p := plantest.Peak(t, keep); p <= budget {
		t.Errorf("without the recompute the step needs %d bytes, want more than the budget %d", p, budget)
	} else {
		t.Logf("without the recompute: %d bytes", p)
	}

	if step.Layout.Pool > budget {
		t.Fatalf("the layout needs a pool of %d bytes, the budget is %d", step.Layout.Pool, budget)
	}
	m.Meta[memory.LayoutKey] = step.Layout.Encode()
	got, _ := plantest.RunPlanned(t, m, budget, in)
	if got.HighWater != step.Peak {
		t.Errorf("measured high-water %d bytes, the planned peak %d", got.HighWater, step.Peak)
	}
	if len(base.Graph.Outputs) != 7 { // the loss and six updated weights
		t.Fatalf("%d outputs", len(base.Graph.Outputs))
	}
	for _, v := range base.Graph.Outputs {
		if err := plantest.SameOutput(base.Graph, v.Name, got.Outputs[v.Name], want.Outputs[v.Name], 1e-5); err != nil {
			t.Error(err)
		}
	}

	// ONNX Runtime: the planned file (standard ops only) against the
	// untiled step (node starts twice: the integration tier).
	if !oracle.IntegrationOn() {
		t.Log("the planned file runs in ONNX Runtime in the integration tier (TSPLIT_INTEGRATION=1)")
		return
	}
	if !oracle.ORTAvailable() {
		t.Log("ONNX Runtime is not installed (make deps): the planned file is not run there")
		return
	}
	dir := t.TempDir()
	basePath, planPath := filepath.Join(dir, "train.onnx"), filepath.Join(dir, "planned.onnx")
	if err := backend.WriteFile(base, basePath); err != nil {
		t.Fatal(err)
	}
	if err := backend.WriteFile(m, planPath); err != nil {
		t.Fatal(err)
	}
	feeds := map[string]*oracle.Tensor{}
	for _, v := range base.Graph.Inputs {
		if data, ok := in[v.Name]; ok {
			feeds[v.Name] = &oracle.Tensor{Type: "float32", Dims: v.Shape.Clone(), Data: data}
		}
	}
	ortWant := oracle.ORTRun(t, basePath, feeds, true)
	ortGot := oracle.ORTRun(t, planPath, feeds, true)
	for _, v := range base.Graph.Outputs {
		w, g := ortWant[v.Name], ortGot[v.Name]
		if w == nil || g == nil {
			t.Errorf("ONNX Runtime: output %q missing", v.Name)
			continue
		}
		if err := plantest.SameOutput(base.Graph, v.Name, g.Data, w.Data, 1e-5); err != nil {
			t.Errorf("ONNX Runtime: %v", err)
		}
		if err := plantest.SameOutput(base.Graph, v.Name, g.Data, want.Outputs[v.Name], 1e-5); err != nil {
			t.Errorf("ONNX Runtime against tsplit's untiled step: %v", err)
		}
	}
}
