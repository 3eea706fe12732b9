package measure

import (
	"fmt"
	"sync"
	"time"

	"github.com/tsplit/tsplit/executor"
	"github.com/tsplit/tsplit/executor/cpu"
	"github.com/tsplit/tsplit/ir"
)

// The pacing probe: copies of probeBytes, each paced to probeTime (the
// order of a swap of a few hundred KiB on an emulated link), while the
// step computes, until probeSamples were taken or probeSteps steps ran
// (Run).
const (
	probeBytes   = 64 << 10
	probeTime    = 200 * time.Microsecond
	probeSamples = 256
	probeSteps   = 10
)

// Probe measures how much longer than asked a paced copy takes while
// the device computes: a copy stream sleeps out the link's time and
// wakes up late, by more when the cores are busy, so it is measured
// with a training step running. Its copies are small (64 KiB every
// 200 µs), so it takes little from the step it watches.
type Probe struct {
	mu      sync.Mutex
	samples []float64
	stop    chan struct{}
	wg      sync.WaitGroup
}

// StartProbe starts making paced copies on a device of its own.
func StartProbe() (*Probe, error) {
	dev, err := cpu.New(probeBytes)
	if err != nil {
		return nil, fmt.Errorf("measure: %w", err)
	}
	host := make([]byte, probeBytes)
	ref := executor.Ref{DType: ir.Uint8, Shape: ir.Shape{probeBytes}, Bytes: probeBytes}
	bw := float64(probeBytes) / probeTime.Seconds()
	link := executor.Link{H2D: bw, D2H: bw}
	p := &Probe{stop: make(chan struct{})}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			select {
			case <-p.stop:
				return
			default:
			}
			start := time.Now()
			if err := dev.ToDevice(ref, host); err != nil {
				return
			}
			link.Pace(start, probeBytes, false)
			over := (time.Since(start) - link.Duration(probeBytes, false)).Seconds()
			p.mu.Lock()
			p.samples = append(p.samples, max(over, 0))
			p.mu.Unlock()
		}
	}()
	return p, nil
}

// Samples is the number of copies timed so far.
func (p *Probe) Samples() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.samples)
}

// Stop ends the probe and returns how late, in seconds, each paced copy
// ended. Their mean (Recorder; the longest 2 % left out) is what a copy
// costs beyond its pace on average: most copies end within tens of µs, a tenth of them about a
// millisecond late on a loaded machine (the stream waited for a core),
// and a swap-in just in time for its consumer stalls the step by as
// much (docs/measured.md).
func (p *Probe) Stop() []float64 {
	close(p.stop)
	p.wg.Wait()
	return p.samples
}
