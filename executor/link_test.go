package executor_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/tsplit/tsplit/executor"
)

// With an emulated link every copy on the copy streams lasts at least
// the link's time for its bytes (latency included), and the results are
// those of the unpaced run; the summary counts each stream's ops.
func TestLinkPacesCopies(t *testing.T) {
	in := map[string][]byte{"x": floats(swapN*swapN, func(i int) float32 { return float32(i%7)/7 - 0.2 })}
	plain, _, err := run(t, swapped(t, true), 64<<20, in)
	if err != nil {
		t.Fatal(err)
	}
	link := executor.Link{H2D: 2e9, D2H: 1e9, Latency: time.Millisecond}
	x, err := executor.New(swapped(t, true), mustCPU(t, 64<<20), executor.Options{Link: link})
	if err != nil {
		t.Fatal(err)
	}
	res, err := x.Run(in)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range plain.Outputs {
		if !bytes.Equal(res.Outputs[name], want) {
			t.Fatalf("output %s differs on the paced link", name)
		}
	}
	copies := 0
	for _, r := range res.Timeline {
		toHost := r.Stream == executor.D2H
		if !toHost && r.Stream != executor.H2D {
			continue
		}
		copies++
		n := r.Op.Input(0).Bytes()
		if d := r.End - r.Start; d < link.Duration(n, toHost) {
			t.Errorf("%s took %v, the link %v", r.Op.Describe(), d, link.Duration(n, toHost))
		}
	}
	s := executor.Summarize(res.Timeline)
	if copies != 2 || s.D2H.Tasks != 1 || s.H2D.Tasks != 1 || s.Compute.Tasks != 5 || s.Host.Tasks != 0 {
		t.Errorf("%d copies; summary %+v", copies, s)
	}
	if s.Step <= 0 || s.Compute.Busy <= 0 || s.Compute.Busy > s.Step {
		t.Errorf("step %v, compute busy %v", s.Step, s.Compute.Busy)
	}
	if got := (executor.Link{}).Duration(1<<20, true); got != 0 {
		t.Errorf("the zero link paces a copy to %v", got)
	}
}

// Summarize: a stream's idle time is the gaps between its ops, its wait
// the part after the next op was issued, its stall what the gaps exceed
// their median by.
func TestSummarize(t *testing.T) {
	ms := func(x float64) time.Duration { return time.Duration(x * float64(time.Millisecond)) }
	op := swapped(t, false).Graph.Order()[0]
	rec := func(stream string, issued, start, end float64) executor.Record {
		return executor.Record{Op: op, Stream: stream, Issued: ms(issued), Start: ms(start), End: ms(end)}
	}
	tl := []executor.Record{
		rec(executor.Compute, 0, 1, 2),
		rec(executor.Compute, 0, 2.1, 3), // gap 0.1, issued early
		rec(executor.Compute, 0, 3.1, 4), // gap 0.1
		rec(executor.D2H, 0, 2, 2.5),
		rec(executor.Compute, 4.5, 6, 7),  // gap 2: issued 0.5 late, then waited 1.5
		rec(executor.H2D, 3, 5, 5.9),      // the first of its stream: no gap
		rec(executor.D2H, 2.6, 2.7, 2.9),  // gap 0.2, waited 0.1
		rec(executor.Compute, 7, 7.1, 12), // gap 0.1
	}
	s := executor.Summarize(tl)
	near := func(what string, got time.Duration, want float64) {
		if d := got - ms(want); d < -time.Microsecond || d > time.Microsecond {
			t.Errorf("%s: %v, want %vms", what, got, want)
		}
	}
	near("step", s.Step, 11)
	near("compute busy", s.Compute.Busy, 1+0.9+0.9+1+4.9)
	near("compute idle", s.Compute.Idle, 0.1+0.1+2+0.1)
	near("compute wait", s.Compute.Wait, 0.1+0.1+1.5+0.1)
	near("compute stall", s.Compute.Stall, 2-0.1)
	near("d2h idle", s.D2H.Idle, 0.2)
	near("d2h wait", s.D2H.Wait, 0.1)
	if s.Compute.Tasks != 5 || s.D2H.Tasks != 2 || s.H2D.Tasks != 1 {
		t.Errorf("tasks %+v", s)
	}
}
