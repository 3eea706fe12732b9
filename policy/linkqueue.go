package policy

import (
	"sort"

	"github.com/tsplit/tsplit/ir"
	"github.com/tsplit/tsplit/passes"
)

// linkQueue is the device-to-host link as the simulator and the runtime
// run it: one copy at a time, in the order the copies are issued, each
// starting once its tensor is made and the copies issued before it are
// done (passes.Simulate). The host waits for a copy after its SwapOut's
// release window (its due time), so a copy that ends later stalls the
// step by the difference.
//
// Eq. 3 with the link's occupancy (Oc_u) hides a new swap-out in the
// link time the copies planned before it left free. That is a queue
// only when copies are planned in the order they are issued; a swap
// chosen later but issued earlier goes first on the link and pushes
// back the copies already planned behind it, past their frees
// (ResNet-50 b289 at half its peak with windows of up to 64 ops: the
// planner saw every copy hidden, the simulated step waited 24 ms on
// them). The queue charges a candidate both: its own wait and the
// waits it adds to the copies issued after it.
type linkQueue struct {
	q []linkCopy // by issue position; at one position, the later planned first
}

type linkCopy struct {
	issue      int     // position of the op the SwapOut is inserted before
	ready      float64 // its tensor made
	dur        float64 // the transfer
	due        float64 // the end of the op after which the host waits for it
	start, fin float64 // in the queue as it stands
}

// newLinkQueue seeds the queue with the copies of earlier rounds, as the
// round's timeline ran them.
func newLinkQueue(order []*ir.Op, tl *passes.Timeline) *linkQueue {
	lq := &linkQueue{}
	n := len(order)
	for u, op := range order {
		if u >= len(tl.Stream) || tl.Stream[u] != passes.StreamD2H {
			continue
		}
		r := min(u+ir.SwapOutRelease(op), n-1)
		lq.q = append(lq.q, linkCopy{issue: u, ready: tl.Start[u], dur: tl.End[u] - tl.Start[u], due: tl.End[r],
			start: tl.Start[u], fin: tl.End[u]})
	}
	return lq
}

// at is the index a copy issued at position issue takes: ahead of the
// copies issued at or after it (passes.InsertSwapRecompute inserts a
// SwapOut right after its anchor, before the ones inserted there
// earlier).
func (lq *linkQueue) at(issue int) int {
	return sort.Search(len(lq.q), func(k int) bool { return lq.q[k].issue >= issue })
}

// finish is when a copy of dur seconds, ready at ready and taking index
// k, ends.
func (lq *linkQueue) finish(k int, ready, dur float64) float64 {
	start := ready
	if k > 0 {
		start = max(start, lq.q[k-1].fin)
	}
	return start + dur
}

// delay is the wait a copy ending at fin, taking index k, adds to the
// copies behind it: each starts no earlier than the one before it ends,
// until one already started later than that.
func (lq *linkQueue) delay(k int, fin float64) float64 {
	var extra float64
	for j := k; j < len(lq.q); j++ {
		c := &lq.q[j]
		nf := max(c.ready, fin) + c.dur
		if nf <= c.fin {
			break
		}
		extra += max(nf-c.due, 0) - max(c.fin-c.due, 0)
		fin = nf
	}
	return extra
}

// add puts c into the queue at index k and moves the copies behind it.
func (lq *linkQueue) add(k int, c linkCopy) {
	c.fin = lq.finish(k, c.ready, c.dur)
	c.start = c.fin - c.dur
	lq.q = append(lq.q, linkCopy{})
	copy(lq.q[k+1:], lq.q[k:])
	lq.q[k] = c
	fin := c.fin
	for j := k + 1; j < len(lq.q); j++ {
		d := &lq.q[j]
		s := max(d.ready, fin)
		if s <= d.start {
			break
		}
		d.start, d.fin = s, s+d.dur
		fin = d.fin
	}
}

// backlog is what copies of dur seconds issued at position issue, ready
// at ready, wait behind the copies issued before them and add to those
// issued after them (a split's copies to the host).
func (lq *linkQueue) backlog(issue int, ready, dur float64) float64 {
	k := lq.at(issue)
	fin := lq.finish(k, ready, dur)
	return fin - dur - ready + lq.delay(k, fin)
}
