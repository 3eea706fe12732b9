package executor

import (
	"slices"
	"time"
)

// StreamStats is what one stream did during a run.
type StreamStats struct {
	// Tasks is the number of ops it ran and Busy their summed time.
	Tasks int
	Busy  time.Duration
	// Idle is the summed gap between one task's end and the next one's
	// start; Wait the part of it during which the next task had been
	// issued but waited for its inputs (a compute op for a swap-in, a
	// swap-out for the op computing its tensor).
	Idle, Wait time.Duration
	// Stall is the idle time beyond the stream's median gap: the time
	// the stream stood still for a reason other than the runtime's
	// ordinary cost of handing it the next task — waiting for a copy, or
	// for an issue held back by a free that waits for one. For the
	// compute stream it is what the simulator calls the stall.
	Stall time.Duration
}

// Summary is a run's timeline by stream.
type Summary struct {
	// Step is the time from the first op's start to the last op's end:
	// what the simulator predicts (setup and reading the outputs back
	// are outside it).
	Step                    time.Duration
	Compute, D2H, H2D, Host StreamStats
}

// Summarize sums a run's timeline per stream.
func Summarize(tl []Record) Summary {
	var s Summary
	byStream := map[string][]*Record{}
	first, last := time.Duration(-1), time.Duration(0)
	for i := range tl {
		r := &tl[i]
		if r.Op == nil || r.Stream == "" {
			continue // not issued: the run stopped early
		}
		byStream[r.Stream] = append(byStream[r.Stream], r)
		if first < 0 || r.Start < first {
			first = r.Start
		}
		last = max(last, r.End)
	}
	if first >= 0 {
		s.Step = last - first
	}
	s.Compute = streamStats(byStream[Compute])
	s.D2H = streamStats(byStream[D2H])
	s.H2D = streamStats(byStream[H2D])
	s.Host = streamStats(byStream[Host])
	return s
}

// streamStats sums one stream's records, which it ran in issue order.
func streamStats(rs []*Record) StreamStats {
	st := StreamStats{Tasks: len(rs)}
	gaps := make([]time.Duration, 0, len(rs))
	for k, r := range rs {
		st.Busy += r.End - r.Start
		if k == 0 {
			continue
		}
		prev := rs[k-1].End
		gap := max(r.Start-prev, 0)
		gaps = append(gaps, gap)
		st.Idle += gap
		st.Wait += max(r.Start-max(prev, r.Issued), 0)
	}
	if len(gaps) > 0 {
		med := slices.Clone(gaps)
		slices.Sort(med)
		m := med[len(med)/2]
		for _, g := range gaps {
			st.Stall += max(g-m, 0)
		}
	}
	return st
}
