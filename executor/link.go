package executor

import "time"

// Link is an emulated host link: with it, every copy on the D2H and
// H2D streams takes Latency plus its bytes over the bandwidth of its
// direction, however fast the device copies. The stream sleeps out the
// rest of that time after the copy, so the compute stream goes on
// meanwhile: overlap, a saturated link and the stalls it causes happen
// for real on a device (the CPU one) whose own copies are a memory
// copy. Copies before and after the step (weights, inputs, outputs)
// are not paced: they are not part of the step a plan predicts. The
// zero Link paces nothing.
type Link struct {
	// H2D and D2H are bytes per second (0: that direction unpaced).
	H2D, D2H float64
	Latency  time.Duration
}

// Duration is how long a copy of n bytes takes on the link (0 when that
// direction is unpaced).
func (l Link) Duration(n int64, toHost bool) time.Duration {
	bw := l.H2D
	if toHost {
		bw = l.D2H
	}
	if bw <= 0 {
		return 0
	}
	return l.Latency + time.Duration(float64(n)/bw*float64(time.Second))
}

// Pace sleeps until a copy of n bytes begun at start has taken the
// link's time.
func (l Link) Pace(start time.Time, n int64, toHost bool) {
	if d := l.Duration(n, toHost); d > 0 {
		if rest := time.Until(start.Add(d)); rest > 0 {
			time.Sleep(rest)
		}
	}
}
