package policy

import (
	"context"
	"slices"
	"testing"

	"github.com/tsplit/tsplit/compiler"
	"github.com/tsplit/tsplit/internal/plantest"
	"github.com/tsplit/tsplit/ir"
	"github.com/tsplit/tsplit/passes"
	"github.com/tsplit/tsplit/zoo"
)

// Sub-batching is a layer over any policy's planning: with modnn (as
// tsplitc plans it) and with tsplit, a budget Eq. 3 answers with
// sub-batches gives a step rebuilt as those sub-batches (its metadata
// says so), planned into the budget, with what the layer decided in
// Result.SubBatching and, for modnn, the policy's own findings in
// Result.Detail.
func TestPlanSubBatchedWrapsAnyPolicy(t *testing.T) {
	const name, batch = "vgg16", 32
	build := func(b int64) (*ir.Model, error) {
		mp, err := zoo.Build(name, zoo.SmallConfig(name))
		if err != nil {
			return nil, err
		}
		return compiler.FromProto(mp, "", compiler.Options{Batch: b})
	}
	probe := zooStep(t, name, batch)
	if err := passes.NewState(probe, nil).Run(passes.Schedule); err != nil {
		t.Fatal(err)
	}
	budget := plantest.Peak(t, probe) * 6 / 10
	for _, pol := range []Policy{Modnn, Tsplit} {
		t.Run(pol.Name(), func(t *testing.T) {
			step := zooStep(t, name, batch)
			mb := SubBatchBuild{Forward: build, Train: compiler.TrainOptions{}}
			res, err := PlanSubBatched(context.Background(), step, mb, pol, Options{Budget: budget})
			if err != nil {
				t.Fatal(err)
			}
			sb := res.SubBatching
			if sb == nil || sb.Batch != batch || sb.SubBatch <= 0 || sb.SubBatch >= batch {
				t.Fatalf("budget %d: sub-batching %+v, want Eq. 3 below the batch %d", budget, sb, batch)
			}
			meta, err := compiler.ReadSubBatching(res.Model)
			if err != nil {
				t.Fatal(err)
			}
			var sizes []int64
			if meta != nil {
				sizes = meta.Sizes
			}
			if !slices.Equal(sizes, sb.SubBatches) {
				t.Errorf("the planned step runs sub-batches %v, Result says %v", sizes, sb.SubBatches)
			}
			if r := res.Report; r.Peak > budget || r.Pool > budget || r.Policy != pol.Name() {
				t.Errorf("%s: peak %d, pool %d, budget %d", r.Policy, r.Peak, r.Pool, budget)
			}
			d, ok := res.Detail.(*ModnnResult)
			if ok != (pol == Modnn) || ok && !slices.Equal(d.SubBatches, sb.SubBatches) {
				t.Errorf("Detail %#v for %s (sub-batches %v)", res.Detail, pol.Name(), sb.SubBatches)
			}
			t.Logf("%s: Eq. 3 sub-batch %d, planned sub-batches %v; peak %d of %d", pol.Name(), sb.SubBatch, sb.SubBatches, res.Report.Peak, budget)
		})
	}
}
