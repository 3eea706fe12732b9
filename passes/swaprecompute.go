package passes

import (
	"fmt"
	"sort"

	"github.com/tsplit/tsplit/ir"
)

// InsertSwapRecompute turns a plan's decisions into ops (TFLMS §4 rewrite
// rules): a swap becomes one SwapOut right after the tensor's last use
// before the gap (one per tensor however many consumers — fused
// swap-outs) and one SwapIn placed at the decision's trigger, serving
// every later consumer (fused swap-ins); a recompute becomes a clone of
// the producing op placed just before the first consumer after the gap.
// Later consumers read the restored value. The SwapIn's position in the
// order is its control edge: the runtime starts the transfer there.
func InsertSwapRecompute(m *ir.Model, plan *Plan) error {
	g := m.Graph
	order := g.Order()
	type anchors struct{ after, trigger, before *ir.Op }
	an := make([]anchors, len(plan.Decisions))
	for k, d := range plan.Decisions {
		if d.After < -1 || d.Before >= len(order) || d.After >= d.Before {
			return fmt.Errorf("swap/recompute: decision for %q has positions %d..%d outside the order", d.Value.Name, d.After, d.Before)
		}
		a := anchors{before: order[d.Before]}
		if d.After >= 0 {
			a.after = order[d.After] // nil: a graph input, evicted before the first op
		}
		if d.Option == Swap {
			a.trigger = order[d.Trigger]
		}
		an[k] = a
	}
	fresh := g.FreshName
	// Swaps first, then recomputes: a clone may read a tensor that a swap
	// of this round restores, and must then read the restored copy.
	type restore struct {
		swapIn *ir.Op
		value  *ir.Value
	}
	restored := map[*ir.Value]restore{}
	idx := make([]int, len(plan.Decisions))
	for k := range idx {
		idx[k] = k
	}
	sort.SliceStable(idx, func(x, y int) bool {
		return plan.Decisions[idx[x]].Option == Swap && plan.Decisions[idx[y]].Option != Swap
	})
	for _, k := range idx {
		d := plan.Decisions[k]
		v := d.Value
		a := an[k]
		pos := g.Position()
		var back *ir.Value
		switch d.Option {
		case Swap:
			host := fresh(v.Name + "/host")
			at, phase := 0, ir.Forward
			if a.after != nil {
				at, phase = pos[a.after.ID]+1, a.after.Phase
			}
			so, err := g.InsertOp(at, "SwapOut", ir.Domain, fresh(v.Name+"/swap_out"), []*ir.Value{v}, []string{host}, nil)
			if err != nil {
				return err
			}
			so.Phase = phase
			if err := ir.InferAndSet(so, m.Opset(ir.Domain)); err != nil {
				return err
			}
			pos = g.Position()
			si, err := g.InsertOp(pos[a.trigger.ID], "SwapIn", ir.Domain, fresh(v.Name+"/swap_in"), []*ir.Value{so.Output(0)}, []string{fresh(v.Name + "/restored")}, nil)
			if err != nil {
				return err
			}
			si.Phase = ir.Backward
			if err := ir.InferAndSet(si, m.Opset(ir.Domain)); err != nil {
				return err
			}
			back = si.Output(0)
			restored[v] = restore{si, back}
		case Recompute:
			def := v.Def
			names := make([]string, len(def.Outputs()))
			for i, o := range def.Outputs() {
				if o != nil {
					names[i] = fresh(o.Name + "/recompute")
				}
			}
			attrs := append([]ir.Attr(nil), def.Attrs...)
			inputs := append([]*ir.Value(nil), def.Inputs()...)
			for j, w := range inputs {
				// Read a swapped input's restored copy when the clone runs
				// after its swap-in.
				if r, ok := restored[w]; ok && pos[r.swapIn.ID] < pos[a.before.ID] {
					inputs[j] = r.value
				}
			}
			c, err := g.InsertOp(pos[a.before.ID], def.Type, def.Domain, fresh(def.Name+"/recompute"), inputs, names, attrs)
			if err != nil {
				return err
			}
			c.Phase, c.Origin = ir.Backward, "recompute"
			if err := ir.InferAndSet(c, m.Opset(def.Domain)); err != nil {
				return err
			}
			back = c.Output(v.DefIndex)
		default:
			continue
		}
		pos = g.Position()
		limit := pos[a.before.ID]
		for _, u := range append([]ir.Use(nil), v.Uses()...) {
			if u.Op != back.Def && pos[u.Op.ID] >= limit {
				u.Op.SetInput(u.Index, back)
			}
		}
	}
	return nil
}
