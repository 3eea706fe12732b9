package bound_test

import (
	"context"
	"testing"

	"github.com/tsplit/tsplit"
	"github.com/tsplit/tsplit/bound"
	"github.com/tsplit/tsplit/internal/oracle"
	"github.com/tsplit/tsplit/memory"
	"github.com/tsplit/tsplit/passes"
	"github.com/tsplit/tsplit/profile"
)

// BenchmarkLowerResNet50 times the LP bound of torchvision's resnet50
// training step at batch 64 on titan-rtx (about 2200 ops, 6.24 GiB
// unconstrained) at 4 and 3 GiB — the target is well under a
// second. Building the graph is not timed.
func BenchmarkLowerResNet50(b *testing.B) {
	path := oracle.TorchModel(b, "resnet50")
	ctx := context.Background()
	m, err := tsplit.Load(ctx, path, tsplit.Options{Batch: 64})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := tsplit.Train(ctx, m, tsplit.TrainOptions{}); err != nil {
		b.Fatal(err)
	}
	if err := passes.NewState(m, nil).Run(passes.Schedule); err != nil {
		b.Fatal(err)
	}
	mem, err := memory.Analyze(m.Graph, memory.Options{})
	if err != nil {
		b.Fatal(err)
	}
	prof, err := profile.Lookup("titan-rtx")
	if err != nil {
		b.Fatal(err)
	}
	tl := passes.Simulate(m.Graph, mem, prof)
	for _, gib := range []int64{4, 3} {
		b.Run(map[int64]string{4: "4GiB", 3: "3GiB"}[gib], func(b *testing.B) {
			var r *bound.Result
			for i := 0; i < b.N; i++ {
				if r, err = bound.Lower(m.Graph, mem, tl, prof, gib<<30); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(100*r.Added/r.BaseStep, "bound-%")
			b.ReportMetric(float64(r.Rows), "rows")
			b.Logf("%d ops: bound +%.3f ms (+%.2f %%), %d rows × %d columns, %d rounds", len(m.Graph.Order()), r.Added*1e3, 100*r.Added/r.BaseStep, r.Rows, r.Cols, r.Rounds)
		})
	}
}
