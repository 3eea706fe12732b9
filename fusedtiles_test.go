package tsplit_test

import (
	"context"
	"testing"

	"github.com/tsplit/tsplit"
	"github.com/tsplit/tsplit/internal/oracle"
	"github.com/tsplit/tsplit/internal/plantest"
)

// Plan chooses fused tiles where no other plan fits: the 80×80 VGG-like
// stack's training step under a budget below its largest activation
// (200 KiB). The summary names the segment and predicts the step time;
// the planned step runs on a capped CPU device with the high-water of
// the plan and the results of the unplanned step. With room for the
// whole step nothing is tiled; without fused tiles the budget fails.
func TestPlanChoosesFusedTiles(t *testing.T) {
	const budget = 160 << 10
	train := tsplit.TrainOptions{Optimizer: "sgd", Loss: "mse"}
	ctx := context.Background()

	_, err := tsplit.Plan(ctx, plantest.WideVGG(t, 80), tsplit.Options{Budget: budget, Train: train, NoFusedTiles: true})
	if err == nil {
		t.Fatal("without fused tiles the step planned")
	}
	t.Logf("without fused tiles: %v", err)

	res, err := tsplit.Plan(ctx, plantest.WideVGG(t, 80), tsplit.Options{Budget: budget, Train: train})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("order %s, %d ops, swapped %d recomputed %d split %d", res.Order, res.Ops, res.Swapped, res.Recomputed, res.Split)
	t.Logf("fused tiles %q; peak %d (pool %d), base peak %d; step %.3g s predicted, %.3g s unconstrained", res.FusedTiles, res.Peak, res.Pool, res.BasePeak, res.Step, res.BaseStep)
	if res.FusedTiles == "" || res.Peak > budget || res.Pool > budget || res.Step <= 0 || res.BasePeak <= budget {
		t.Fatalf("%+v", res)
	}
	base := plantest.WideVGG(t, 80)
	if _, err := tsplit.Train(ctx, base, train); err != nil {
		t.Fatal(err)
	}
	in := plantest.Inputs(t, base)
	want := plantest.RunUnplanned(t, base, in)
	got, _ := plantest.RunPlanned(t, res.Model, budget, in)
	if got.HighWater != res.Peak {
		t.Errorf("measured high-water %d bytes, planned peak %d", got.HighWater, res.Peak)
	}
	for _, v := range base.Graph.Outputs {
		if err := plantest.SameOutput(base.Graph, v.Name, got.Outputs[v.Name], want.Outputs[v.Name], 1e-5); err != nil {
			t.Error(err)
		}
	}

	res, err = tsplit.Plan(ctx, plantest.WideVGG(t, 80), tsplit.Options{Budget: 64 << 20, Train: train})
	if err != nil || res.FusedTiles != "" {
		t.Errorf("64 MiB: fused tiles %q, %v", res.FusedTiles, err)
	}
}

// Issue 15 must-show 1: torchvision's VGG-16 conv body with a global
// pool and a Linear (scripts/export_torch_models.py vgg16_gap, dynamic
// height and width), one image, the gtx-1080ti with 10 GiB: the plain
// step needs 94 GiB at 8192² and 586 GiB at 20480², and tsplit plans
// each size with fused tiles (the rest swapped and split where the
// tiles alone do not fit). VGG-19 likewise at 10240². The planning
// time (issue: within 10 s each) is logged, not asserted: it is
// measured on a machine other tests share.
func TestPlanFusedTilesVGG(t *testing.T) {
	oracle.Integration(t, "plans of VGG on images up to 20480², seconds each")
	for _, c := range []struct {
		model string
		n     int64
	}{
		{"vgg16_gap", 8192}, {"vgg16_gap", 10240}, {"vgg16_gap", 20480}, {"vgg19_gap", 10240},
	} {
		path := oracle.TorchModel(t, c.model)
		res, err := tsplit.PlanFile(context.Background(), path, tsplit.Options{Batch: 1, Dims: map[string]int64{"height": c.n, "width": c.n},
			Device: "gtx-1080ti", Budget: 10 << 30, Train: tsplit.TrainOptions{Loss: "mse"}})
		if err != nil {
			t.Errorf("%s %d²: %v", c.model, c.n, err)
			continue
		}
		t.Logf("%s %d²: base peak %.2f GiB, planned peak %.2f GiB (pool %.2f), %d swapped, %d split; fused tiles %s; step %.1f s predicted (%.1f s unconstrained); planning %.1f s",
			c.model, c.n, gib(res.BasePeak), gib(res.Peak), gib(res.Pool), res.Swapped, res.Split, res.FusedTiles, res.Step, res.BaseStep, res.PlanningSeconds)
		if res.FusedTiles == "" || res.Pool > 10<<30 || res.BasePeak <= 10<<30 || res.Step <= 0 {
			t.Errorf("%s %d²: %+v", c.model, c.n, res)
		}
	}
}

func gib(b int64) float64 { return float64(b) / (1 << 30) }
