package passes

import (
	"fmt"
	"sort"

	"github.com/tsplit/tsplit/memory"

	"github.com/tsplit/tsplit/ir"
)

// OpOrder names an op order the planner can plan under. Which order is
// best depends on the model and the budget (issue 11): Alg. 1's
// depth-first order keeps chains short and gives VGG its largest split
// batches, but on the training graph it hoists every backward op that
// reads only forward values (a weight gradient's Transpose, a ReLU
// mask) next to its inputs, so what is live at the peak is backward
// outputs no recompute chain can rebuild; the order the step was built
// in, or depth-first forward with backward ops as late as their
// consumers allow, leave the feature maps themselves live, which
// recomputation can drop.
type OpOrder string

// Orders.
const (
	// OrderAuto lets the policy choose: tsplit plans under every order
	// of Orders and keeps the fastest plan that fits; the other
	// policies plan under their DefaultOrder.
	OrderAuto OpOrder = ""
	// OrderDFS is TSPLIT Alg. 1 over the whole step (DFSOrder).
	OrderDFS OpOrder = "dfs"
	// OrderAsBuilt is the order the training step was built in: the
	// forward pass, the loss, the backward pass in reverse, the update
	// — what a framework runs.
	OrderAsBuilt OpOrder = "as-built"
	// OrderALAP is Alg. 1's order for the forward pass and the loss,
	// then every backward and update op as late as its consumers allow
	// (ALAPOrder).
	OrderALAP OpOrder = "alap"
)

// Orders are the orders tsplit searches, in the order ties are broken.
var Orders = []OpOrder{OrderDFS, OrderALAP, OrderAsBuilt}

// ParseOrder reads an order's name ("auto" or "" is OrderAuto).
func ParseOrder(s string) (OpOrder, error) {
	if s == "" || s == "auto" {
		return OrderAuto, nil
	}
	for _, o := range Orders {
		if string(o) == s {
			return o, nil
		}
	}
	return "", fmt.Errorf("unknown op order %q (want auto, dfs, alap or as-built)", s)
}

// OrderOf computes order o of g from g's current order, which Schedule
// takes as the order the step was built in.
func OrderOf(g *ir.Graph, o OpOrder) ([]*ir.Op, error) {
	switch o {
	case OrderDFS:
		return DFSOrder(g)
	case OrderALAP:
		return ALAPOrder(g)
	case OrderAsBuilt:
		return append([]*ir.Op(nil), g.Order()...), nil
	}
	return nil, fmt.Errorf("no order %q to compute", o)
}

// Schedule orders the ops of the training graph: by Options.Order when
// set, else by the policy's DefaultOrder (TSPLIT Alg. 1, depth-first,
// for most). It first records the step as built — its memory model and
// simulated time are the unplanned step's, which the report compares
// against — and the order itself, from which a policy that searches
// orders (tsplit) computes the others.
var Schedule = &Pass{
	Name:    "schedule",
	Doc:     "order ops: TSPLIT Alg. 1 depth-first, as built, or backward as late as possible",
	Mutates: true,
	Run: func(s *State) (any, error) {
		g := s.Model.Graph
		if err := s.recordAsBuilt(); err != nil {
			return nil, err
		}
		o := s.Opts.Order
		if o == OrderAuto {
			o = OrderDFS
			if s.Opts.Policy != nil {
				o = s.Opts.Policy.DefaultOrder()
			}
		}
		order, err := OrderOf(g, o)
		if err != nil {
			return nil, err
		}
		s.order = o
		return nil, g.SetOrder(order)
	},
}

// recordAsBuilt keeps the step as built: its op order and the peak and
// time of running it unplanned.
func (s *State) recordAsBuilt() error {
	if s.asBuilt != nil {
		return nil
	}
	g := s.Model.Graph
	mem, err := memory.Analyze(g, memory.Options{})
	if err != nil {
		return err
	}
	tl := Simulate(g, mem, profileOf(s))
	ab := &asBuilt{peak: mem.Peak, time: tl.StepTime, timeline: timeline(mem, tl)}
	for _, op := range g.Order() {
		ab.order = append(ab.order, op.ID)
	}
	s.asBuilt = ab
	return nil
}

// asBuilt is the unplanned step in the order it was built in.
type asBuilt struct {
	order    []ir.OpID
	peak     int64
	time     float64
	timeline []TimelinePoint
}

// Reorder sets the graph of s (a fork over a copy of the model taken
// after Schedule, whose op IDs are the original's) to order o, computed
// from the order the step was built in.
func (s *State) Reorder(o OpOrder) error {
	g := s.Model.Graph
	if s.asBuilt == nil {
		return fmt.Errorf("reorder: the schedule pass has not recorded the step as built")
	}
	ops := make([]*ir.Op, 0, len(s.asBuilt.order))
	for _, id := range s.asBuilt.order {
		op := g.OpByID(id)
		if op == nil {
			return fmt.Errorf("reorder: op %d of the step as built is gone", id)
		}
		ops = append(ops, op)
	}
	if err := g.SetOrder(ops); err != nil {
		return err
	}
	order, err := OrderOf(g, o)
	if err != nil {
		return err
	}
	s.order = o
	s.results, s.done = map[*Pass]any{}, map[*Pass]bool{Schedule: true}
	return g.SetOrder(order)
}

// ScheduledOrder is the order s's graph was scheduled in.
func (s *State) ScheduledOrder() OpOrder { return s.order }

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

// ALAPOrder is Alg. 1's depth-first order with every hoisted backward
// op sunk to just before its first consumer. A backward op is hoisted
// when it reads only forward values (and constants, and other hoisted
// ops): the depth-first order runs it next to its inputs, in the
// forward pass — a weight gradient's Transpose of a layer input, a ReLU
// mask, x̂ of a normalization — and its output, which no recompute
// chain can rebuild, stays live until the backward pass. Sunk, the
// forward tensors it reads stay live instead, and those the planner can
// recompute. The other backward and update ops keep their depth-first
// places (a weight's gradient and update right after the gradient they
// read, which frees it).
func ALAPOrder(g *ir.Graph) ([]*ir.Op, error) {
	order, err := DFSOrder(g)
	if err != nil {
		return nil, err
	}
	n := g.NumOpIDs()
	hoisted := make([]bool, n)
	for _, op := range order {
		if op.Phase != ir.Backward || len(op.Inputs()) == 0 {
			continue
		}
		h := true
		for _, v := range op.Inputs() {
			if v != nil && v.Def != nil && v.Def.Phase != ir.Forward && !hoisted[v.Def.ID] && len(v.Def.Inputs()) > 0 {
				h = false
				break
			}
		}
		hoisted[op.ID] = h
	}
	// Sink the hoisted ops last first, so a chain of them follows its
	// consumer down: each is moved to just before its earliest consumer.
	at := make([]int, n)
	index := func() {
		for i, op := range order {
			at[op.ID] = i
		}
	}
	index()
	for k := len(order) - 1; k >= 0; k-- {
		op := order[k]
		if !hoisted[op.ID] {
			continue
		}
		first := len(order)
		for _, v := range op.Outputs() {
			if v == nil {
				continue
			}
			for _, u := range v.Uses() {
				first = min(first, at[u.Op.ID])
			}
		}
		if first == len(order) || first <= k+1 {
			continue // a graph output, or already in place
		}
		// Remove it at k and insert it before the consumer (now at first-1).
		copy(order[k:first-1], order[k+1:first])
		order[first-1] = op
		for i := k; i < first; i++ {
			at[order[i].ID] = i
		}
	}
	if err := checkTopological(g, order); err != nil {
		return nil, fmt.Errorf("alap order: %w", err)
	}
	return order, nil
}

// checkTopological reports the first op of order that reads a value
// produced later.
func checkTopological(g *ir.Graph, order []*ir.Op) error {
	at := make([]int, g.NumOpIDs())
	for i, op := range order {
		at[op.ID] = i
	}
	for i, op := range order {
		for _, v := range op.Inputs() {
			if v != nil && v.Def != nil && at[v.Def.ID] > i {
				return fmt.Errorf("%s reads %q before %s produces it", op.Describe(), v.Name, v.Def.Describe())
			}
		}
	}
	return nil
}
