package native

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/tsplit/tsplit/compiler"
	"github.com/tsplit/tsplit/internal/oracle"
	"github.com/tsplit/tsplit/internal/plantest"
	"github.com/tsplit/tsplit/ir"
	"github.com/tsplit/tsplit/memory"
	"github.com/tsplit/tsplit/policy"
)

// torchModels are the exports of scripts/export_torch_models.py: every
// model of testdata/torch.
var torchModels = []string{"resnet18", "resnet50", "vgg16", "vgg_small", "inception_v3", "densenet121", "mobilenet_v2", "transformer", "transformer_nodrop",
	"vgg16_gap", "vgg19_gap",
	// The small exports of models no zoo family covers (issue 11's
	// sweep of them is bench.TestBudgetSweepTorch).
	"efficientnet_mini", "convnext_mini", "shufflenet_mini", "squeezenet_mini", "regnet_mini", "mnasnet_mini", "mobilenetv3_mini", "vit_mini", "mha_block", "gelu_mlp"}

// imageDims binds the image size of the exports whose height and width
// are symbolic (the *_gap VGGs, for fused tiles): 64², small enough
// for a round trip.
var imageDims = map[string]map[string]int64{
	"vgg16_gap.onnx": {"height": 64, "width": 64},
	"vgg19_gap.onnx": {"height": 64, "width": 64},
}

// stepOf reads a model at a batch and builds its training step (SGD).
func stepOf(t *testing.T, path string, batch int64) *ir.Model {
	t.Helper()
	m, err := compiler.Import(path, compiler.Options{Batch: batch, Dims: imageDims[filepath.Base(path)]})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := compiler.BuildTrainingStep(m, compiler.TrainOptions{Optimizer: "sgd"}); err != nil {
		t.Fatal(err)
	}
	return m
}

// nativeEqualsUnplanned is the round trip of a model's training step
// through the native plan, unplanned (laid out by Lower) and planned by
// tsplit into frac of its peak: each run of a plan equals the
// executor's run of the same step bit for bit and reaches exactly its
// pool (roundTrip), and the planned step's outputs equal the unplanned
// step's (bit-exact without splits, within the split tolerance with).
func nativeEqualsUnplanned(t *testing.T, path string, batch int64, frac float64) {
	start := time.Now()
	m := stepOf(t, path, batch)
	in := plantest.Inputs(t, m)
	base, _ := roundTrip(t, m, in)
	peak := plantest.Peak(t, m)
	budget := int64(float64(peak) * frac)
	pm := stepOf(t, path, batch)
	res, err := policy.Plan(context.Background(), pm, policy.Tsplit, policy.Options{Budget: budget})
	if err != nil {
		t.Fatalf("planning into %d bytes (%.0f%% of %d): %v", budget, 100*frac, peak, err)
	}
	got, l := roundTrip(t, pm, in)
	tol := 0.0
	if res.Report.Split > 0 {
		tol = 1e-5
	}
	for _, v := range m.Graph.Outputs {
		if err := plantest.SameOutput(m.Graph, v.Name, got.Outputs[v.Name], base.Outputs[v.Name], tol); err != nil {
			t.Errorf("planned vs unplanned: %v", err)
		}
	}
	if l.Plan.Peak > budget || l.Plan.Pool > budget {
		t.Errorf("the plan's peak %d or pool %d is over the budget %d", l.Plan.Peak, l.Plan.Pool, budget)
	}
	var cmds int
	for _, s := range l.Plan.Streams {
		cmds += len(s.Commands)
	}
	t.Logf("%s b%d: peak %d, budget %d, pool %d (%d swapped, %d recomputed, %d split); %d ops, %d commands, %d events; native step %v, total %v",
		filepath.Base(path), batch, peak, budget, l.Plan.Pool, res.Report.Swapped, res.Report.Recomputed, res.Report.Split,
		len(l.Plan.Ops), cmds, l.Plan.Events, got.Duration.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
}

// quickZoo are the small zoo models the default tier runs: one of each
// kind of plan (swaps, splits, host merges; a CNN, a transformer) that
// plans in well under a second. The integration tier runs them all.
var quickZoo = map[string]bool{"gpt-small.onnx": true, "resnet18-small.onnx": true, "vgg16-small.onnx": true}

// TestZooRoundTrip runs the small zoo models (testdata/onnx) through
// the native plan at batch 2, unplanned and planned into 60 % of their
// peak.
func TestZooRoundTrip(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "testdata", "onnx", "*.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no models in testdata/onnx (make models)")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			if !quickZoo[filepath.Base(f)] {
				oracle.Integration(t, "planning it takes seconds")
			}
			nativeEqualsUnplanned(t, f, 2, 0.6)
		})
	}
}

// TestTorchRoundTrip is TestZooRoundTrip for the PyTorch exports
// (testdata/torch) planned into 75 % of their peak: the integration
// tier.
// longTorch are the exports whose round trip runs in the long tier:
// the largest steps (together over two minutes of make test's CPU),
// and the two *_gap VGGs (60–80 MB to decode, 5 s each).
var longTorch = map[string]bool{"vgg16": true, "resnet50": true, "inception_v3": true, "densenet121": true, "vgg16_gap": true, "vgg19_gap": true}

func TestTorchRoundTrip(t *testing.T) {
	oracle.Integration(t, "training steps of the full-size PyTorch exports")
	for _, name := range torchModels {
		t.Run(name, func(t *testing.T) {
			if longTorch[name] {
				oracle.Long(t, name+"'s native plan (tens of seconds of CPU to run)")
			}
			batch := int64(2)
			if name == "vgg16" {
				batch = 1
			}
			nativeEqualsUnplanned(t, oracle.TorchModel(t, name), batch, 0.75)
		})
	}
}

// TestLayoutKept checks that a planned step's plan keeps the planner's
// static layout: the same pool and the same offset for every tensor.
func TestLayoutKept(t *testing.T) {
	m := plantest.Step(t, "gpt", 2, compiler.TrainOptions{Optimizer: "sgd"})
	if _, err := policy.Plan(context.Background(), m, policy.Tsplit, policy.Options{Budget: plantest.Peak(t, m) * 6 / 10}); err != nil {
		t.Fatal(err)
	}
	l, err := memory.DecodeLayout(m.Meta[memory.LayoutKey])
	if err != nil {
		t.Fatal(err)
	}
	p, err := Lower(m)
	if err != nil {
		t.Fatal(err)
	}
	if p.Pool != l.Pool {
		t.Errorf("plan pool %d, layout pool %d", p.Pool, l.Pool)
	}
	n := 0
	for _, v := range p.Values {
		if v.Allocation == 0 {
			continue
		}
		n++
		if off := p.Allocations[v.Allocation-1].Offset; off != l.Values[v.Name] {
			t.Errorf("value %q at %d in the plan, %d in the layout", v.Name, off, l.Values[v.Name])
		}
	}
	if n != len(l.Values) {
		t.Errorf("%d device values in the plan, %d in the layout", n, len(l.Values))
	}
}
