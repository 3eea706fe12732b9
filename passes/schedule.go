package passes

import (
	"sort"

	"github.com/tsplit/tsplit/ir"
)

// Schedule orders the ops of the training graph per TSPLIT Alg. 1: a
// depth-first topological order. Starting from each root in the current
// order, an op is emitted, then each consumer whose last producer it was
// is scheduled at once, recursively, before the next consumer: a chain
// runs to its end before a sibling branch starts, which keeps fewer
// tensors alive than a breadth-first order. Ops without inputs from
// other ops that also have no inputs at all (Constant, ConstantOfShape)
// are not roots: each is placed just before its first consumer, so a
// constant of the backward phase is not allocated at the start.
// Consumers are visited in their current order, so the result is
// deterministic.
var Schedule = &Pass{
	Name:    "schedule",
	Doc:     "order ops depth-first (TSPLIT Alg. 1)",
	Mutates: true,
	Run: func(s *State) (any, error) {
		order, err := DFSOrder(s.Model.Graph)
		if err != nil {
			return nil, err
		}
		return nil, s.Model.Graph.SetOrder(order)
	},
}

// DFSOrder computes the Alg. 1 order without applying it.
func DFSOrder(g *ir.Graph) ([]*ir.Op, error) {
	cur := g.Order()
	pos := g.Position()
	n := g.NumOpIDs()
	preds := make([]int, n) // remaining producer ops that have inputs
	lazy := make([]bool, n) // zero-input ops, placed before first use
	consumers := make([][]*ir.Op, n)
	for _, op := range cur {
		lazy[op.ID] = len(op.Inputs()) == 0
	}
	for _, op := range cur {
		seen := map[ir.OpID]bool{}
		for _, v := range op.Inputs() {
			if v == nil || v.Def == nil || seen[v.Def.ID] {
				continue
			}
			seen[v.Def.ID] = true
			if !lazy[v.Def.ID] {
				preds[op.ID]++
			}
			consumers[v.Def.ID] = append(consumers[v.Def.ID], op)
		}
	}
	for id := range consumers {
		c := consumers[id]
		sortByPos(c, pos)
	}
	done := make([]bool, n)
	out := make([]*ir.Op, 0, len(cur))
	emit := func(op *ir.Op) {
		// Zero-input producers first, in their order.
		for _, v := range op.Inputs() {
			if v != nil && v.Def != nil && lazy[v.Def.ID] && !done[v.Def.ID] {
				done[v.Def.ID] = true
				out = append(out, v.Def)
			}
		}
		done[op.ID] = true
		out = append(out, op)
	}
	type frame struct {
		op   *ir.Op
		next int
	}
	var stack []frame
	visit := func(root *ir.Op) {
		emit(root)
		stack = append(stack[:0], frame{op: root})
		for len(stack) > 0 {
			f := &stack[len(stack)-1]
			cs := consumers[f.op.ID]
			if f.next >= len(cs) {
				stack = stack[:len(stack)-1]
				continue
			}
			c := cs[f.next]
			f.next++
			preds[c.ID]--
			if preds[c.ID] == 0 && !done[c.ID] {
				emit(c)
				stack = append(stack, frame{op: c})
			}
		}
	}
	for _, op := range cur {
		if !done[op.ID] && !lazy[op.ID] && preds[op.ID] == 0 {
			visit(op)
		}
	}
	// Zero-input ops nobody consumes (or graph outputs) keep their place
	// at the end; anything left is on a cycle.
	for _, op := range cur {
		if !done[op.ID] && lazy[op.ID] {
			emit(op)
		}
	}
	if len(out) != len(cur) {
		return nil, ir.ErrCycle
	}
	return out, nil
}

func sortByPos(ops []*ir.Op, pos []int) {
	sort.Slice(ops, func(i, j int) bool { return pos[ops[i].ID] < pos[ops[j].ID] })
}
