package memory_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"

	"github.com/tsplit/tsplit/compiler"
	"github.com/tsplit/tsplit/memory"
	"github.com/tsplit/tsplit/zoo"
)

// greedyRule is greedy-by-size stated plainly: tensors by decreasing
// size (earlier start first on ties, then interval order), each at the
// lowest offset where it fits below or between the already placed
// tensors live at the same time, found by sorting those by offset.
// MakeLayout's faster placement must give the same offsets: they are in
// every planned model's layout.
func greedyRule(ivs []memory.Interval) ([]int64, int64) {
	idx := make([]int, len(ivs))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool {
		x, y := ivs[idx[a]], ivs[idx[b]]
		if x.Bytes != y.Bytes {
			return x.Bytes > y.Bytes
		}
		return x.Start < y.Start
	})
	offs := make([]int64, len(ivs))
	var done []int
	var reach int64
	for _, k := range idx {
		type span struct{ off, end int64 }
		var busy []span
		for _, j := range done {
			if ivs[k].Start <= ivs[j].End && ivs[j].Start <= ivs[k].End {
				busy = append(busy, span{offs[j], offs[j] + ivs[j].Bytes})
			}
		}
		sort.Slice(busy, func(a, b int) bool { return busy[a].off < busy[b].off })
		off := int64(0)
		for _, b := range busy {
			if off+ivs[k].Bytes <= b.off {
				break
			}
			off = max(off, b.end)
		}
		offs[k] = off
		reach = max(reach, off+ivs[k].Bytes)
		done = append(done, k)
	}
	return offs, reach
}

// randomIntervals makes n lifetimes over ops positions with sizes drawn
// from a few values, so that equal sizes, equal starts and equal
// offsets (the tie cases) are common; some are empty.
func randomIntervals(rng *rand.Rand, n, ops int) []memory.Interval {
	sizes := []int64{0, 256, 512, 1024, 4096, 65536}
	ivs := make([]memory.Interval, n)
	for i := range ivs {
		s := rng.IntN(ops+1) - 1
		e := min(max(s, 0)+rng.IntN(ops/4+1), ops)
		ivs[i] = memory.Interval{Bytes: sizes[rng.IntN(len(sizes))] * int64(1+rng.IntN(3)), Start: s, End: e}
	}
	return ivs
}

func TestGreedyBySizeMatchesRule(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for trial := 0; trial < 300; trial++ {
		m := &memory.Model{Intervals: randomIntervals(rng, 1+rng.IntN(120), 1+rng.IntN(40))}
		got, gotReach := m.GreedyBySize()
		want, wantReach := greedyRule(m.Intervals)
		if gotReach != wantReach || !slices.Equal(got, want) {
			t.Fatalf("trial %d (%d intervals): reach %d, want %d; offsets %v, want %v", trial, len(m.Intervals), gotReach, wantReach, got, want)
		}
	}
}

// trainingStep is the memory model of a zoo model's CI-sized training
// step (SGD) at batch: the interval sets the planner lays out.
func trainingStep(tb testing.TB, name string, batch int64) *memory.Model {
	tb.Helper()
	cfg := zoo.SmallConfig(name)
	cfg.Batch, cfg.WeightsAsInputs = batch, true
	mp, err := zoo.Build(name, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	g, err := compiler.FromProto(mp, "", compiler.Options{Batch: batch})
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := compiler.BuildTrainingStep(g, compiler.TrainOptions{}); err != nil {
		tb.Fatal(err)
	}
	m, err := memory.Analyze(g.Graph, memory.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	return m
}

func TestGreedyBySizeMatchesRuleOnTrainingSteps(t *testing.T) {
	for _, name := range []string{"resnet50", "bert-base"} {
		m := trainingStep(t, name, 8)
		got, gotReach := m.GreedyBySize()
		want, wantReach := greedyRule(m.Intervals)
		if gotReach != wantReach || !slices.Equal(got, want) {
			t.Errorf("%s (%d intervals): reach %d, want %d, or the offsets differ", name, len(m.Intervals), gotReach, wantReach)
		}
		l := m.MakeLayout()
		if _, err := m.Placement(l); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// BenchmarkMakeLayout times the static layout (best-fit replay and
// greedy-by-size) of CI-sized training steps, the layout the planner
// computes for every candidate plan.
func BenchmarkMakeLayout(b *testing.B) {
	for _, name := range []string{"resnet50", "bert-base", "inception"} {
		m := trainingStep(b, name, 32)
		b.Run(fmt.Sprintf("%s/%d-intervals", name, len(m.Intervals)), func(b *testing.B) {
			for b.Loop() {
				m.MakeLayout()
			}
		})
	}
}
