package tsplit_test

import (
	"context"
	"testing"

	"github.com/tsplit/tsplit"
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
