package passes

import (
	"fmt"
	"slices"

	"github.com/tsplit/tsplit/ir"
	"github.com/tsplit/tsplit/kernels"
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
//
// With hostUpdate, the optimizer update of the offloaded state runs on
// the host as well (ZeRO-Offload's placement): the update ops of each
// offloaded parameter (hostUpdateOps) are placed on the host and read
// the parameter and its optimizer state where they live, each gradient
// (and any other device value they read) is swapped out once, right
// after it is computed, and the updated values are host tensors
// already. Where the update cannot run on the host (hostUpdateOps says
// why), the update stays on the device and OffloadState reports it.
func OffloadState(m *ir.Model, hostUpdate bool) (int, error) {
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
	var onHost map[ir.OpID]bool
	if hostUpdate {
		var err error
		if onHost, err = hostUpdateOps(g, state); err != nil {
			return 0, fmt.Errorf("offload: the update cannot run on the host: %w", err)
		}
	}
	// The new ops are appended to the order as they are made; the order
	// is rebuilt from the one before them at the end.
	old := slices.Clone(g.Order())
	pos := g.Position()
	before := map[ir.OpID][]*ir.Op{}
	after := map[ir.OpID][]*ir.Op{}
	fresh := g.FreshName
	// The host update reads each device value it needs from one
	// swap-out placed right after the value's producer.
	hostCopy := map[*ir.Value]*ir.Value{}
	for _, op := range old {
		if !onHost[op.ID] {
			continue
		}
		for j, w := range op.Inputs() {
			if w == nil || w.Def == nil || onHost[w.Def.ID] {
				continue // state or a constant (host), or computed on the host
			}
			h := hostCopy[w]
			if h == nil {
				so, err := g.NewOp("SwapOut", ir.Domain, fresh(w.Name+"/swap_out"), []*ir.Value{w}, []string{fresh(w.Name + "/host")}, nil)
				if err != nil {
					return 0, fmt.Errorf("offload: %v", err)
				}
				so.Phase = w.Def.Phase
				if err := ir.InferAndSet(so, m.Opset(ir.Domain)); err != nil {
					return 0, fmt.Errorf("offload: %s: %v", so.Describe(), err)
				}
				h = so.Output(0)
				hostCopy[w] = h
				after[w.Def.ID] = append(after[w.Def.ID], so)
			}
			op.SetInput(j, h)
		}
	}
	for _, op := range old {
		if onHost[op.ID] {
			op.Host = true
		}
	}
	for _, v := range state {
		var readers []*ir.Op
		for _, u := range v.Uses() {
			if !onHost[u.Op.ID] && !slices.Contains(readers, u.Op) {
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
			continue // none, or computed on the host
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

// hostUpdateOps is the set of ops that run the optimizer update of the
// state OffloadState moves, for placing them on the host: the Update-
// phase ops from which the replacement (Value.Next) of an offloaded
// value is computed, less those shared with state that stays on the
// device (Adam's step count, whose next value every update reads: that
// value is then swapped out once). It fails where the host cannot run
// them: an op without a reference kernel, a graph input other than a
// parameter, state that stays on the device read directly, or a result
// that a device op outside the update reads.
func hostUpdateOps(g *ir.Graph, state []*ir.Value) (map[ir.OpID]bool, error) {
	offloaded := map[*ir.Value]bool{}
	for _, v := range state {
		offloaded[v] = true
	}
	// ancestors marks the Update-phase ops v is computed from.
	ancestors := func(v *ir.Value, mark map[ir.OpID]bool) {
		work := []*ir.Value{v}
		for len(work) > 0 {
			w := work[len(work)-1]
			work = work[:len(work)-1]
			op := w.Def
			if op == nil || op.Phase != ir.Update || mark[op.ID] {
				continue
			}
			mark[op.ID] = true
			for _, x := range op.Inputs() {
				if x != nil {
					work = append(work, x)
				}
			}
		}
	}
	shared := map[ir.OpID]bool{}
	for _, v := range append(slices.Clone(g.Inputs), g.Inits...) {
		if memory.Resident(v) && !offloaded[v] && v.Next != nil {
			ancestors(v.Next, shared)
		}
	}
	ops := map[ir.OpID]bool{}
	for _, v := range state {
		if v.Next != nil {
			ancestors(v.Next, ops)
		}
	}
	for id := range shared {
		delete(ops, id)
	}
	if len(ops) == 0 {
		return nil, fmt.Errorf("the offloaded state has no update")
	}
	for _, op := range g.Order() {
		if !ops[op.ID] {
			continue
		}
		if ir.CopyOf(op) != ir.NoCopy {
			return nil, fmt.Errorf("%s already moves data", op.Describe())
		}
		if err := kernels.Supported(op); err != nil {
			return nil, err
		}
		for _, x := range op.Inputs() {
			if x == nil || x.Def != nil || offloaded[x] {
				continue
			}
			if x.Kind != ir.KindInit || x.Next != nil {
				return nil, fmt.Errorf("%s reads %q, which stays on the device", op.Describe(), x.Name)
			}
		}
		for _, y := range op.Outputs() {
			if y == nil {
				continue
			}
			for _, u := range y.Uses() {
				if !ops[u.Op.ID] {
					return nil, fmt.Errorf("%s outside the update reads %q", u.Op.Describe(), y.Name)
				}
			}
		}
	}
	return ops, nil
}
