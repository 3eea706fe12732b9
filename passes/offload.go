package passes

import (
	"fmt"
	"slices"

	"github.com/tsplit/tsplit/ir"
	"github.com/tsplit/tsplit/memory"
)

// OffloadState moves the training state out of device memory: every
// parameter, optimizer state (momentum, Adam's m and v) and running
// statistic — a weight (memory.Resident) with more than one element that
// only device ops read — is kept on the host for the whole step
// (memory.HostResident) and brought in by a SwapIn placed just before
// each op that reads it; the restored copy is an ordinary activation,
// which later planning rounds may keep, swap or free like any other. The
// value that replaces a weight in the next step (Value.Next), where it
// is a graph output, is swapped out right after it is computed and the
// graph output becomes the host copy, under the same name, so an updated
// parameter does not stay on the device to the end of the step. The
// gradients are activations already: the planner swaps them like the
// rest. It returns how many weights it moved.
//
// This is the rewrite of the activations' swaps (InsertSwapRecompute)
// applied to values that exist before the step: the same SwapIn and
// SwapOut ops, positions as control edges, and the memory model counts
// them by the same rules, so nothing downstream has a second path.
func OffloadState(m *ir.Model) (int, error) {
	g := m.Graph
	isOutput := map[*ir.Value]int{}
	for i, v := range g.Outputs {
		isOutput[v] = i
	}
	var state []*ir.Value
	pick := func(v *ir.Value) {
		if !memory.Resident(v) || v.Pinned() || !v.DType.IsFloat() || len(v.Uses()) == 0 {
			return
		}
		if n, err := v.Shape.NumElements(); err != nil || n <= 1 {
			return // a scalar (Adam's step count): not worth a copy
		}
		if _, out := isOutput[v]; out {
			return
		}
		for _, u := range v.Uses() {
			if ir.CopyOf(u.Op) != ir.NoCopy {
				return // already planned around: leave it
			}
		}
		state = append(state, v)
	}
	for _, v := range g.Inputs {
		if v.Kind != ir.KindInit && v.Param {
			pick(v)
		}
	}
	for _, v := range g.Inits {
		pick(v)
	}
	if len(state) == 0 {
		return 0, nil
	}
	// The new ops are appended to the order as they are made; the order
	// is rebuilt from the one before them at the end.
	old := slices.Clone(g.Order())
	pos := g.Position()
	before := map[ir.OpID][]*ir.Op{}
	after := map[ir.OpID][]*ir.Op{}
	fresh := g.FreshName
	for _, v := range state {
		var readers []*ir.Op
		for _, u := range v.Uses() {
			if !slices.Contains(readers, u.Op) {
				readers = append(readers, u.Op)
			}
		}
		slices.SortFunc(readers, func(a, b *ir.Op) int { return pos[a.ID] - pos[b.ID] })
		for _, op := range readers {
			si, err := g.NewOp("SwapIn", ir.Domain, fresh(v.Name+"/swap_in"), []*ir.Value{v}, []string{fresh(v.Name + "/restored")}, nil)
			if err != nil {
				return 0, fmt.Errorf("offload: %v", err)
			}
			si.Phase = op.Phase
			if err := ir.InferAndSet(si, m.Opset(ir.Domain)); err != nil {
				return 0, fmt.Errorf("offload: %s: %v", si.Describe(), err)
			}
			for j, w := range op.Inputs() {
				if w == v {
					op.SetInput(j, si.Output(0))
				}
			}
			before[op.ID] = append(before[op.ID], si)
		}
		nx := v.Next
		k, out := isOutput[nx]
		if nx == nil || !out || nx.Def == nil || ir.CopyOf(nx.Def) != ir.NoCopy {
			continue
		}
		name := nx.Name
		so, err := g.NewOp("SwapOut", ir.Domain, fresh(name+"/swap_out"), []*ir.Value{nx}, []string{fresh(name + "/host")}, nil)
		if err != nil {
			return 0, fmt.Errorf("offload: %v", err)
		}
		so.Phase = nx.Def.Phase
		if err := ir.InferAndSet(so, m.Opset(ir.Domain)); err != nil {
			return 0, fmt.Errorf("offload: %s: %v", so.Describe(), err)
		}
		// The graph output keeps its name (the training loop feeds it
		// back by name) and is now the host copy.
		if err := g.Rename(nx, fresh(name+"/device")); err != nil {
			return 0, fmt.Errorf("offload: %v", err)
		}
		if err := g.Rename(so.Output(0), name); err != nil {
			return 0, fmt.Errorf("offload: %v", err)
		}
		g.Outputs[k] = so.Output(0)
		v.Next = so.Output(0)
		after[nx.Def.ID] = append(after[nx.Def.ID], so)
	}
	order := make([]*ir.Op, 0, len(g.Order()))
	for _, op := range old {
		order = append(order, before[op.ID]...)
		order = append(order, op)
		order = append(order, after[op.ID]...)
	}
	if err := g.SetOrder(order); err != nil {
		return 0, fmt.Errorf("offload: %v", err)
	}
	return len(state), nil
}
