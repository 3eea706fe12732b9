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
// the producing op placed just before the op at Before, with Origin
// "recompute" and phase Backward. Later consumers read the restored
// value. The SwapIn's position in the order is its control edge: the
// runtime starts the transfer there.
//
// A clone reads, for each input, the copy of it this rewrite restored
// latest before the clone (a swap-in, or another clone), else — when the
// input is dead there — a copy restored by an earlier round's swap-in
// that is live there, else the input itself. Recomputation chains
// (recompute.go) rely on this: the tsplit planner emits a chain's member
// decisions (ΔM = 0, the same Before) before its target in schedule
// order, so the members are cloned first, in order, and each clone of
// the chain reads the previous one; every consumer gets its own chain
// (memory-centric). The baselines' evictor emits readers before the
// values they read, with strictly earlier Before: the redirection of
// later uses wires those clones, and one clone serves every reader.
// Finally reuseRecomputed applies TSPLIT's LRU optimisation: a later
// clone of an op already cloned by this rewrite is replaced by the
// earlier clone when extending its life fits plan.Budget.
func InsertSwapRecompute(m *ir.Model, plan *Plan) error {
	g := m.Graph
	order := g.Order()
	// release is the op of the planned order after which a swap-out's
	// device copy is freed (Decision.Release ops after the SwapOut).
	type anchors struct{ after, trigger, before, release *ir.Op }
	an := make([]anchors, len(plan.Decisions))
	for k, d := range plan.Decisions {
		// Before = len(order): a graph output swapped over the rest of
		// the step, restored by its end.
		toEnd := d.Before == len(order) && d.Option == Swap && isOutput(g, d.Value)
		if d.After < -1 || d.Before > len(order) || d.Before == len(order) && !toEnd || d.After >= d.Before ||
			d.Option == Swap && (d.Trigger < 0 || d.Trigger > len(order) || d.Trigger == len(order) && !toEnd) {
			return fmt.Errorf("swap/recompute: decision for %q has positions %d..%d outside the order", d.Value.Name, d.After, d.Before)
		}
		if d.Value.Pinned() {
			// A restored copy or a clone is not a compile-time constant:
			// the ops that need the value constant would lose their shapes.
			return fmt.Errorf("swap/recompute: %q must stay a compile-time constant (shape data) and cannot be evicted", d.Value.Name)
		}
		var a anchors
		if !toEnd {
			a.before = order[d.Before]
		}
		if d.After >= 0 {
			a.after = order[d.After] // nil: a graph input, evicted before the first op
		}
		if d.Option == Swap && d.Trigger < len(order) {
			a.trigger = order[d.Trigger] // nil: a graph output restored after the last op
			if d.Release > 1 {
				a.release = order[min(d.After+d.Release, len(order)-1)]
			}
		}
		an[k] = a
	}
	fresh := g.FreshName
	// Swaps first, then recomputes: a clone may read a tensor that a swap
	// of this round restores, and must then read the restored copy.
	rs := newRestorer(g)
	var clones []recomputeClone
	// released pairs each SwapOut with the op its copy is freed after;
	// the release counts are set once every op is inserted (below).
	type released struct{ so, after *ir.Op }
	var rels []released
	idx := make([]int, len(plan.Decisions))
	for k := range idx {
		idx[k] = k
	}
	sort.SliceStable(idx, func(x, y int) bool {
		return plan.Decisions[idx[x]].Option == Swap && plan.Decisions[idx[y]].Option != Swap
	})
	// pos is kept current across the insertions below: an op inserted at
	// index i moves only the ops from i on (recomputing every position
	// per decision was a fifth of a benchmark's planning time).
	pos := g.Position()
	moved := func(from int) {
		for len(pos) < g.NumOpIDs() {
			pos = append(pos, -1)
		}
		for i, op := range g.Order()[from:] {
			pos[op.ID] = from + i
		}
	}
	for _, k := range idx {
		d := plan.Decisions[k]
		v := d.Value
		a := an[k]
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
			if plan.ShortReleases && d.Release > 1 {
				so.SetAttr(ir.Attr{Name: ir.ReleaseAttr, Type: ir.AttrInt, Int: int64(d.Release)})
			} else if a.release != nil {
				rels = append(rels, released{so, a.release})
			}
			so.Phase = phase
			if err := ir.InferAndSet(so, m.Opset(ir.Domain)); err != nil {
				return err
			}
			moved(at)
			if a.trigger != nil {
				at = pos[a.trigger.ID]
			} else {
				at = len(g.Order())
			}
			si, err := g.InsertOp(at, "SwapIn", ir.Domain, fresh(v.Name+"/swap_in"), []*ir.Value{so.Output(0)}, []string{fresh(v.Name + "/restored")}, nil)
			if err != nil {
				return err
			}
			si.Phase = ir.Backward
			if err := ir.InferAndSet(si, m.Opset(ir.Domain)); err != nil {
				return err
			}
			moved(at)
			back = si.Output(0)
			rs.add(v, si, back)
		case Recompute:
			def := v.Def
			names := make([]string, len(def.Outputs()))
			for i, o := range def.Outputs() {
				if o != nil {
					names[i] = fresh(o.Name + "/recompute")
				}
			}
			attrs := cloneAttrs(def)
			inputs := append([]*ir.Value(nil), def.Inputs()...)
			for j, w := range inputs {
				if w != nil {
					inputs[j] = rs.readAt(w, a.before, pos)
				}
			}
			at := pos[a.before.ID]
			c, err := g.InsertOp(at, def.Type, def.Domain, fresh(def.Name+"/recompute"), inputs, names, attrs)
			if err != nil {
				return err
			}
			moved(at)
			c.Phase, c.Origin = ir.Backward, "recompute"
			if err := ir.InferAndSet(c, m.Opset(def.Domain)); err != nil {
				return err
			}
			back = c.Output(v.DefIndex)
			rs.add(v, c, back)
			clones = append(clones, recomputeClone{op: c, of: def})
		default:
			continue
		}
		if a.before == nil {
			// A graph output: the restored copy is the output, under its
			// name (the training loop feeds it back by name), and the
			// value it replaces in the next step now names the copy.
			if err := restoreOutput(g, v, back); err != nil {
				return err
			}
			continue
		}
		limit := pos[a.before.ID]
		for _, u := range append([]ir.Use(nil), v.Uses()...) {
			if u.Op != back.Def && pos[u.Op.ID] >= limit {
				u.Op.SetInput(u.Index, back)
			}
		}
	}
	// A release is a count of ops after the SwapOut, and the planner
	// counted the ops of the order it planned on. The SwapOuts, SwapIns
	// and clones inserted above fall inside those windows (a long window
	// in the forward pass holds the SwapOuts of the tensors made after
	// its own), so the same count would free the copy after fewer of the
	// ops whose compute hides its transfer, and the runtime would wait
	// for it there (ResNet-50 b289 at half its peak: maxpool_indices'
	// 17-op window, and the step waited 17 ms at its free). Count to the
	// op the planner meant.
	for _, r := range rels {
		if n := pos[r.after.ID] - pos[r.so.ID]; n > 1 {
			r.so.SetAttr(ir.Attr{Name: ir.ReleaseAttr, Type: ir.AttrInt, Int: int64(n)})
		}
	}
	return reuseRecomputed(g, plan.Budget, clones)
}

// restoreOutput makes back, the swapped-in copy of graph output v, the
// output in v's place and under v's name, and the replacement
// (Value.Next) of whatever v replaced.
func restoreOutput(g *ir.Graph, v, back *ir.Value) error {
	k := outputIndex(g, v)
	if k < 0 {
		return fmt.Errorf("swap/recompute: %q is not a graph output", v.Name)
	}
	name := v.Name
	if err := g.Rename(v, g.FreshName(name+"/device")); err != nil {
		return err
	}
	if err := g.Rename(back, name); err != nil {
		return err
	}
	g.Outputs[k] = back
	for _, w := range g.Values() {
		if w.Next == v {
			w.Next = back
		}
	}
	return nil
}

// cloneAttrs returns the attributes of a recomputation clone of def:
// def's own, except that a training-mode BatchNormalization gets
// momentum 1. Its running-statistics outputs are required in training
// mode (ONNX Runtime refuses the node without them) and nobody reads
// the clone's, but ONNX Runtime may write them into the buffers of the
// running statistics it reads, which the original node has already
// updated there: the update would be applied twice. With momentum 1
// the clone's update, mean·1 + batch_mean·0, writes back what it read,
// and its normalised output does not depend on momentum.
func cloneAttrs(def *ir.Op) []ir.Attr {
	attrs := append([]ir.Attr(nil), def.Attrs...)
	if def.Domain != "" || def.Type != "BatchNormalization" || !ir.BatchNormTraining(def) {
		return attrs
	}
	for i := range attrs {
		if attrs[i].Name == "momentum" {
			attrs[i].Float, attrs[i].Src = 1, nil // Src would be written instead
			return attrs
		}
	}
	return append(attrs, ir.Attr{Name: "momentum", Type: ir.AttrFloat, Float: 1})
}
