package policy

import (
	"math"
	"testing"
)

// TestLinkQueueChargesTheCopiesItPushes: a copy issued before a planned
// one goes first on the link, so the planned copy ends later and, past
// its free, the step waits. The queue must charge the new copy that
// wait, which Eq. 3's occupancy (the new copy hidden in the link time
// left free) does not see.
func TestLinkQueueChargesTheCopiesItPushes(t *testing.T) {
	near := func(got, want float64) bool { return math.Abs(got-want) < 1e-12 }
	lq := &linkQueue{}
	// planned first: issued at position 10, ready at 1 s, 1 s on the
	// link, freed (the host waits for it) at 2 s: hidden exactly
	lq.add(lq.at(10), linkCopy{issue: 10, ready: 1, dur: 1, due: 2})
	if c := lq.q[0]; !near(c.start, 1) || !near(c.fin, 2) {
		t.Fatalf("first copy runs %g..%g s, want 1..2 s", c.start, c.fin)
	}
	// a candidate issued earlier, at position 5, ready at 0.5 s, 1 s long
	k := lq.at(5)
	if k != 0 {
		t.Fatalf("a copy issued at 5 takes index %d, want 0 (ahead of the one issued at 10)", k)
	}
	fin := lq.finish(k, 0.5, 1)
	if !near(fin, 1.5) {
		t.Fatalf("the candidate ends at %g s, want 1.5 s (the link is free before it)", fin)
	}
	// it pushes the planned copy to 1.5..2.5 s: half a second past its free
	if d := lq.delay(k, fin); !near(d, 0.5) {
		t.Fatalf("delay %g s, want 0.5 s", d)
	}
	lq.add(k, linkCopy{issue: 5, ready: 0.5, dur: 1, due: 3})
	if c := lq.q[1]; c.issue != 10 || !near(c.start, 1.5) || !near(c.fin, 2.5) {
		t.Fatalf("after the insert the planned copy runs %g..%g s (issued at %d), want 1.5..2.5 s", c.start, c.fin, c.issue)
	}
	// a copy issued later waits for both; one issued at the same
	// position as the first goes ahead of it (inserted before it)
	if k := lq.at(10); k != 1 {
		t.Fatalf("a copy issued at 10 takes index %d, want 1", k)
	}
	if got := lq.finish(lq.at(11), 0, 0.25); !near(got, 2.75) {
		t.Fatalf("a copy issued at 11 ends at %g s, want 2.75 s (after the 2.5 s copy)", got)
	}
	// a copy that fits before the next one's start delays nothing
	lq2 := &linkQueue{}
	lq2.add(0, linkCopy{issue: 10, ready: 5, dur: 1, due: 6})
	if d := lq2.delay(lq2.at(3), lq2.finish(lq2.at(3), 1, 1)); d != 0 {
		t.Fatalf("a copy done at 2 s delays one starting at 5 s by %g s", d)
	}
	// backlog: a split's copies at position 11, ready at 2 s, wait
	// behind the 2.5 s copy
	if b := lq.backlog(11, 2, 0.5); !near(b, 0.5) {
		t.Fatalf("backlog %g s, want 0.5 s", b)
	}
}
