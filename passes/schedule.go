package passes

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"

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
	// OrderGradFirst is OrderALAP with each backward value's shortest
	// branch first — a weight's gradient before the data gradient that
	// leads on through the backward pass — and the weight gradient of
	// the first layer right after its output gradient
	// (GradFirstOrder).
	OrderGradFirst OpOrder = "grad-first"
	// OrderShrinkEarly is OrderGradFirst with each hoisted op that
	// makes less than it frees — a ReLU's mask of an activation only a
	// max pool reads besides — run as soon as it frees it, in the
	// forward pass (ShrinkEarlyOrder).
	OrderShrinkEarly OpOrder = "shrink-early"
)

// Orders are the orders tsplit searches, in the order ties are broken.
var Orders = []OpOrder{OrderDFS, OrderALAP, OrderAsBuilt, OrderGradFirst, OrderShrinkEarly}

// ErrSameOrder is Reorder's answer where order o of the step is the
// same as the order it is derived from (shrink-early moved no op from
// its place in grad-first): a search plans that order once.
var ErrSameOrder = errors.New("the same op order as the one it is derived from")

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
	return "", fmt.Errorf("unknown op order %q (want auto, dfs, alap, as-built, grad-first or shrink-early)", s)
}

// OrderOf computes order o of g from g's current order, which Schedule
// takes as the order the step was built in.
func OrderOf(g *ir.Graph, o OpOrder) ([]*ir.Op, error) {
	switch o {
	case OrderDFS:
		return DFSOrder(g)
	case OrderALAP:
		return ALAPOrder(g)
	case OrderGradFirst:
		return GradFirstOrder(g)
	case OrderShrinkEarly:
		order, _, err := ShrinkEarlyOrder(g)
		return order, err
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
	// orders are the orders Reorder computed from it, by name: forks
	// share the record and reorder copies of one graph many times (a
	// tsplit search: every variant, re-plan and grid point, ~20 on
	// BERT-large, where ALAP and grad-first take 10 ms each to compute).
	mu     sync.Mutex
	orders map[OpOrder][]ir.OpID
	// same marks the orders found equal to the order they are derived
	// from (ErrSameOrder).
	same map[OpOrder]bool
}

// Reorder sets the graph of s (a fork over a copy of the model taken
// after Schedule, whose op IDs are the original's) to order o, computed
// from the order the step was built in, the first time for each order;
// later copies take that result. It returns ErrSameOrder, leaving the
// graph in some order, for shrink-early where that is grad-first's.
func (s *State) Reorder(o OpOrder) error {
	g := s.Model.Graph
	ab := s.asBuilt
	if ab == nil {
		return fmt.Errorf("reorder: the schedule pass has not recorded the step as built")
	}
	ids := func(ids []ir.OpID) ([]*ir.Op, error) {
		ops := make([]*ir.Op, 0, len(ids))
		for _, id := range ids {
			op := g.OpByID(id)
			if op == nil {
				return nil, fmt.Errorf("reorder: op %d of the step as built is gone", id)
			}
			ops = append(ops, op)
		}
		return ops, nil
	}
	ab.mu.Lock()
	known, ok := ab.orders[o]
	same := ab.same[o]
	ab.mu.Unlock()
	if same {
		return ErrSameOrder
	}
	if ok {
		order, err := ids(known)
		if err != nil {
			return err
		}
		if err := g.SetOrder(order); err != nil {
			return err
		}
	} else {
		ops, err := ids(ab.order)
		if err != nil {
			return err
		}
		if err := g.SetOrder(ops); err != nil {
			return err
		}
		var order []*ir.Op
		moved := true
		if o == OrderShrinkEarly {
			order, moved, err = ShrinkEarlyOrder(g)
		} else {
			order, err = OrderOf(g, o)
		}
		if err != nil {
			return err
		}
		if !moved {
			ab.mu.Lock()
			if ab.same == nil {
				ab.same = map[OpOrder]bool{}
			}
			ab.same[o] = true
			ab.mu.Unlock()
			return ErrSameOrder
		}
		if err := g.SetOrder(order); err != nil {
			return err
		}
		computed := make([]ir.OpID, len(order))
		for i, op := range order {
			computed[i] = op.ID
		}
		ab.mu.Lock()
		if ab.orders == nil {
			ab.orders = map[OpOrder][]ir.OpID{}
		}
		ab.orders[o] = computed
		ab.mu.Unlock()
	}
	s.order = o
	s.results, s.done = map[*Pass]any{}, map[*Pass]bool{Schedule: true}
	return nil
}

// ScheduledOrder is the order s's graph was scheduled in.
func (s *State) ScheduledOrder() OpOrder { return s.order }

// DFSOrder computes the Alg. 1 order without applying it.
func DFSOrder(g *ir.Graph) ([]*ir.Op, error) { return dfsOrder(g, false) }

// dfsOrder is Alg. 1; shortFirst visits the consumers of a backward op
// by the length of the longest path from them to the step's end, the
// shortest first (ties in the current order): a weight's gradient, a
// branch that ends at its update, runs before the data gradient, which
// leads on through the rest of the backward pass, and the tensors it
// reads are freed before that pass goes on.
func dfsOrder(g *ir.Graph, shortFirst bool) ([]*ir.Op, error) {
	cur := g.Order()
	pos := g.Position()
	n := g.NumOpIDs()
	preds := make([]int, n) // remaining producer ops that have inputs
	lazy := make([]bool, n) // zero-input ops, placed before first use
	consumers := make([][]*ir.Op, n)
	for _, op := range cur {
		lazy[op.ID] = len(op.Inputs()) == 0
	}
	// seenBy[p] is the last op (ID+1) that counted producer p: an op
	// counts each producer once however many of its values it reads.
	seenBy := make([]ir.OpID, n)
	for _, op := range cur {
		for _, v := range op.Inputs() {
			if v == nil || v.Def == nil || seenBy[v.Def.ID] == op.ID+1 {
				continue
			}
			seenBy[v.Def.ID] = op.ID + 1
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
	if shortFirst {
		height := make([]int, n)
		for k := len(cur) - 1; k >= 0; k-- {
			op := cur[k]
			for _, c := range consumers[op.ID] {
				height[op.ID] = max(height[op.ID], height[c.ID]+1)
			}
		}
		for _, op := range cur {
			if op.Phase != ir.Forward {
				sort.SliceStable(consumers[op.ID], func(a, b int) bool {
					return height[consumers[op.ID][a].ID] < height[consumers[op.ID][b].ID]
				})
			}
		}
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
	// Positions are distinct: the unstable sort is deterministic.
	slices.SortFunc(ops, func(a, b *ir.Op) int { return pos[a.ID] - pos[b.ID] })
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
	order, _, err := alapOrder(g, false, false)
	return order, err
}

// GradFirstOrder is ALAPOrder with the backward pass walked shortest
// branch first (dfsOrder's shortFirst) and the consumers of hoisted
// roots raised (raiseRootConsumers). Alg. 1 visits a value's consumers
// in the order they were built: from an output gradient, the data
// gradient first, which runs on through the rest of the block before
// the weight gradient, so the block's output gradients and their
// transposes stay live together. On VGG-16 b320 that lowers the
// unplanned backward peak from 25.16 to 24.76 GB, and more where the
// planner must evict (docs/planner.md §2a). It is an order of its own,
// not ALAP's replacement: the greedy planner's plans change with the
// order either way, and on the CI sweeps ALAP's stays the faster at a
// few budgets of ResNet, Inception and BERT.
func GradFirstOrder(g *ir.Graph) ([]*ir.Op, error) {
	order, _, err := alapOrder(g, true, false)
	return order, err
}

// ShrinkEarlyOrder is GradFirstOrder with the hoisted ops that make
// less than they free raised back to just after the last other reader
// of what they free (raiseShrinking). moved says whether any op moved:
// where none did, the order is GradFirstOrder's. It is an order of its
// own, not grad-first's replacement: its unplanned peak is never
// higher, but the greedy planner's plans differ (VGG-16 b320: +0.00 %
// instead of +19.70 % at 70 % of the as-built peak, +39.3 % instead of
// +22.1 % at 65 %; docs/planner.md §2a).
func ShrinkEarlyOrder(g *ir.Graph) (order []*ir.Op, moved bool, err error) {
	return alapOrder(g, true, true)
}

// alapOrder is ALAPOrder, GradFirstOrder with gradFirst, and
// ShrinkEarlyOrder with shrink too (moved: raiseShrinking moved an op).
func alapOrder(g *ir.Graph, gradFirst, shrink bool) (order []*ir.Op, moved bool, err error) {
	order, err = dfsOrder(g, gradFirst)
	if err != nil {
		return nil, false, err
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
	// The moves shift op IDs, not pointers: shifting a slice of pointers
	// pays a write barrier per element while the collector runs, which
	// made this loop most of the order's cost.
	at := make([]int, n)
	ids := make([]ir.OpID, len(order))
	byID := make([]*ir.Op, n)
	for i, op := range order {
		at[op.ID], ids[i], byID[op.ID] = i, op.ID, op
	}
	for k := len(ids) - 1; k >= 0; k-- {
		op := byID[ids[k]]
		if !hoisted[op.ID] {
			continue
		}
		first := len(ids)
		for _, v := range op.Outputs() {
			if v == nil {
				continue
			}
			for _, u := range v.Uses() {
				first = min(first, at[u.Op.ID])
			}
		}
		if first == len(ids) || first <= k+1 {
			continue // a graph output, or already in place
		}
		// Remove it at k and insert it before the consumer (now at first-1).
		copy(ids[k:first-1], ids[k+1:first])
		ids[first-1] = op.ID
		for i := k; i < first; i++ {
			at[ids[i]] = i
		}
	}
	for i, id := range ids {
		order[i] = byID[id]
	}
	if gradFirst {
		order = raiseRootConsumers(order, hoisted, n)
	}
	if shrink {
		order, moved = raiseShrinking(order, hoisted, n)
	}
	if err := checkTopological(g, order); err != nil {
		return nil, false, fmt.Errorf("alap order: %w", err)
	}
	return order, moved, nil
}

// raiseShrinking moves each sunk hoisted op that is the last reader of
// forward values larger than its outputs back up, to just after the
// last other reader of those values (and its producers): a ReLU's mask
// (one byte per element) of an activation that only a max pool reads
// in the forward pass. Sunk, the activation itself (four bytes per
// element) stays live over the rest of the forward and the backward
// pass until the mask is taken; raised, only the mask does, so the
// bytes live at every position in between go down by the difference and
// nothing else changes. On VGG-16 b320 the last ReLU of each block is
// read only by its pool and its mask: 5.8 of the 25.2 GB at the peak.
// Hoisted ops whose outputs are no smaller than what they free (a
// weight gradient's Transpose, x̂ of a normalization, a mask of an
// activation the next layer reads too) stay sunk.
func raiseShrinking(order []*ir.Op, hoisted []bool, n int) (_ []*ir.Op, moved bool) {
	at := make([]int, n)
	for i, op := range order {
		at[op.ID] = i
	}
	// target is where h, at k, would go: after last, the last producer
	// or other reader of what it frees; gain is what it frees less what
	// it makes.
	target := func(h *ir.Op, k int) (last int, gain int64) {
		last = -1
		for j, v := range h.Inputs() {
			if v == nil || v.Def == nil || slices.Contains(h.Inputs()[:j], v) {
				continue
			}
			last = max(last, at[v.Def.ID])
			if len(v.Def.Inputs()) == 0 {
				continue // a constant, placed before its first use anyway
			}
			freed, other := true, -1
			for _, u := range v.Uses() {
				if u.Op == h {
					continue
				}
				if p := at[u.Op.ID]; p > k {
					freed = false
				} else {
					other = max(other, p)
				}
			}
			if freed {
				gain += v.Bytes()
				last = max(last, other)
			}
		}
		for _, v := range h.Outputs() {
			if v != nil {
				gain -= v.Bytes()
			}
		}
		return last, gain
	}
	// move moves the op at k to just before position to (to < k).
	move := func(k, to int) {
		h := order[k]
		copy(order[to+1:k+1], order[to:k])
		order[to] = h
		for i := to; i <= k; i++ {
			at[order[i].ID] = i
		}
	}
	var live []int64 // liveAfter(order), computed where needed
	// fits says whether h, at k, may run right after last: what is live
	// there with h's output is no more than the most live with an op's
	// outputs at one of the positions after last up to k, each of which
	// the move lowers by what h frees, so the step's peak over them does
	// not go up.
	fits := func(h *ir.Op, k, last int) bool {
		if live == nil {
			live = liveAfter(order, at)
		}
		out := outBytes(h)
		var most int64
		for j := last + 1; j <= k; j++ {
			most = max(most, live[j-1]+outBytes(order[j]))
		}
		return live[last]+out <= most
	}
	for k := 0; k < len(order); k++ {
		h := order[k]
		if !hoisted[h.ID] {
			continue
		}
		last, gain := target(h, k)
		if gain <= 0 || last+1 >= k {
			continue
		}
		if !fits(h, k, last) {
			// Where the last other reader is a hoisted op sunk behind
			// producers that only its consumer reads (a weight
			// gradient's Transpose of an activation, behind the
			// Transpose of the output gradient), it may run before
			// them: the value is then freed before they make theirs.
			r := exclusiveRun(order, hoisted, last)
			if r == last {
				continue
			}
			keep := slices.Clone(order)
			move(last, r)
			live = nil
			last2, _ := target(h, k)
			if last2+1 >= k || !fits(h, k, last2) {
				copy(order, keep)
				for i, op := range order {
					at[op.ID] = i
				}
				live = nil
				continue
			}
			last = last2
		}
		move(k, last+1)
		live, moved = nil, true
	}
	return order, moved
}

// exclusiveRun is where the hoisted op at position last may go up to:
// before the ops just before it that feed only its consumer right after
// it, and that it does not read (last itself where there are none).
func exclusiveRun(order []*ir.Op, hoisted []bool, last int) int {
	h := order[last]
	if !hoisted[h.ID] || last+1 >= len(order) {
		return last
	}
	c := order[last+1]
	if !feeds(h, []*ir.Op{c}) {
		return last
	}
	r := last
	for r > 0 {
		p := order[r-1]
		if hoisted[p.ID] || len(p.Inputs()) == 0 || feeds(p, []*ir.Op{h}) {
			break
		}
		only, read := true, false
		for _, v := range p.Outputs() {
			if v == nil {
				continue
			}
			for _, u := range v.Uses() {
				only, read = only && u.Op == c, true
			}
		}
		only = only && read
		if !only {
			break
		}
		r--
	}
	return r
}

// outBytes is the bytes of op's outputs.
func outBytes(op *ir.Op) int64 {
	var b int64
	for _, v := range op.Outputs() {
		if v != nil {
			b += v.Bytes()
		}
	}
	return b
}

// liveAfter is, per position of order, the bytes of the values live
// after the op there: made there or before and read after it (a value
// nothing reads, such as an updated weight, to the end). Graph inputs
// and constants, live throughout, are left out: raiseShrinking only
// compares positions.
func liveAfter(order []*ir.Op, at []int) []int64 {
	n := len(order)
	diff := make([]int64, n+1)
	for i, op := range order {
		if len(op.Inputs()) == 0 {
			continue
		}
		for _, v := range op.Outputs() {
			if v == nil {
				continue
			}
			end := n
			if len(v.Uses()) > 0 {
				end = i
				for _, u := range v.Uses() {
					end = max(end, at[u.Op.ID])
				}
			}
			diff[i] += v.Bytes()
			diff[end] -= v.Bytes()
		}
	}
	live := make([]int64, n)
	var sum int64
	for i := range live {
		sum += diff[i]
		live[i] = sum
	}
	return live
}

// raiseRootConsumers moves each backward op that reads a hoisted op
// Alg. 1 visits as a root — one that reads only graph inputs and
// constants, like the Transpose of the image for the first
// convolution's weight gradient — up to just after the last of its
// other producers, its hoisted producers with it. Alg. 1 visits such a
// root only after the walk from the first op has emitted the whole
// step, so its consumer ran last, and the backward value it also reads
// stayed live over the rest of the backward pass (VGG-16 b320: the
// first convolution's 4.1 GB output gradient over the second's weight
// gradient, where the step peaks after the forward pass).
func raiseRootConsumers(order []*ir.Op, hoisted []bool, n int) []*ir.Op {
	root := func(op *ir.Op) bool {
		if !hoisted[op.ID] {
			return false
		}
		for _, v := range op.Inputs() {
			if v != nil && v.Def != nil && len(v.Def.Inputs()) > 0 {
				return false
			}
		}
		return true
	}
	at := make([]int, n)
	for i, op := range order {
		at[op.ID] = i
	}
	for k := 0; k < len(order); k++ {
		c := order[k]
		if hoisted[c.ID] || c.Phase != ir.Backward {
			continue
		}
		// The hoisted producers sunk just before c, and whether one of
		// them is a root.
		lo, fromRoot := k, false
		for lo > 0 && hoisted[order[lo-1].ID] && feeds(order[lo-1], order[lo:k+1]) {
			lo--
			fromRoot = fromRoot || root(order[lo])
		}
		if !fromRoot {
			continue
		}
		last := -1
		for _, op := range order[lo : k+1] {
			for _, v := range op.Inputs() {
				if v != nil && v.Def != nil {
					if p := at[v.Def.ID]; p < lo {
						last = max(last, p)
					}
				}
			}
		}
		if last+1 >= lo || frees(order[lo:k+1], at, last) <= 0 {
			continue
		}
		moved := append([]*ir.Op(nil), order[lo:k+1]...)
		copy(order[last+1+len(moved):k+1], order[last+1:lo])
		copy(order[last+1:], moved)
		for i := last + 1; i <= k; i++ {
			at[order[i].ID] = i
		}
	}
	return order
}

// frees is what moving group (the ops at positions k-len(group)+1 … k)
// up to just after position last frees sooner: the bytes of the values
// it reads that nothing else reads after last, less those of its
// outputs read after it.
func frees(group []*ir.Op, at []int, last int) int64 {
	lo := at[group[0].ID]
	k := lo + len(group) - 1
	var b int64
	seen := map[ir.ValueID]bool{}
	for _, op := range group {
		for _, v := range op.Inputs() {
			if v == nil || v.Def == nil || at[v.Def.ID] >= lo || seen[v.ID] {
				continue
			}
			seen[v.ID] = true
			freed := true
			for _, u := range v.Uses() {
				if p := at[u.Op.ID]; p < lo || p > k {
					freed = freed && p <= last
				}
			}
			if freed {
				b += v.Bytes()
			}
		}
		for _, v := range op.Outputs() {
			if v == nil {
				continue
			}
			for _, u := range v.Uses() {
				if at[u.Op.ID] > k {
					b -= v.Bytes()
					break
				}
			}
		}
	}
	return b
}

// feeds reports whether op's output is read by one of ops.
func feeds(op *ir.Op, ops []*ir.Op) bool {
	for _, v := range op.Outputs() {
		if v == nil {
			continue
		}
		for _, u := range v.Uses() {
			for _, c := range ops {
				if u.Op == c {
					return true
				}
			}
		}
	}
	return false
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
