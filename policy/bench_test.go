package policy

import (
	"fmt"
	"testing"
	"time"

	"github.com/tsplit/tsplit/compiler"
	"github.com/tsplit/tsplit/internal/units"
	"github.com/tsplit/tsplit/ir"
	"github.com/tsplit/tsplit/memory"
	"github.com/tsplit/tsplit/passes"
	"github.com/tsplit/tsplit/zoo"
)

// benchBERTLarge builds the training step (SGD) of BERT-large at batch
// 32 and sequence 512 with the given number of layers, weights as graph
// inputs (planning never needs their data).
func benchBERTLarge(b *testing.B, layers int) *ir.Model {
	b.Helper()
	mp, err := zoo.Build("bert-large", zoo.Config{Batch: 32, SeqLen: 512, Layers: layers, WeightsAsInputs: true})
	if err != nil {
		b.Fatal(err)
	}
	m, err := compiler.FromProto(mp, "", compiler.Options{Batch: 32})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := compiler.BuildTrainingStep(m, compiler.TrainOptions{Optimizer: "sgd"}); err != nil {
		b.Fatal(err)
	}
	return m
}

// BenchmarkPlanBERTLarge times the planning pipeline (Schedule,
// PlanMemory, Layout) on the BERT-large training graph with a budget of
// half its base peak, at 12, 24 (BERT-large itself) and 48 layers, so
// that `make bench` shows how planning time grows with the graph. Only
// the pipeline is timed; building the graph is not. The target is
// under a second at 24 layers.
func BenchmarkPlanBERTLarge(b *testing.B) {
	for _, layers := range []int{12, 24, 48} {
		b.Run(fmt.Sprintf("layers=%d", layers), func(b *testing.B) {
			probe := benchBERTLarge(b, layers)
			if err := passes.NewState(probe, nil).Run(passes.Schedule); err != nil {
				b.Fatal(err)
			}
			mem, err := memory.Analyze(probe.Graph, memory.Options{})
			if err != nil {
				b.Fatal(err)
			}
			ops := len(probe.Graph.Order())
			budget := mem.Peak / 2
			probe = nil
			var total time.Duration
			var last *passes.State
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				m := benchBERTLarge(b, layers)
				s := passes.NewState(m, &passes.Options{Budget: budget, Policy: Tsplit})
				b.StartTimer()
				start := time.Now()
				if err := s.Run(passes.Pipeline...); err != nil {
					b.Fatal(err)
				}
				total += time.Since(start)
				last = s
			}
			b.StopTimer()
			r := last.Report
			b.ReportMetric(float64(ops), "ops")
			b.ReportMetric(float64(r.Swapped), "swapped")
			b.ReportMetric(float64(r.Recomputed), "recomputed")
			var per string
			for _, tm := range last.Timings {
				per += fmt.Sprintf(" %s %v", tm.Pass, tm.Duration.Round(time.Microsecond))
			}
			b.Logf("bert-large, %d layers (%d ops): base peak %s, budget %s, planned peak %s (pool %s); %d swapped, %d recomputed, %d rounds; simulated step %.2f s vs %.2f s; planning %v per run (%d runs; last:%s)",
				layers, ops, units.Bytes(r.BasePeak), units.Bytes(budget), units.Bytes(r.Peak), units.Bytes(r.Pool),
				r.Swapped, r.Recomputed, r.Rounds, r.Time, r.BaseTime, (total / time.Duration(b.N)).Round(time.Millisecond), b.N, per)
		})
	}
}
