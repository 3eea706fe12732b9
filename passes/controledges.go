package passes

import (
	"slices"

	"github.com/tsplit/tsplit/ir"
	"github.com/tsplit/tsplit/memory"
	"github.com/tsplit/tsplit/profile"
)

// ControlEdges revisits every swap-in's trigger — its position in the
// order, which is where the runtime starts the transfer — against the
// simulated timeline of the whole plan: a swap-in whose transfer is not
// hidden is moved earlier, op by op, while the ops it then overlaps do
// not yet cover the transfer and the memory it then occupies keeps every
// M_k within the target (start early enough to hide the transfer, late
// enough not to raise the peak). Then every swap-out whose free the
// step waits for (the runtime frees the device copy after the release
// window's last op, once the copy is done) gets a longer window, op by
// op, under the same memory rule. Moves are kept only where the
// simulated step gets shorter; a phase whose moves would make the
// static layout outgrow the budget is undone.
var ControlEdges = &Pass{
	Name:     "control-edges",
	Doc:      "place each swap-in's trigger and swap-out's release from the simulated timeline",
	Requires: []*Pass{PlanMemory},
	Mutates:  true,
	Run: func(s *State) (any, error) {
		return nil, placeTriggers(s, true)
	},
}

// placeTriggers is ControlEdges' work on s's planned graph. PlanRounds
// also does it on every plan it makes, so that what the search compares
// (and what simulate-and-repair charges a swap) is the step with its
// triggers placed; the pipeline's pass then finds them placed.
func placeTriggers(s *State, releases bool) error {
	g := s.Model.Graph
	r := s.Report
	if r == nil || (r.Swapped == 0 && r.Split == 0 && r.Offloaded == 0) || (s.Opts.Policy != nil && s.Opts.Policy.OwnTriggers()) {
		return nil // nothing to place, or the policy's own rule (vDNN, TFLMS, …) stands
	}
	if r.placed {
		return nil
	}
	if releases {
		r.placed = true
	}
	p := profileOf(s)
	mem, err := memory.Analyze(g, memory.Options{})
	if err != nil {
		return err
	}
	tl := Simulate(g, mem, p)
	target := min(r.Budget, mem.Peak)
	// The plan after each sweep that paid, the planner's first.
	stack := []placed{{slices.Clone(g.Order()), nil, mem, tl}}
	// Each sweep moves the swap-ins waited for in the timeline the
	// sweep before it made (phase 0); then, with the triggers placed,
	// each release sweep lengthens the windows of the swap-outs whose
	// frees were waited for (phase 1). Triggers first: both take the
	// room left under the target, and the releases took it from the
	// triggers where they went together (VGG-19 b301 at 50 % of its
	// peak, shrink-early: 6.649 s against 6.215 s with the triggers
	// alone). room is what a move may fill M_k up to: the target, or
	// less where the layout needs it.
	sweeps := func(phase int, room int64) error {
		for range triggerSweeps {
			base := slices.Clone(g.Order())
			var moves []triggerMove
			var rels []releaseMove
			if phase == 0 {
				moves = moveTriggers(g, mem, tl, p, room)
			} else {
				rels = moveReleases(g, mem, tl, room)
			}
			if len(moves) == 0 && len(rels) == 0 {
				return nil
			}
			// All of the sweep's moves at once, checked by one exact
			// analysis and one simulation (a check per move made
			// planning the full-size ResNets twice as slow).
			m2, t2, err := tryMoves(g, base, moves, rels, p, target)
			if err != nil {
				return err
			}
			if t2 != nil && t2.StepTime < tl.StepTime {
				mem, tl = m2, t2
				stack = append(stack, placed{slices.Clone(g.Order()), rels, mem, tl})
				continue
			}
			setReleases(rels, nil)
			// The analytic check can miss an interaction (a swap-in's
			// own position, a release), and a copy started earlier goes
			// ahead of later ones on the link, which can delay a
			// swap-in another op waits for: then each move is tried on
			// its own, in order, kept where the step gets shorter and
			// fits. Not the releases: on BERT-large at half its peak
			// none of 63 tried alone after their sweep failed paid.
			var kept []triggerMove
			for _, mv := range moves[:min(len(moves), maxSingleMoves)] {
				m2, t2, err := tryMoves(g, base, append(kept, mv), nil, p, target)
				if err != nil {
					return err
				}
				if t2 != nil && t2.StepTime < tl.StepTime {
					kept = append(kept, mv)
					mem, tl = m2, t2
				}
			}
			if err := g.SetOrder(withMoves(base, kept)); err != nil {
				return err
			}
			if len(kept) > 0 {
				stack = append(stack, placed{slices.Clone(g.Order()), nil, mem, tl})
			}
			return nil
		}
		return nil
	}
	if err := sweeps(0, target); err != nil {
		return err
	}
	if releases {
		if err := sweeps(1, target); err != nil {
			return err
		}
	}
	// A longer release keeps a copy across more positions: where the
	// static layout of the releases needs a pool over the budget
	// (fragmentation), they are undone and placed once more for a
	// target lowered by the overshoot, as PlanRounds aims its rounds
	// (VGG-16 b320 at 50 % of its peak, shrink-early: 6.478 s with the
	// triggers alone, 5.601 s with the releases, whose layout is over).
	fits := false // the top of the stack's layout is known to fit
	if top := stack[len(stack)-1]; top.rels != nil {
		l := top.mem.MakeLayout()
		fits = l.Pool <= r.Budget
		if !fits {
			for len(stack) > 1 && stack[len(stack)-1].rels != nil {
				setReleases(stack[len(stack)-1].rels, nil)
				stack = stack[:len(stack)-1]
			}
			top := stack[len(stack)-1]
			mem, tl = top.mem, top.tl
			if err := g.SetOrder(top.order); err != nil {
				return err
			}
			over := l.Pool - r.Budget
			if err := sweeps(1, target-over-over/2-memory.Alignment); err != nil {
				return err
			}
		}
	}
	if len(stack) == 1 {
		return nil
	}
	// The last sweep is kept if the static layout of what it left still
	// fits the budget (fragmentation); else the one before it, and so
	// on back to the planner's triggers and releases. (A longer release
	// keeps a copy across more positions, and the layout of all of a
	// step's releases lengthened at once can need a pool over the
	// budget where fewer fit.)
	for !fits && len(stack) > 1 && stack[len(stack)-1].mem.MakeLayout().Pool > r.Budget {
		setReleases(stack[len(stack)-1].rels, nil)
		stack = stack[:len(stack)-1]
	}
	top := stack[len(stack)-1]
	if err := g.SetOrder(top.order); err != nil {
		return err
	}
	if len(stack) == 1 {
		return nil // nothing kept
	}
	mem, tl = top.mem, top.tl
	s.layout = nil
	s.results = map[*Pass]any{} // the order or a release changed
	r.Peak, r.HostPeak, r.Time = mem.Peak, mem.HostPeak, tl.StepTime
	r.Planned = timeline(mem, tl)
	return nil
}

// PlaceReleases places s's planned graph's swap-in triggers and swap-out
// release windows from its simulated timeline (ControlEdges' rule; the
// Report is updated), for a search that compares finished plans.
// PlanRounds places only the triggers of the plans it makes: with every
// plan of a search placed, the search's greedy path changed and ended
// slower at as many budgets as it gained (InceptionV4 b143 at 25 % of
// its peak +27.93 → +42.62 %, ResNet-101 b195 at 25 % +7.26 → +9.22 %),
// so tsplit places the releases of the few plans it keeps at the end of
// each search instead.
func PlaceReleases(s *State) error { return placeTriggers(s, true) }

// PlaceReleasesWithin places them again for budget, which the plan is
// then for: a plan made for a smaller budget, whose releases' layout
// did not fit there, may fit this one.
func PlaceReleasesWithin(s *State, budget int64) error {
	s.Report.Budget, s.Report.placed = budget, false
	return placeTriggers(s, true)
}

// placed is a plan after a sweep of placeTriggers: its order, the
// releases the sweep set, its memory model and timeline.
type placed struct {
	order []*ir.Op
	rels  []releaseMove
	mem   *memory.Model
	tl    *Timeline
}

// triggerSweeps bounds placeTriggers' sweeps, maxSingleMoves the moves
// a sweep that failed as a whole tries one by one.
const (
	triggerSweeps  = 3
	maxSingleMoves = 64
)

// triggerMove moves the swap-in at position from before position to.
type triggerMove struct{ from, to int }

// withMoves is order with moves applied (positions are order's).
func withMoves(order []*ir.Op, moves []triggerMove) []*ir.Op {
	before := make([][]*ir.Op, len(order))
	gone := make([]bool, len(order))
	for _, mv := range moves {
		before[mv.to] = append(before[mv.to], order[mv.from])
		gone[mv.from] = true
	}
	out := make([]*ir.Op, 0, len(order))
	for i, op := range order {
		out = append(out, before[i]...)
		if !gone[i] {
			out = append(out, op)
		}
	}
	return out
}

// tryMoves sets g's order to base with moves, and the releases of the
// swap-outs in rels, and returns its memory model and timeline, or a
// nil timeline where its peak is over target.
func tryMoves(g *ir.Graph, base []*ir.Op, moves []triggerMove, rels []releaseMove, p *profile.Profile, target int64) (*memory.Model, *Timeline, error) {
	if err := g.SetOrder(withMoves(base, moves)); err != nil {
		return nil, nil, err
	}
	setReleases(rels, rels)
	mem, err := memory.Analyze(g, memory.Options{})
	if err != nil || mem.Peak > target {
		return nil, nil, err
	}
	return mem, Simulate(g, mem, p), nil
}

// releaseMove lengthens a swap-out's release window (ir.ReleaseAttr) to
// release ops; old is the op's attributes before.
type releaseMove struct {
	op      *ir.Op
	release int64
	old     []ir.Attr
}

// setReleases gives the swap-outs of all their old attributes, then
// those of keep their new release.
func setReleases(all, keep []releaseMove) {
	for _, rv := range all {
		rv.op.Attrs = rv.old
	}
	for _, rv := range keep {
		rv.op.Attrs = slices.Clone(rv.old)
		rv.op.SetAttr(ir.Attr{Name: ir.ReleaseAttr, Type: ir.AttrInt, Int: rv.release})
	}
}

// moveReleases lengthens the release window of every swap-out whose
// free an op waits for in tl — the runtime frees the device copy after
// the window's last op, first waiting for the copy — op by op, until
// the window's ops cover the rest of the copy, while the copy it then
// keeps holds every M_k (mem's, plus what the moves before it add)
// within target. The planner sizes a window from the op times alone
// (and caps it), so a copy queued behind others on the link, or longer
// than the cap's ops, is freed before it ends (BERT-base b275 at 95 %
// of its peak: a 412 MiB swap-out over 64 ops 1.1 ms short).
func moveReleases(g *ir.Graph, mem *memory.Model, tl *Timeline, target int64) []releaseMove {
	order := g.Order()
	n := len(order)
	pos := g.Position()
	live := slices.Clone(mem.Live)
	// A wait hides the ones after it: the ops after it start late, and
	// the frees of copies queued behind the waited one find them done.
	// So a window is measured against the step without the waits for
	// frees before it (stalled: the compute stream's idle time up to
	// each position spent waiting for a swap-out), and all the copies
	// that queue on the link get their windows in one sweep (BERT-base
	// b275 at 80 % of its peak: twelve 412 MiB swap-outs back to back,
	// two of them waited for).
	// The free after position k comes when the compute stream has done
	// its ops up to k (a copy op there is only issued): done[k].
	stalled, done := make([]float64, n), make([]float64, n)
	for i := range n {
		if b := tl.Blame[i]; b >= 0 && ir.CopyOf(order[b]) == ir.ToHost {
			stalled[i] = tl.Wait[i] // only the waits for frees: the others stay
		}
		if i > 0 {
			stalled[i] += stalled[i-1]
			done[i] = done[i-1]
		}
		if tl.Stream[i] == StreamCompute {
			done[i] = tl.End[i]
		}
	}
	var rels []releaseMove
	for at, op := range order {
		if ir.CopyOf(op) != ir.ToHost {
			continue
		}
		v := op.Input(0)
		rel := ir.SwapOutRelease(op)
		last := at + rel // the free is after this position
		if last >= n-1 || tl.End[at] <= done[last]-stalled[last] {
			continue // freed at the end, or the copy is done by then
		}
		other := false
		for _, u := range v.Uses() {
			other = other || u.Op != op && pos[u.Op.ID] >= last
		}
		if other || v.Def == nil || mem.ByValue[v.ID] < 0 {
			continue // another reader keeps it: its free is not this window's
		}
		size := mem.Intervals[mem.ByValue[v.ID]].Bytes
		need := tl.End[at] - (done[last] - stalled[last])
		k := last
		for cover := 0.0; cover < need && k+1 < n-1; {
			if live[k+1]+size > target {
				break
			}
			k++
			if tl.Stream[k] == StreamCompute {
				cover += tl.End[k] - tl.Start[k]
			}
		}
		if k == last {
			continue
		}
		for j := last + 1; j <= k; j++ {
			live[j] += size
		}
		rels = append(rels, releaseMove{op: op, release: int64(k - at), old: slices.Clone(op.Attrs)})
	}
	return rels
}

// moveTriggers moves every swap-in that an op waits for in tl earlier,
// op by op, while the ops it then overlaps do not yet cover its transfer
// and the memory it then holds keeps every M_k (mem's, plus what the
// moves before it add) within target. A swap-in stays after what it
// reads, and a backward one after the forward pass.
func moveTriggers(g *ir.Graph, mem *memory.Model, tl *Timeline, p *profile.Profile, target int64) []triggerMove {
	order := g.Order()
	pos := g.Position()
	live := slices.Clone(mem.Live)
	var moves []triggerMove
	for at, op := range order {
		if ir.CopyOf(op) != ir.ToDevice {
			continue
		}
		// The SwapOut (or host op) it reads; none for a weight kept on
		// the host all step (OffloadState), which may come in from the
		// start.
		lo := 0
		if src := op.Input(0).Def; src != nil {
			lo = pos[src.ID] + 1
		}
		first := len(order)
		for _, u := range op.Output(0).Uses() {
			first = min(first, pos[u.Op.ID])
		}
		// Hidden unless its first reader waited for it: that reader
		// starts when the copy ends, so End ≤ Start alone says nothing.
		if first < len(order) && (tl.Wait[first] <= 0 || tl.End[at] < tl.Start[first]) {
			continue
		}
		need := p.TransferTime(op.Input(0).Bytes(), false)
		size := memory.Align(op.Output(0).Bytes())
		// Time the ops between the trigger and the first reader cover.
		cover := 0.0
		for k := at + 1; k < first; k++ {
			cover += tl.End[k] - tl.Start[k]
		}
		best := at
		for k := at - 1; k >= lo && cover < need; k-- {
			if live[k]+size > target || order[k].Phase == ir.Forward && op.Phase != ir.Forward {
				break
			}
			cover += tl.End[k] - tl.Start[k]
			best = k
		}
		if best == at {
			continue
		}
		for k := best; k < at; k++ {
			live[k] += size
		}
		moves = append(moves, triggerMove{from: at, to: best})
	}
	return moves
}
