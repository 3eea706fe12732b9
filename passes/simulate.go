package passes

import (
	"sort"

	"github.com/tsplit/tsplit/ir"
	"github.com/tsplit/tsplit/memory"
	"github.com/tsplit/tsplit/profile"
)

// Timeline is a simulated training step.
type Timeline struct {
	// Start and End of each op by position, seconds from the step start.
	Start, End []float64
	// Stream of each op: StreamCompute, StreamD2H, StreamH2D or StreamHost.
	Stream []int
	// StepTime is when the last op ends.
	StepTime float64
	// ComputeTime is the sum of compute op times: the step time when
	// nothing waits (no transfers, no stalls).
	ComputeTime float64
	// OutOcc and InOcc are Oc_u of TSPLIT Eq. 3 per position: the
	// fraction of op u's compute interval during which the D2H (resp.
	// H2D) link is busy.
	OutOcc, InOcc []float64
	// Stall is the compute-stream idle time caused by waiting for
	// transfers (the ΔT of swapping).
	Stall float64
	// Wait is the compute stream's idle time just before each op, and
	// Blame the position of the op it waited for (-1: none): the
	// producer of its last-ready input, or the task a free before it
	// waited on. Simulate-and-repair charges a swap the waits its
	// copies cause.
	Wait  []float64
	Blame []int
}

// Stream indices of Timeline.Stream.
const (
	StreamCompute = iota
	StreamD2H
	StreamH2D
	StreamHost // host-placed ops (pieces of split tensors in host memory)
)

// Simulate runs a discrete-event simulation of the three streams over
// the graph's order, mirroring the executor: ops are issued in order by
// a host thread; each stream runs its ops one at a time once their
// inputs are ready; after op i the host frees the tensors whose life
// ends there and first waits for every task that touched them, so a
// swap-out that has not finished delays the next issue — exactly the
// executor's rule. Op times come from the profile, and so does the
// delay with which a copy waiting on another stream starts (WakeLatency:
// none on a GPU, a goroutine's wait for a core on the CPU device).
func Simulate(g *ir.Graph, mem *memory.Model, p *profile.Profile) *Timeline {
	order := g.Order()
	n := len(order)
	tl := &Timeline{Start: make([]float64, n), End: make([]float64, n), Stream: make([]int, n),
		OutOcc: make([]float64, n), InOcc: make([]float64, n), Wait: make([]float64, n), Blame: make([]int, n)}
	ready := make([]float64, g.NumValueIDs())
	readyBy := make([]int, g.NumValueIDs()) // position of the producer
	touch := make([]float64, len(mem.Intervals))
	touchBy := make([]int, len(mem.Intervals)) // position of the last task
	var host float64
	hostBy := -1
	free := [4]float64{}
	// Frees after each position, from the memory model's events.
	freesAt := make([][]int, n)
	for _, e := range mem.Events {
		if e.Free && e.Pos >= 0 && e.Pos < n {
			freesAt[e.Pos] = append(freesAt[e.Pos], e.Interval)
		}
	}
	// A copy (or host op) waiting for a task of another stream starts
	// WakeLatency after it ends (profile.Profile.WakeLatency; 0 on a
	// GPU): on the CPU device the task that ends readies the copy's
	// goroutine and goes on running, and the copy waits for a core. A
	// compute op or the issuing thread waiting for a copy resumes at
	// once: the copy's goroutine stops when it is done.
	wake := p.WakeLatency
	readyOn := make([]int8, g.NumValueIDs()) // stream of the producer + 1 (0: none)
	for i, op := range order {
		tl.Blame[i] = -1
		var st int
		var dur float64
		switch ir.CopyOf(op) {
		case ir.ToHost:
			st, dur = StreamD2H, p.TransferTime(op.Input(0).Bytes(), true)
		case ir.ToDevice:
			st, dur = StreamH2D, p.TransferTime(op.Input(0).Bytes(), false)
		case ir.OnHost:
			st, dur = StreamHost, p.HostWorkTime(profile.OpWork(op))
			if _, view := ir.ViewOf(op); view || ir.InPlaceConcat(op) {
				dur = 0 // a view, or a merge its pieces were written into
			}
		default:
			st, dur = StreamCompute, p.OpTime(op)
			tl.ComputeTime += dur
		}
		deps, depBy := host, hostBy
		for _, v := range op.Inputs() {
			if v == nil {
				continue
			}
			t := ready[v.ID]
			if on := int(readyOn[v.ID]) - 1; st != StreamCompute && on >= 0 && on != st {
				t += wake
			}
			if t > deps {
				deps, depBy = t, readyBy[v.ID]
			}
		}
		start := max(deps, free[st])
		if st == StreamCompute && start > free[st] {
			tl.Stall += start - free[st] // idle compute stream: waiting on a transfer
			tl.Wait[i], tl.Blame[i] = start-free[st], depBy
		}
		end := start + dur
		free[st] = end
		tl.Start[i], tl.End[i], tl.Stream[i] = start, end, st
		touched := func(idx int) {
			if idx >= 0 && end >= touch[idx] {
				touch[idx], touchBy[idx] = end, i
			}
		}
		for _, v := range op.Outputs() {
			if v != nil {
				ready[v.ID], readyBy[v.ID], readyOn[v.ID] = end, i, int8(st+1)
				touched(mem.ByValue[v.ID])
			}
		}
		for _, v := range op.Inputs() {
			if v != nil {
				touched(mem.ByValue[v.ID])
			}
		}
		touched(mem.WorkspaceAt[i])
		for _, idx := range freesAt[i] {
			if touch[idx] > host {
				host, hostBy = touch[idx], touchBy[idx]
			}
		}
		tl.StepTime = max(tl.StepTime, end)
	}
	occupancy(tl)
	return tl
}

// occupancy fills OutOcc and InOcc: for each compute op, the share of
// its interval covered by transfers on each link. Transfers on one link
// never overlap and start in order, so covered time is a difference of
// a prefix sum found by binary search.
func occupancy(tl *Timeline) {
	var outs, ins [][2]float64
	for i, st := range tl.Stream {
		switch st {
		case StreamD2H:
			outs = append(outs, [2]float64{tl.Start[i], tl.End[i]})
		case StreamH2D:
			ins = append(ins, [2]float64{tl.Start[i], tl.End[i]})
		}
	}
	outBusy, inBusy := busyBefore(outs), busyBefore(ins)
	for i, st := range tl.Stream {
		if st != StreamCompute {
			continue
		}
		d := tl.End[i] - tl.Start[i]
		if d <= 0 {
			continue
		}
		tl.OutOcc[i] = min(1, (outBusy(tl.End[i])-outBusy(tl.Start[i]))/d)
		tl.InOcc[i] = min(1, (inBusy(tl.End[i])-inBusy(tl.Start[i]))/d)
	}
}

// busyBefore returns B(t), the link's busy time before t, for disjoint
// intervals sorted by start.
func busyBefore(iv [][2]float64) func(t float64) float64 {
	prefix := make([]float64, len(iv)+1)
	for k, x := range iv {
		prefix[k+1] = prefix[k] + (x[1] - x[0])
	}
	return func(t float64) float64 {
		// Intervals starting before t.
		k := sort.Search(len(iv), func(j int) bool { return iv[j][0] >= t })
		if k == 0 {
			return 0
		}
		last := iv[k-1]
		return prefix[k-1] + min(t, last[1]) - last[0]
	}
}
