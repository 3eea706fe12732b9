package report

import (
	"testing"
	"time"
	"os"
	"strconv"

	"github.com/tsplit/tsplit/compiler"
	"github.com/tsplit/tsplit/passes"
	"github.com/tsplit/tsplit/profile"
	"github.com/tsplit/tsplit/memory"
	"github.com/tsplit/tsplit/zoo"
)

func TestScratch(t *testing.T) {
	for ci, c := range []struct{ name string; cfg zoo.Config; batch int64; frac float64 }{
		{"resnet50", zoo.SmallConfig("resnet50"), 16, envf("FRAC", 0.7)},
		{"bert-large", zoo.Config{SeqLen: 512, WeightsAsInputs: true}, 32, 0.5},
	} {
		t0 := time.Now(); if os.Getenv("ONLY") != "" && strconv.Itoa(ci) != os.Getenv("ONLY") { continue }
		mp, err := zoo.Build(c.name, c.cfg)
		if err != nil { t.Fatal(err) }
		m, err := compiler.FromProto(mp, "", compiler.Options{Batch: c.batch})
		if err != nil { t.Fatal(err) }
		if _, err := compiler.BuildTrainingStep(m, compiler.TrainOptions{}); err != nil { t.Fatal(err) }
		mem, err := memory.Analyze(m.Graph, memory.Options{})
		if err != nil { t.Fatal(err) }
		prof, _ := profile.Lookup("titan-rtx")
		budget := int64(float64(mem.Peak) * c.frac)
		s := passes.NewState(m, &passes.Options{Budget: budget, Profile: prof})
		if err := s.Run(passes.Pipeline...); err != nil { t.Fatal(err) }
		r := s.Report
		t.Logf("%s: ops base %d planned %d, peak %d -> %d budget %d pool %d host %d time %g -> %g, sw %d rc %d sp %d dec %d rounds %d (%v)", c.name, len(r.Base), len(r.Planned), r.BasePeak, r.Peak, r.Budget, r.Pool, r.HostPeak, r.BaseTime, r.Time, r.Swapped, r.Recomputed, r.Split, len(r.Decisions), r.Rounds, time.Since(t0))
		kinds := map[string]int{}
		phases := map[string]int{}
		for _, p := range r.Planned { kinds[p.Kind]++; phases[p.Phase]++ }
		t.Logf("kinds %v phases %v", kinds, phases)
		for i, d := range r.Decisions { if i < 5 { t.Logf("%+v", d) } }
		for i, p := range r.Planned { if i < 3 || (p.Kind != "" && kinds[p.Kind] > 0) { t.Logf("%d %+v", i, p); kinds[p.Kind] = 0 } }
	}
}

func envf(k string, d float64) float64 { if v, err := strconv.ParseFloat(os.Getenv(k), 64); err == nil { return v }; return d }
