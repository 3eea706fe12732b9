package measure

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/tsplit/tsplit/executor"
	"github.com/tsplit/tsplit/executor/cpu"
	"github.com/tsplit/tsplit/ir"
)

// The pacing probe: copies of probeBytes, each paced to probeTime,
// while the step computes, until probeSamples were taken or
// probeSteps steps ran.
const (
	probeBytes   = 64 << 10
	probeTime    = 2 * time.Millisecond
	probeSamples = 64
	probeSteps   = 10
)

// paceOverhead measures how much longer than asked a paced copy takes
// while the device computes: a copy stream sleeps out the link's time
// and wakes up late, by more when the cores are busy, so it is measured
// with the training step running. It returns the mean, in seconds: a
// step's time adds up every copy's delay, the rare long ones (the
// stream waited for a core) included.
func paceOverhead(ctx context.Context, x *executor.Executor, inputs map[string][]byte) (float64, error) {
	dev, err := cpu.New(probeBytes)
	if err != nil {
		return 0, fmt.Errorf("measure: %w", err)
	}
	host := make([]byte, probeBytes)
	ref := executor.Ref{DType: ir.Uint8, Shape: ir.Shape{probeBytes}, Bytes: probeBytes}
	bw := float64(probeBytes) / probeTime.Seconds()
	link := executor.Link{H2D: bw, D2H: bw}
	var (
		mu      sync.Mutex
		samples []float64
		wg      sync.WaitGroup
	)
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			start := time.Now()
			if err := dev.ToDevice(ref, host); err != nil {
				return
			}
			link.Pace(start, probeBytes, false)
			over := (time.Since(start) - link.Duration(probeBytes, false)).Seconds()
			mu.Lock()
			samples = append(samples, max(over, 0))
			mu.Unlock()
		}
	}()
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(samples)
	}
	for step := 0; step < probeSteps && count() < probeSamples; step++ {
		if _, err := x.RunContext(ctx, inputs); err != nil {
			close(stop)
			wg.Wait()
			return 0, fmt.Errorf("measure: %w", err)
		}
	}
	close(stop)
	wg.Wait()
	var sum float64
	for _, x := range samples {
		sum += x
	}
	return sum / float64(max(len(samples), 1)), nil
}
