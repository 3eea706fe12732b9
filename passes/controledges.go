package passes

import (
	"github.com/tsplit/tsplit/ir"
	"github.com/tsplit/tsplit/memory"
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
		g := s.Model.Graph
		r := s.Report
		if r == nil || (r.Swapped == 0 && r.Split == 0 && r.Offloaded == 0) || (s.Opts.Policy != nil && s.Opts.Policy.OwnTriggers()) {
			return nil, nil // nothing to place, or the policy's own rule (vDNN, TFLMS, …) stands
		}
		p := profileOf(s)
		saved := append([]*ir.Op(nil), g.Order()...)
		mem, err := memory.Analyze(g, memory.Options{})
		if err != nil {
			return nil, err
		}
		tl := Simulate(g, mem, p)
		target := min(r.Budget, mem.Peak)
		moved := 0
		for _, op := range saved {
			if ir.CopyOf(op) != ir.ToDevice {
				continue
			}
			pos := g.Position()
			at := pos[op.ID]
			// The SwapOut (or host op) it reads; none for a weight kept on
			// the host all step (OffloadState), which may come in from the
			// start.
			lo := 0
			if src := op.Input(0).Def; src != nil {
				lo = pos[src.ID] + 1
			}
			need := p.TransferTime(op.Input(0).Bytes(), false)
			size := memory.Align(op.Output(0).Bytes())
			// Time the ops between the trigger and the first consumer cover.
			cover := 0.0
			first := len(g.Order())
			for _, u := range op.Output(0).Uses() {
				first = min(first, pos[u.Op.ID])
			}
			if first < len(g.Order()) && tl.End[at] <= tl.Start[first] {
				continue // already hidden: no stall to remove
			}
			for k := at + 1; k < first; k++ {
				cover += tl.End[k] - tl.Start[k]
			}
			best := at
			for k := at - 1; k >= lo && cover < need; k-- {
				if mem.Live[k]+size > target || g.Order()[k].Phase == ir.Forward && op.Phase != ir.Forward {
					break
				}
				cover += tl.End[k] - tl.Start[k]
				best = k
			}
			if best == at {
				continue
			}
			order := append([]*ir.Op(nil), g.Order()...)
			order = append(order[:at], order[at+1:]...)
			order = append(order[:best], append([]*ir.Op{op}, order[best:]...)...)
			if err := g.SetOrder(order); err != nil {
				return nil, err
			}
			if mem, err = memory.Analyze(g, memory.Options{}); err != nil {
				return nil, err
			}
			if mem.Peak > target {
				// The analytic check missed an interaction: undo this move.
				order = append([]*ir.Op(nil), g.Order()...)
				order = append(order[:best], order[best+1:]...)
				order = append(order[:at], append([]*ir.Op{op}, order[at:]...)...)
				if err := g.SetOrder(order); err != nil {
					return nil, err
				}
				if mem, err = memory.Analyze(g, memory.Options{}); err != nil {
					return nil, err
				}
				continue
			}
			tl = Simulate(g, mem, p)
			moved++
		}
		if moved == 0 {
			return nil, nil
		}
		if l := mem.MakeLayout(); l.Pool > r.Budget {
			// Fragmentation outgrew the budget: keep the planner's triggers.
			return nil, g.SetOrder(saved)
		}
		s.layout = nil
		r.Peak, r.HostPeak, r.Time = mem.Peak, mem.HostPeak, tl.StepTime
		r.Planned = timeline(mem, tl)
		return nil, nil
	},
}
