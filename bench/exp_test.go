package bench

import (
	"testing"
	"time"

	"github.com/tsplit/tsplit/compiler"
	"github.com/tsplit/tsplit/passes"
	"github.com/tsplit/tsplit/profile"
	"github.com/tsplit/tsplit/zoo"
)

func TestExp(t *testing.T) {
	prof, _ := profile.Lookup("titan-rtx")
	for _, c := range []struct{ name string; batch int64 }{{"vgg16", 512}, {"vgg16", 2048}, {"resnet50", 512}, {"resnet101", 512}, {"inception", 256}, {"bert-base", 256}} {
		for _, pol := range passes.Policies() {
			t0 := time.Now()
			mp, err := zoo.Build(c.name, zoo.Config{Batch: c.batch, WeightsAsInputs: true})
			if err != nil { t.Fatal(err) }
			m, err := compiler.FromProto(mp, "", compiler.Options{Batch: c.batch})
			if err != nil { t.Fatal(err) }
			t1 := time.Now()
			if _, err := compiler.BuildTrainingStep(m, compiler.TrainOptions{}); err != nil { t.Fatal(err) }
			t2 := time.Now()
			s := passes.NewState(m, &passes.Options{Profile: prof, Policy: pol})
			err = s.Run(passes.Pipeline...)
			t3 := time.Now()
			r := s.Report
			es := ""
			if err != nil { es = err.Error(); if len(es) > 150 { es = es[:150] } }
			t.Logf("%s b=%d %s: build %v train %v plan %v ops=%d basepeak=%.2fGiB peak=%.2fGiB host=%.2fGiB t=%.4f base=%.4f sw=%d rc=%d sp=%d err=%s", c.name, c.batch, pol, t1.Sub(t0).Round(time.Millisecond), t2.Sub(t1).Round(time.Millisecond), t3.Sub(t2).Round(time.Millisecond), len(m.Graph.Order()), float64(r.BasePeak)/(1<<30), float64(r.Peak)/(1<<30), float64(r.HostPeak)/(1<<30), r.Time, r.BaseTime, r.Swapped, r.Recomputed, r.Split, es)
		}
	}
}
