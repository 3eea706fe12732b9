package policy

import (
	"container/heap"
	"fmt"
	"sort"

	"github.com/tsplit/tsplit/internal/units"
	"github.com/tsplit/tsplit/ir"
	"github.com/tsplit/tsplit/memory"
	"github.com/tsplit/tsplit/passes"
)

// This file holds what the baseline policies (vdnn-conv, vdnn-all,
// checkpoint, superneurons, capuchin, modnn, tflms) share: a view of the
// feature maps of one planning round and the realization of a set of
// evictions as an ordinary Plan.
//
// Feature maps. The papers' baselines evict "the feature maps": forward
// tensors kept for the backward pass. In a scheduled training step the
// tensor that crosses from the forward to the backward pass is often not
// the forward tensor itself: the depth-first schedule (TSPLIT Alg. 1)
// places every backward op that reads only forward values — Transpose(x)
// for a weight gradient, a ReLU mask, BatchNormalization's normalized
// input — as soon as its inputs exist, before the gradient seed, so it
// is their outputs that stay live until the backward pass. The turn is
// the last position before the backward pass proper (just before the
// gradient seed d loss = 1). A crossing value is an activation or graph
// input defined at or before the turn and read after it; its origins
// are the forward values (or graph inputs) it derives from through such
// hoisted ops. The baselines select crossing values by the layers of
// their origins (vDNN-conv: the origin is a convolution's input;
// SuperNeurons: the origin's producer type; TFLMS: the producer op).
// Weights (and parameters fed as inputs) are never evicted.

// fmaps is one round's view of the feature maps.
type fmaps struct {
	c     *Context
	order []*ir.Op
	pos   []int // by OpID
	n     int
	// turn is the last position before the backward pass proper: just
	// before the gradient seed (the last forward compute op when the
	// graph has none).
	turn   int
	uses   [][]int // use positions by ValueID, sorted
	origin map[ir.ValueID][]*ir.Value
}

func newFmaps(c *Context) (*fmaps, error) {
	f := &fmaps{c: c, order: c.Mem.Order, pos: c.G.Position(), n: len(c.Mem.Order), turn: -1,
		uses: make([][]int, c.G.NumValueIDs()), origin: map[ir.ValueID][]*ir.Value{}}
	lastFwd := -1
	for i, op := range f.order {
		if op.Phase == ir.Forward && ir.CopyOf(op) == ir.NoCopy {
			lastFwd = i
		}
		for _, v := range op.Inputs() {
			if v != nil {
				f.uses[v.ID] = append(f.uses[v.ID], i)
			}
		}
	}
	for id := range f.uses {
		sort.Ints(f.uses[id])
	}
	if lastFwd < 0 {
		return nil, fmt.Errorf("the graph has no forward ops: it is not a training step")
	}
	f.turn = lastFwd
	if s := gradientStart(f.order); s > 0 {
		f.turn = s - 1
	}
	return f, nil
}

// gradientStart is the position of the gradient seed d loss = 1 (a
// backward ConstantOfShape of a non-zero value, placed just before its
// first reader): the backward pass proper starts there. Backward ops
// before it read only forward values: they are precomputations the
// schedule hoisted. -1 when the graph has no seed.
func gradientStart(order []*ir.Op) int {
	for i, op := range order {
		if op.Phase != ir.Backward || op.Domain != "" || op.Type != "ConstantOfShape" {
			continue
		}
		if a := op.Attr("value"); a != nil && a.Tensor != nil {
			for _, x := range a.Tensor.Float64s() {
				if x != 0 {
					return i
				}
			}
		}
	}
	return -1
}

// interval returns v's device interval (nil: none, e.g. a host value).
func (f *fmaps) interval(v *ir.Value) *memory.Interval {
	if v == nil || int(v.ID) >= len(f.c.Mem.ByValue) {
		return nil
	}
	idx := f.c.Mem.ByValue[v.ID]
	if idx < 0 {
		return nil
	}
	return &f.c.Mem.Intervals[idx]
}

// bytes is v's aligned device size.
func (f *fmaps) bytes(v *ir.Value) int64 {
	if iv := f.interval(v); iv != nil {
		return iv.Bytes
	}
	return memory.Align(v.Bytes())
}

// defPos is the position of v's producer (-1 for graph inputs and weights).
func (f *fmaps) defPos(v *ir.Value) int {
	if v.Def == nil {
		return -1
	}
	return f.pos[v.Def.ID]
}

// evictable reports whether v may be evicted (memory.Interval.Evictable):
// an activation or a graph input, never a weight or a pinned constant.
func (f *fmaps) evictable(v *ir.Value) bool {
	iv := f.interval(v)
	return iv != nil && iv.Evictable()
}

// crosses reports whether v is a crossing value: an activation (or graph
// input) defined at or before the turn and read after it.
func (f *fmaps) crosses(v *ir.Value) bool {
	if !f.evictable(v) || f.defPos(v) > f.turn {
		return false
	}
	u := f.uses[v.ID]
	return len(u) > 0 && u[len(u)-1] > f.turn
}

// crossing lists the crossing values with at least one origin (values
// derived from weights alone, such as a transposed weight, are not
// feature maps): graph inputs first, then by producer position.
func (f *fmaps) crossing() []*ir.Value {
	var out []*ir.Value
	for _, v := range f.c.G.Inputs {
		if v.Kind == ir.KindInput && f.crosses(v) {
			out = append(out, v)
		}
	}
	for i, op := range f.order {
		if i > f.turn {
			break
		}
		for _, v := range op.Outputs() {
			if v != nil && f.crosses(v) && len(f.origins(v)) > 0 {
				out = append(out, v)
			}
		}
	}
	return out
}

// gap returns the eviction gap of a crossing value: a is its last use at
// or before the turn (its producer when it has none), q its first use
// after the turn.
func (f *fmaps) gap(v *ir.Value) (a, q int) {
	a, q = f.defPos(v), -1
	for _, u := range f.uses[v.ID] {
		if u <= f.turn {
			a = max(a, u)
		} else {
			q = u
			break
		}
	}
	return a, q
}

// origins returns the forward values and graph inputs v derives from
// through ops hoisted before the turn (v itself when a forward op or the
// caller defines it). Weights and constants are not origins.
func (f *fmaps) origins(v *ir.Value) []*ir.Value {
	if o, ok := f.origin[v.ID]; ok {
		return o
	}
	f.origin[v.ID] = nil // cycles cannot happen; guards deep recursion on repeats
	var out []*ir.Value
	switch {
	case v.Kind == ir.KindInput:
		out = []*ir.Value{v}
	case v.Kind != ir.KindOp || v.IsConst():
	case v.Def.Phase == ir.Forward:
		out = []*ir.Value{v}
	case f.pos[v.Def.ID] <= f.turn:
		seen := map[ir.ValueID]bool{}
		for _, w := range v.Def.Inputs() {
			if w == nil {
				continue
			}
			for _, o := range f.origins(w) {
				if !seen[o.ID] {
					seen[o.ID] = true
					out = append(out, o)
				}
			}
		}
	}
	f.origin[v.ID] = out
	return out
}

// opTime is the profiled time of op at position i.
func (f *fmaps) opTime(i int) float64 { return f.c.TL.End[i] - f.c.TL.Start[i] }

// evictor turns a set of evictions into decisions that InsertSwapRecompute
// realizes in one round, recomputation chains included.
//
// InsertSwapRecompute places a recompute clone just before the op at
// Before, reading the producer's current inputs, and redirects the uses
// of the value at or after Before to the restored copy. A clone that
// reads a value which is itself swapped or recomputed is therefore
// redirected to that value's restored copy only if the clone exists when
// the value's decision is processed and lies at or after the value's
// Before. The evictor guarantees both: decisions are emitted in reverse
// topological order (readers first), and each evicted value's Before
// (its anchor X) lies strictly before the anchors of the clones that read
// it: X_v = min(first use after the turn, min over recomputed readers s
// of X_s − 1). A value a clone needs that is neither resident nor
// evicted (it died in the forward pass) is restored too, by recompute or
// by what restore says, with ΔM = 0: the clone chain of a segment.
type evictor struct {
	f *fmaps
	// source marks values kept for recomputation whatever their lifetime
	// (checkpoints): a clone reading one extends its life.
	source func(w *ir.Value) bool
	// restore says how to bring back a value a clone needs that died in
	// the forward pass (nil: recompute; ok false: read the original,
	// which then stays live).
	restore func(w *ir.Value) (passes.Option, bool)
	// trigger places a swap-in for a value evicted after a and needed at
	// before (nil: before, layer-synchronous).
	trigger func(v *ir.Value, a, before int) int
	// at is the bottleneck position the decisions report.
	at int
	// dropped lists targets that could not be evicted (no room before
	// their anchor, or not clonable).
	dropped []*ir.Value
}

type evEntry struct {
	v      *ir.Value
	opt    passes.Option
	target bool
	limit  int // min anchor of recomputed readers − 1
	dpos   int
}

type evHeap []*evEntry

func (h evHeap) Len() int { return len(h) }
func (h evHeap) Less(i, j int) bool {
	if h[i].dpos != h[j].dpos {
		return h[i].dpos > h[j].dpos
	}
	return h[i].v.DefIndex > h[j].v.DefIndex
}
func (h evHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *evHeap) Push(x any)   { *h = append(*h, x.(*evEntry)) }
func (h *evHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// evictTarget is one value a policy evicts, with its option.
type evictTarget struct {
	V   *ir.Value
	Opt passes.Option
}

// plan realizes the targets (crossing values). The decisions come in
// the order InsertSwapRecompute must process them.
func (e *evictor) plan(targets []evictTarget) []*passes.Decision {
	f := e.f
	entries := map[ir.ValueID]*evEntry{}
	h := &evHeap{}
	for _, t := range targets {
		if _, dup := entries[t.V.ID]; dup {
			continue
		}
		en := &evEntry{v: t.V, opt: t.Opt, target: true, limit: f.n, dpos: f.defPos(t.V)}
		entries[t.V.ID] = en
		heap.Push(h, en)
	}
	available := func(w *ir.Value) bool {
		if w.Kind != ir.KindOp || w.IsConst() || (e.source != nil && e.source(w)) {
			return true
		}
		iv := f.interval(w)
		if iv == nil {
			return false // on the host: only a restore brings it back
		}
		return iv.Kind != memory.Activation || iv.End > f.turn
	}
	var out []*passes.Decision
	for h.Len() > 0 {
		en := heap.Pop(h).(*evEntry)
		v := en.v
		x := en.limit
		if en.target {
			if _, q := f.gap(v); q >= 0 {
				x = min(x, q)
			}
		}
		a := f.defPos(v)
		for _, u := range f.uses[v.ID] {
			if u < x {
				a = max(a, u)
			}
		}
		ok := x < f.n && x > a
		if ok && en.opt == passes.Swap && x < a+2 {
			ok = false // the device copy stays live through a+1: nothing saved
		}
		if ok && en.opt == passes.Recompute && !passes.Clonable(v) {
			ok = false
		}
		if !ok {
			if en.target {
				e.dropped = append(e.dropped, v)
			}
			continue
		}
		d := &passes.Decision{Value: v, Option: en.opt, After: a, Before: x, Trigger: x, At: e.at}
		if en.target {
			d.DeltaM = f.bytes(v)
		}
		switch en.opt {
		case passes.Swap:
			if e.trigger != nil {
				d.Trigger = min(max(e.trigger(v, a, x), a+1), x)
			}
			d.DeltaT = e.swapCost(v, a, d.Trigger, x)
		case passes.Recompute:
			d.DeltaT = f.c.Prof.OpTime(v.Def)
			for _, w := range v.Def.Inputs() {
				if w == nil {
					continue
				}
				if we, ok := entries[w.ID]; ok {
					we.limit = min(we.limit, x-1)
					continue
				}
				if available(w) {
					continue
				}
				opt, ok := passes.Recompute, true
				if e.restore != nil {
					opt, ok = e.restore(w)
				}
				if !ok {
					continue
				}
				we := &evEntry{v: w, opt: opt, limit: x - 1, dpos: f.defPos(w)}
				entries[w.ID] = we
				heap.Push(h, we)
			}
		}
		out = append(out, d)
	}
	return out
}

// swapCost is the swap's ΔT: the swap-out not hidden by the compute
// between the eviction and the trigger, plus the swap-in not hidden by
// the compute between trigger and consumer.
func (e *evictor) swapCost(v *ir.Value, a, trigger, before int) float64 {
	f := e.f
	out := f.c.Prof.TransferTime(v.Bytes(), true)
	in := f.c.Prof.TransferTime(v.Bytes(), false)
	var hideOut, hideIn float64
	for u := a + 1; u < trigger; u++ {
		hideOut += f.opTime(u)
	}
	for u := trigger; u < before; u++ {
		hideIn += f.opTime(u)
	}
	return max(out-hideOut, 0) + max(in-hideIn, 0)
}

// staticRound is what a policy that decides everything in round 0
// answers in later rounds: the plan did not fit, and it has nothing
// more to evict.
func staticRound(c *Context, name, what string) error {
	at := "the start"
	if c.Mem.PeakAt >= 0 {
		at = c.Mem.Order[c.Mem.PeakAt].Describe()
	}
	return fmt.Errorf("policy %s cannot fit the budget of %s: after it %s, the step still peaks at %s at %s",
		name, c.BudgetText(), what, units.Bytes(c.Mem.Peak), at)
}
