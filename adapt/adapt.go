package adapt

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/tsplit/tsplit/executor"
	"github.com/tsplit/tsplit/ir"
	"github.com/tsplit/tsplit/memory"
	"github.com/tsplit/tsplit/passes"
)

// Fraction is Capuchin's step: a stalled swap-in's trigger moves
// earlier by this share of its measured copy time per iteration.
const Fraction = 0.05

// Stall is what one swap-in cost the compute stream in a run.
type Stall struct {
	// Op is the swap-in and Pos its position in the order that ran;
	// Consumer is the position of the first compute op reading its
	// output.
	Op            *ir.Op
	Pos, Consumer int
	// Copy is the copy's measured time on its stream (the emulated
	// link's pace included); Wait how long the consumer, issued and
	// with the compute stream free, still waited for the copy to end.
	Copy, Wait time.Duration
}

// Measure reads every swap-in's stall off a run's timeline (one
// executor.Record per op of the order, as Executor.Run returns it), in
// order. A swap-in that no compute op reads is left out.
func Measure(tl []executor.Record) []Stall {
	pos := map[ir.OpID]int{}
	// prevEnd[j] is when the compute op before position j ended (-1:
	// none).
	prevEnd := make([]time.Duration, len(tl))
	last := time.Duration(-1)
	for i := range tl {
		r := &tl[i]
		prevEnd[i] = last
		if r.Op == nil || r.Stream == "" {
			continue // not issued: the run stopped early
		}
		pos[r.Op.ID] = i
		if r.Stream == executor.Compute {
			last = r.End
		}
	}
	var out []Stall
	for i := range tl {
		r := &tl[i]
		if r.Op == nil || r.Stream == "" || ir.CopyOf(r.Op) != ir.ToDevice || len(r.Op.Outputs()) == 0 || r.Op.Output(0) == nil {
			continue
		}
		consumer := -1
		for _, u := range r.Op.Output(0).Uses() {
			j, ok := pos[u.Op.ID]
			if ok && tl[j].Stream == executor.Compute && (consumer < 0 || j < consumer) {
				consumer = j
			}
		}
		if consumer < 0 {
			continue
		}
		c := &tl[consumer]
		ready := max(prevEnd[consumer], c.Issued)
		wait := min(r.End, c.Start) - ready
		out = append(out, Stall{Op: r.Op, Pos: i, Consumer: consumer, Copy: r.End - r.Start, Wait: max(wait, 0)})
	}
	return out
}

// Total is the summed wait of the stalls: the compute stream's time
// lost to swap-ins not done when their consumer could run.
func Total(stalls []Stall) time.Duration {
	var t time.Duration
	for _, s := range stalls {
		t += s.Wait
	}
	return t
}

// Options configure Adjust.
type Options struct {
	// Limit is the most device bytes the plan may hold (its budget,
	// and the pool the run may use): no move takes the memory model's
	// peak or the static layout's pool past it.
	Limit int64
	// Fraction of a stalled copy's measured time its trigger moves
	// earlier (0: Fraction, Capuchin's 5 %). The move is rounded up to
	// whole ops, at least one compute op.
	Fraction float64
}

// Move is one trigger moved earlier.
type Move struct {
	Op       string
	From, To int
	// Wait is the stall measured for it.
	Wait time.Duration
}

// Result is what Adjust did.
type Result struct {
	// Moves are the triggers moved, in order of the swap-ins; Refused
	// counts stalled swap-ins that could not move (the budget, or the
	// swap-out they read, held them).
	Moves   []Move
	Refused int
	// Mem is the memory model of m's order after the moves and Layout
	// its static layout (the one m's metadata now holds).
	Mem    *memory.Model
	Layout *memory.Layout
}

// Adjust moves the trigger of every swap-in that stalled in tl (the
// timeline of a run of m's current order) earlier, in place: m's order,
// its static layout (memory.LayoutKey) and the peaks and pool in its
// plan summary (passes.PlanKey) become the next iteration's. A swap-in
// never moves above the op that produced the host tensor it reads; a
// move that would raise the memory model's peak past opts.Limit stops
// short, and when the re-derived layout's pool outgrows the limit the
// last moves are undone until it fits. Same m, same tl: same result.
func Adjust(m *ir.Model, tl []executor.Record, opts Options) (*Result, error) {
	g := m.Graph
	order := g.Order()
	if len(tl) != len(order) {
		return nil, fmt.Errorf("adapt: the timeline has %d records, the order %d ops", len(tl), len(order))
	}
	for i := range tl {
		if tl[i].Op != nil && tl[i].Op != order[i] {
			return nil, fmt.Errorf("adapt: the timeline's op %d is %s, the order's %s: not a run of this order", i, tl[i].Op.Describe(), order[i].Describe())
		}
	}
	frac := opts.Fraction
	if frac <= 0 {
		frac = Fraction
	}
	// The measured time of every compute op, by op: positions shift as
	// triggers move.
	took := map[ir.OpID]time.Duration{}
	for i := range tl {
		if tl[i].Op != nil && tl[i].Stream == executor.Compute {
			took[tl[i].Op.ID] = max(tl[i].End-tl[i].Start, 0)
		}
	}
	mem, err := memory.Analyze(g, memory.Options{})
	if err != nil {
		return nil, fmt.Errorf("adapt: %w", err)
	}
	res := &Result{}
	history := [][]*ir.Op{slices.Clone(order)}
	for _, s := range Measure(tl) {
		if s.Wait <= 0 {
			continue
		}
		cur := g.Order()
		pos := g.Position()
		at := pos[s.Op.ID]
		lo := 0
		if d := s.Op.Input(0).Def; d != nil {
			lo = pos[d.ID] + 1
		}
		size := memory.Align(s.Op.Output(0).Bytes())
		need := time.Duration(frac * float64(s.Copy))
		to := at
		var gained time.Duration
		for k := at - 1; k >= lo; k-- {
			if gained > 0 && gained >= need {
				break
			}
			// Placed before op k, the copy's tensor is live while k runs.
			if mem.Live[k]+size > opts.Limit {
				break
			}
			to = k
			gained += took[cur[k].ID]
		}
		if to == at || gained == 0 {
			res.Refused++
			continue
		}
		next := moveOp(cur, at, to)
		if err := g.SetOrder(next); err != nil {
			return nil, fmt.Errorf("adapt: %w", err)
		}
		nm, err := memory.Analyze(g, memory.Options{})
		if err != nil {
			return nil, fmt.Errorf("adapt: %w", err)
		}
		if nm.Peak > opts.Limit {
			// The analytic check missed an interaction (a free that
			// moved with the op): keep the trigger where it was.
			if err := g.SetOrder(cur); err != nil {
				return nil, fmt.Errorf("adapt: %w", err)
			}
			res.Refused++
			continue
		}
		mem = nm
		history = append(history, next)
		res.Moves = append(res.Moves, Move{Op: s.Op.Name, From: at, To: to, Wait: s.Wait})
	}
	layout := mem.MakeLayout()
	for layout.Pool > opts.Limit && len(res.Moves) > 0 {
		// Fragmentation took the pool past the limit: undo the last move.
		res.Moves = res.Moves[:len(res.Moves)-1]
		res.Refused++
		if err := g.SetOrder(history[len(res.Moves)]); err != nil {
			return nil, fmt.Errorf("adapt: %w", err)
		}
		if mem, err = memory.Analyze(g, memory.Options{}); err != nil {
			return nil, fmt.Errorf("adapt: %w", err)
		}
		layout = mem.MakeLayout()
	}
	res.Mem = mem
	if len(res.Moves) == 0 {
		// The order is the one that ran: keep its layout.
		if s, ok := m.Meta[memory.LayoutKey]; ok {
			if l, err := memory.DecodeLayout(s); err == nil {
				res.Layout = l
				return res, nil
			}
		}
	}
	if layout.Pool > opts.Limit {
		return nil, fmt.Errorf("adapt: the layout of the order that ran needs %d bytes, over the limit of %d", layout.Pool, opts.Limit)
	}
	res.Layout = layout
	if err := record(m, mem, layout); err != nil {
		return nil, err
	}
	return res, nil
}

// moveOp is order with the op at position from moved to position to
// (to < from), the ops in between shifted one later.
func moveOp(order []*ir.Op, from, to int) []*ir.Op {
	out := make([]*ir.Op, 0, len(order))
	out = append(out, order[:to]...)
	out = append(out, order[from])
	out = append(out, order[to:from]...)
	return append(out, order[from+1:]...)
}

// record writes the layout into m's metadata and the new peaks and pool
// into its plan summary, so the adapted model is a plan like any other
// (tsplitc run checks its measured peak against them).
func record(m *ir.Model, mem *memory.Model, l *memory.Layout) error {
	if m.Meta == nil {
		m.Meta = map[string]string{}
	}
	m.Meta[memory.LayoutKey] = l.Encode()
	s, ok := m.Meta[passes.PlanKey]
	if !ok {
		return nil
	}
	var r passes.Report
	if err := json.Unmarshal([]byte(s), &r); err != nil {
		return fmt.Errorf("adapt: metadata %s: %v", passes.PlanKey, err)
	}
	r.Peak, r.HostPeak, r.Pool = mem.Peak, mem.HostPeak, l.Pool
	js, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("adapt: %w", err)
	}
	m.Meta[passes.PlanKey] = string(js)
	return nil
}
