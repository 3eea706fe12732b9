package bench

import (
	"sync"
	"testing"
)

func TestExp(t *testing.T) {
	cfg, _ := Config{Small: true}.Resolve()
	prof, _ := cfg.DeviceProfile()
	m, _ := LookupModel("resnet50")
	for rep := 0; rep < 3; rep++ {
		pr := newProber(&cfg, prof)
		p, _ := pr.probe(m, 318, 1, "tsplit")
		t.Logf("seq rep %d: ok=%v peak=%d time=%g sw=%d err=%.80s", rep, p.OK, p.Peak, p.Time, p.Swapped, p.Err)
	}
	var wg sync.WaitGroup
	for rep := 0; rep < 4; rep++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pr := newProber(&cfg, prof)
			p, _ := pr.probe(m, 318, 1, "tsplit")
			t.Logf("par rep %d: ok=%v peak=%d time=%g sw=%d err=%.80s", rep, p.OK, p.Peak, p.Time, p.Swapped, p.Err)
		}()
	}
	wg.Wait()
}
