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
// enough not to raise the peak). A move that would make the static
// layout outgrow the budget is undone.
var ControlEdges = &Pass{
	Name:     "control-edges",
	Doc:      "place each swap-in's trigger from the simulated timeline",
	Requires: []*Pass{PlanMemory},
	Mutates:  true,
	Run: func(s *State) (any, error) {
		return nil, placeTriggers(s)
	},
}

// placeTriggers is ControlEdges' work on s's planned graph. PlanRounds
// also does it on every plan it makes, so that what the search compares
// (and what simulate-and-repair charges a swap) is the step with its
// triggers placed; the pipeline's pass then finds them placed.
func placeTriggers(s *State) error {
	g := s.Model.Graph
	r := s.Report
	if r == nil || (r.Swapped == 0 && r.Split == 0 && r.Offloaded == 0) || (s.Opts.Policy != nil && s.Opts.Policy.OwnTriggers()) {
		return nil // nothing to place, or the policy's own rule (vDNN, TFLMS, …) stands
	}
	p := profileOf(s)
	saved := slices.Clone(g.Order())
	mem, err := memory.Analyze(g, memory.Options{})
	if err != nil {
		return err
	}
	tl := Simulate(g, mem, p)
	target := min(r.Budget, mem.Peak)
	changed := false
	// Each sweep moves every waited-for swap-in at once and is checked
	// by one exact analysis and one simulation (a check per move made
	// planning the full-size ResNets twice as slow); a later sweep sees
	// the timeline the earlier one made.
	for range triggerSweeps {
		order, n := moveTriggers(g, mem, tl, p, target)
		if n == 0 {
			break
		}
		prev := slices.Clone(g.Order())
		if err := g.SetOrder(order); err != nil {
			return err
		}
		m2, err := memory.Analyze(g, memory.Options{})
		if err != nil {
			return err
		}
		// The analytic check can miss an interaction (a swap-in's own
		// position, a release); and starting a copy earlier puts it
		// ahead of later ones on the link, which can delay a swap-in
		// another op waits for. Either undoes the sweep.
		var t2 *Timeline
		if m2.Peak <= target {
			t2 = Simulate(g, m2, p)
		}
		if t2 == nil || t2.StepTime >= tl.StepTime {
			if err := g.SetOrder(prev); err != nil {
				return err
			}
			break
		}
		mem, tl, changed = m2, t2, true
	}
	if !changed {
		return nil
	}
	if l := mem.MakeLayout(); l.Pool > r.Budget {
		// Fragmentation outgrew the budget: keep the planner's triggers.
		return g.SetOrder(saved)
	}
	s.layout = nil
	s.results = map[*Pass]any{} // the order changed
	r.Peak, r.HostPeak, r.Time = mem.Peak, mem.HostPeak, tl.StepTime
	r.Planned = timeline(mem, tl)
	return nil
}

// triggerSweeps bounds placeTriggers' sweeps.
const triggerSweeps = 3

// moveTriggers returns g's order with every swap-in that an op waits for
// in tl moved earlier, op by op, while the ops it then overlaps do not
// yet cover its transfer and the memory it then holds keeps every M_k
// (mem's, plus what the moves before it add) within target, and how many
// moved. A swap-in stays after what it reads, and a backward one after
// the forward pass.
func moveTriggers(g *ir.Graph, mem *memory.Model, tl *Timeline, p *profile.Profile, target int64) ([]*ir.Op, int) {
	order := g.Order()
	pos := g.Position()
	live := slices.Clone(mem.Live)
	before := make([][]*ir.Op, len(order)) // swap-ins moved before each position
	gone := make([]bool, len(order))
	moved := 0
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
		before[best] = append(before[best], op)
		gone[at] = true
		moved++
	}
	if moved == 0 {
		return nil, 0
	}
	out := make([]*ir.Op, 0, len(order))
	for i, op := range order {
		out = append(out, before[i]...)
		if !gone[i] {
			out = append(out, op)
		}
	}
	return out, moved
}
