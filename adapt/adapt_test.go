package adapt_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/tsplit/tsplit"
	"github.com/tsplit/tsplit/adapt"
	"github.com/tsplit/tsplit/executor"
	"github.com/tsplit/tsplit/ir"
	"github.com/tsplit/tsplit/memory"
)

// plan is a small ResNet's training step planned by TFLMS (78 swaps), whose
// swap-ins start a few ops before their use.
func plan(t *testing.T) (*ir.Model, int64) {
	t.Helper()
	r, err := tsplit.PlanFile(context.Background(), "../testdata/onnx/resnet18-small.onnx",
		tsplit.Options{Batch: 16, Budget: 2 << 20, Policy: "tflms"})
	if err != nil {
		t.Fatal(err)
	}
	if r.Swapped == 0 {
		t.Fatal("the plan swaps nothing")
	}
	return r.Model, r.Budget
}

// timeline makes up a run of m's order: every compute op takes 1 ms on
// the compute stream, and the first compute op reading a swap-in stands
// ready for stall before the copy (5 ms) ends.
func timeline(m *ir.Model, stall time.Duration) []executor.Record {
	order := m.Graph.Order()
	tl := make([]executor.Record, len(order))
	pos := m.Graph.Position()
	waits := map[int]bool{}
	for i, op := range order {
		if ir.CopyOf(op) != ir.ToDevice {
			continue
		}
		first := -1
		for _, u := range op.Output(0).Uses() {
			if j := pos[u.Op.ID]; ir.CopyOf(u.Op) == ir.NoCopy && (first < 0 || j < first) {
				first = j
			}
		}
		if first >= 0 && first > i {
			waits[first] = true
		}
	}
	var now time.Duration
	for i, op := range order {
		r := &tl[i]
		r.Pos, r.Op, r.Issued = i, op, now
		switch ir.CopyOf(op) {
		case ir.NoCopy:
			r.Stream = executor.Compute
			if waits[i] {
				now += stall
			}
			r.Start, r.End = now, now+time.Millisecond
			now = r.End
		case ir.ToHost:
			r.Stream, r.Start, r.End = executor.D2H, now, now
		case ir.ToDevice:
			r.Stream = executor.H2D
		default:
			r.Stream, r.Start, r.End = executor.Host, now, now
		}
	}
	// A copy ends when its first reader starts.
	for i, op := range order {
		if ir.CopyOf(op) != ir.ToDevice {
			continue
		}
		end := tl[len(tl)-1].End
		for _, u := range op.Output(0).Uses() {
			if j := pos[u.Op.ID]; tl[j].Stream == executor.Compute {
				end = min(end, tl[j].Start)
			}
		}
		tl[i].Start, tl[i].End = end-5*time.Millisecond, end
	}
	return tl
}

// Measure finds the wait of every swap-in whose reader stood ready.
func TestMeasure(t *testing.T) {
	m, _ := plan(t)
	stalls := adapt.Measure(timeline(m, 2*time.Millisecond))
	if len(stalls) == 0 {
		t.Fatal("no swap-in measured")
	}
	for _, s := range stalls {
		if ir.CopyOf(s.Op) != ir.ToDevice || s.Consumer <= s.Pos || s.Copy != 5*time.Millisecond {
			t.Errorf("%s: at %d, read at %d, copy %v", s.Op.Name, s.Pos, s.Consumer, s.Copy)
		}
		if s.Wait != 2*time.Millisecond {
			t.Errorf("%s: wait %v, want 2ms", s.Op.Name, s.Wait)
		}
	}
	if got := adapt.Total(stalls); got != time.Duration(len(stalls))*2*time.Millisecond {
		t.Errorf("total %v for %d stalls of 2ms", got, len(stalls))
	}
	if none := adapt.Total(adapt.Measure(timeline(m, 0))); none != 0 {
		t.Errorf("a run without waits measured %v", none)
	}
}

// Adjust moves every stalled trigger earlier, never above the swap-out
// it reads, keeps the memory model and the re-derived layout within the
// limit, writes the layout into the model, and does the same from the
// same measurements.
func TestAdjust(t *testing.T) {
	m, budget := plan(t)
	tl := timeline(m, 2*time.Millisecond)
	stalled := 0
	for _, s := range adapt.Measure(tl) {
		if s.Wait > 0 {
			stalled++
		}
	}
	a, b := m.Clone(), m.Clone()
	ra, err := adapt.Adjust(a, timeline(a, 2*time.Millisecond), adapt.Options{Limit: budget})
	if err != nil {
		t.Fatal(err)
	}
	rb, err := adapt.Adjust(b, timeline(b, 2*time.Millisecond), adapt.Options{Limit: budget})
	if err != nil {
		t.Fatal(err)
	}
	if len(ra.Moves) == 0 || len(ra.Moves)+ra.Refused != stalled {
		t.Errorf("%d moves and %d refused for %d stalled swap-ins", len(ra.Moves), ra.Refused, stalled)
	}
	if !slices.EqualFunc(a.Graph.Order(), b.Graph.Order(), func(x, y *ir.Op) bool { return x.Name == y.Name }) ||
		a.Meta[memory.LayoutKey] != b.Meta[memory.LayoutKey] || len(ra.Moves) != len(rb.Moves) {
		t.Error("the same measurements gave two adapted plans")
	}
	checkPlan(t, a, ra, budget)
	pos := a.Graph.Position()
	for _, mv := range ra.Moves {
		var op *ir.Op
		for _, o := range a.Graph.Order() {
			if o.Name == mv.Op {
				op = o
			}
		}
		if op == nil || mv.To >= mv.From || mv.Wait != 2*time.Millisecond {
			t.Errorf("move %+v", mv)
			continue
		}
		// 5 % of a 5 ms copy is less than one 1 ms op: one compute op.
		if src := op.Input(0).Def; pos[op.ID] <= pos[src.ID] {
			t.Errorf("%s moved above the swap-out %s", op.Name, src.Name)
		}
	}
	if d := len(m.Graph.Order()); d != len(a.Graph.Order()) {
		t.Errorf("%d ops after adjusting, %d before", len(a.Graph.Order()), d)
	}

	// At a limit of the plan's own pool, no move may raise the pool.
	c := m.Clone()
	l, err := memory.DecodeLayout(c.Meta[memory.LayoutKey])
	if err != nil {
		t.Fatal(err)
	}
	rc, err := adapt.Adjust(c, timeline(c, 2*time.Millisecond), adapt.Options{Limit: l.Pool})
	if err != nil {
		t.Fatal(err)
	}
	checkPlan(t, c, rc, l.Pool)
	if len(rc.Moves)+rc.Refused != stalled {
		t.Errorf("%d moves and %d refused for %d stalled swap-ins", len(rc.Moves), rc.Refused, stalled)
	}

	// A timeline of another order is refused.
	if _, err := adapt.Adjust(m.Clone(), tl[1:], adapt.Options{Limit: budget}); err == nil {
		t.Error("a timeline one op short was taken")
	}
}

// checkPlan checks an adjusted model against its limit: the memory
// model's peak, the layout's pool and the layout it carries.
func checkPlan(t *testing.T, m *ir.Model, r *adapt.Result, limit int64) {
	t.Helper()
	mem, err := memory.Analyze(m.Graph, memory.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if mem.Peak > limit || mem.Peak != r.Mem.Peak {
		t.Errorf("peak %d (result %d), limit %d", mem.Peak, r.Mem.Peak, limit)
	}
	l, err := memory.DecodeLayout(m.Meta[memory.LayoutKey])
	if err != nil {
		t.Fatal(err)
	}
	if l.Pool > limit || l.Pool != r.Layout.Pool {
		t.Errorf("pool %d (result %d), limit %d", l.Pool, r.Layout.Pool, limit)
	}
	if _, err := mem.Placement(l); err != nil {
		t.Errorf("the layout does not fit the order: %v", err)
	}
	if err := ir.Verify(m); err != nil {
		t.Errorf("the adapted graph: %v", err)
	}
}

// Under a limit below the plan's own pool no move survives: every
// stalled swap-in is held, the order and layout stay the ones that ran.
func TestAdjustHeld(t *testing.T) {
	m, _ := plan(t)
	mem, err := memory.Analyze(m.Graph, memory.Options{})
	if err != nil {
		t.Fatal(err)
	}
	l, err := memory.DecodeLayout(m.Meta[memory.LayoutKey])
	if err != nil {
		t.Fatal(err)
	}
	if l.Pool <= mem.Peak {
		t.Skipf("the layout packs the peak exactly (%d bytes): no limit between them", l.Pool)
	}
	c := m.Clone()
	before := slices.Clone(c.Graph.Order())
	r, err := adapt.Adjust(c, timeline(c, 2*time.Millisecond), adapt.Options{Limit: mem.Peak})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Moves) != 0 || r.Refused == 0 {
		t.Errorf("%d moves, %d held at a limit of %d under the pool of %d", len(r.Moves), r.Refused, mem.Peak, l.Pool)
	}
	if !slices.Equal(before, c.Graph.Order()) || c.Meta[memory.LayoutKey] != m.Meta[memory.LayoutKey] {
		t.Error("the order or the layout changed though nothing moved")
	}
}
