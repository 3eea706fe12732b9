package policy

import (
	"slices"

	"github.com/tsplit/tsplit/ir"
	"github.com/tsplit/tsplit/memory"
	"github.com/tsplit/tsplit/passes"
)

// Segment recomputation (TSPLIT §V-D, the speed-centric strategy).
//
// A recomputation chain (chains.go) is chosen tensor by tensor and
// recomputes, for each consumer, everything back to tensors still live
// where it runs: memory-centric. Where a round evicts most of the
// forward pass, as at a fifth of BERT-base's peak, the tensors that
// would stop a chain are evicted in the same round, so the chains run
// back along the residual stream past maxChainOps and only swaps are
// left, which saturate the device-to-host link. A segment candidate
// evicts instead every activation of one run of the forward pass
// between two cuts of the forward graph (the checkpoints, kept) that is
// live across the bottleneck and read again in the backward pass, and
// recomputes the run once, just before the first backward use of any of
// them; each recomputed tensor is then held from there to its own last
// use, as in the unplanned step. ΔT (Eq. 4) is the run's compute once,
// ΔM the bytes of every tensor it evicts.
//
// A plan expresses a segment with the encoding of the baselines'
// evictor: one Recompute decision per recomputed value, all placed
// before the same op, in schedule order, so that InsertSwapRecompute
// clones them in order and each clone reads the clones before it. The
// evicted values carry their bytes as ΔM; the values the run needs that
// are not live there any more (members) carry 0.

// maxSegmentOps bounds the ops one segment recomputes: a run that needs
// a checkpoint which is not there any more reaches into the runs before
// it.
const maxSegmentOps = 96

// segUnits are the runs of forward ops between consecutive cuts of the
// forward graph in the planner's order (forwardCuts): unit u holds the
// ops after the u-th cut's producer up to the next cut's producer,
// which closes it.
type segUnits struct {
	of  []int32 // unit by OpID, -1: not a forward op
	ops [][]*ir.Op
}

// units returns (and on first use computes) the planner's segment
// units.
func (pl *planner) units() *segUnits {
	if pl.segs != nil {
		return pl.segs
	}
	s := &segUnits{of: make([]int32, pl.G.NumOpIDs())}
	for k := range s.of {
		s.of[k] = -1
	}
	evictable := func(v *ir.Value) bool {
		if int(v.ID) >= len(pl.Mem.ByValue) {
			return false
		}
		idx := pl.Mem.ByValue[v.ID]
		return idx >= 0 && pl.Mem.Intervals[idx].Evictable()
	}
	_, at, _ := forwardCuts(pl.Mem.Order, evictable)
	j, u := 0, 0
	s.ops = append(s.ops, nil)
	for _, op := range pl.Mem.Order {
		if op.Phase != ir.Forward || ir.CopyOf(op) != ir.NoCopy {
			continue
		}
		s.of[op.ID] = int32(u)
		s.ops[u] = append(s.ops[u], op)
		if u < len(at) && j == at[u] {
			u++
			s.ops = append(s.ops, nil)
		}
		j++
	}
	pl.segs = s
	return s
}

// segment is one segment candidate.
type segment struct {
	// ops are the ops to clone, in schedule order.
	ops []*ir.Op
	// evict are the values the segment evicts (live across the
	// bottleneck), with the last use before their gap; members the
	// other values its clones read that are not there any more.
	evict   []segValue
	members []segValue
	// reads are the checkpoints read at at; extend those of them held
	// past their last use until then.
	reads, extend []*ir.Value
	// at is where the clones run: the first next use of any evicted
	// value.
	at int
	// time is ΔT: the ops' compute, once; dm the bytes evicted.
	time float64
	dm   int64
	// extra is the transient memory of the clones at at beyond what the
	// memory model has live there.
	extra int64
}

type segValue struct {
	v     *ir.Value
	after int
	// evicted: live across the bottleneck, freed until the segment runs
	// (else a member, recomputed only for the segment's own clones).
	evicted bool
}

// segmentCandidate builds unit u's segment at bottleneck i: it fails
// when no value of the unit can be evicted there, when a value the run
// needs can neither be read nor recomputed, when the run grows past
// maxSegmentOps, or when its clones do not fit where they run.
func (pl *planner) segmentCandidate(u, i int) (*segment, bool) {
	us := pl.units()
	op := pl.Mem.Order[i]
	sg := &segment{at: pl.n}
	for _, x := range us.ops[u] {
		for _, o := range x.Outputs() {
			if o == nil || !pl.chainClonable(o) || int(o.ID) >= len(pl.Mem.ByValue) {
				continue
			}
			idx := pl.Mem.ByValue[o.ID]
			if idx < 0 {
				continue
			}
			iv := &pl.Mem.Intervals[idx]
			if !iv.Evictable() || pl.decided[o.ID] || iv.Start >= i || iv.End <= i || iv.End >= pl.n || reads(op, o) {
				continue
			}
			a, q := iv.Start, -1
			for _, p := range pl.uses[o.ID] {
				if p < i {
					a = max(a, p)
				} else if p > i {
					q = p
					break
				}
			}
			if q < 0 || pl.Mem.Order[q].Phase == ir.Forward {
				continue
			}
			sg.evict = append(sg.evict, segValue{o, a, true})
			sg.dm += iv.Bytes
			sg.at = min(sg.at, q)
		}
	}
	if len(sg.evict) == 0 {
		return nil, false
	}
	r := sg.at
	in := func(x *ir.Op) bool { return slices.Contains(sg.ops, x) }
	for _, e := range sg.evict {
		if !in(e.v.Def) {
			sg.ops = append(sg.ops, e.v.Def)
		}
	}
	isEvicted := func(w *ir.Value) bool {
		return slices.ContainsFunc(sg.evict, func(e segValue) bool { return e.v == w })
	}
	isMember := func(w *ir.Value) bool {
		return slices.ContainsFunc(sg.members, func(e segValue) bool { return e.v == w })
	}
	for k := 0; k < len(sg.ops); k++ {
		for _, w := range sg.ops[k].Inputs() {
			if w == nil || w.IsConst() || isEvicted(w) || isMember(w) || slices.Contains(sg.reads, w) {
				continue
			}
			if int(w.ID) >= len(pl.Mem.ByValue) || pl.Mem.ByValue[w.ID] < 0 {
				return nil, false
			}
			iv := &pl.Mem.Intervals[pl.Mem.ByValue[w.ID]]
			last := pl.lastUse(w, iv)
			switch {
			case iv.Kind == memory.Weight || iv.Kind == memory.Input:
				if pl.decided[w.ID] {
					return nil, false
				}
				sg.reads = append(sg.reads, w)
				if last < r {
					sg.extend = append(sg.extend, w)
				}
				continue
			case !pl.decided[w.ID] && iv.Start < r && last >= r:
				sg.reads = append(sg.reads, w) // a checkpoint
				continue
			case pl.decided[w.ID] && pl.restoredBy(w) >= 0 && pl.restoredBy(w) <= r && last >= r:
				sg.reads = append(sg.reads, w) // back by r: a swap-in or another segment
				continue
			case !pl.decided[w.ID] && iv.Kind == memory.Activation:
				if c := pl.restoredAt(w, r); c != nil {
					if !slices.Contains(sg.reads, c) {
						sg.reads = append(sg.reads, c)
					}
					continue
				}
			}
			if iv.Kind != memory.Activation || !pl.chainClonable(w) {
				return nil, false
			}
			a := pl.pos[w.Def.ID]
			for _, p := range pl.uses[w.ID] {
				if p < r {
					a = max(a, p)
				}
			}
			sg.members = append(sg.members, segValue{w, a, false})
			if !in(w.Def) {
				if len(sg.ops) == maxSegmentOps {
					return nil, false
				}
				sg.ops = append(sg.ops, w.Def)
			}
		}
	}
	byPos := func(a, b segValue) int {
		if pa, pb := pl.pos[a.v.Def.ID], pl.pos[b.v.Def.ID]; pa != pb {
			return pa - pb
		}
		return a.v.DefIndex - b.v.DefIndex
	}
	slices.SortFunc(sg.ops, func(a, b *ir.Op) int { return pl.pos[a.ID] - pl.pos[b.ID] })
	slices.SortFunc(sg.evict, byPos)
	slices.SortFunc(sg.members, byPos)
	for _, x := range sg.ops {
		sg.time += pl.opTime[pl.pos[x.ID]]
	}
	if pl.LinkPrice > 0 {
		// Other variants' segments keep their ΔT without it.
		for _, w := range sg.reads {
			sg.time += pl.lateAt(w, r)
		}
	}
	// Inputs and weights read past their last use are held until r.
	for _, w := range sg.extend {
		b := pl.valueBytes(w)
		last := pl.lastUse(w, &pl.Mem.Intervals[pl.Mem.ByValue[w.ID]])
		if last < i {
			sg.dm -= b
		}
		for k := last + 1; k <= r && k < pl.n; k++ {
			if pl.Mem.Live[k]-pl.saved[k]+b > pl.Budget {
				return nil, false
			}
		}
	}
	if sg.dm <= 0 {
		return nil, false
	}
	sg.extra = pl.segmentTransient(sg)
	if sg.extra > 0 && pl.Mem.Live[r]-pl.saved[r]+sg.extra > pl.Budget {
		return nil, false
	}
	return sg, true
}

// segmentTransient is the most device memory the clones of sg need at
// once on top of what the memory model has live at sg.at: while clone k
// runs, the members made by clones up to k that clones from k on read,
// the outputs of clone k that nobody reads, and its workspace. The
// evicted values are live at sg.at in the model already.
func (pl *planner) segmentTransient(sg *segment) int64 {
	var extra int64
	member := func(o *ir.Value) bool {
		return slices.ContainsFunc(sg.members, func(e segValue) bool { return e.v == o })
	}
	evicted := func(o *ir.Value) bool {
		return slices.ContainsFunc(sg.evict, func(e segValue) bool { return e.v == o })
	}
	for k, x := range sg.ops {
		var cur int64
		if w := pl.Mem.WorkspaceAt[pl.pos[x.ID]]; w >= 0 {
			cur += pl.Mem.Intervals[w].Bytes
		}
		for _, o := range x.Outputs() {
			if o != nil && !member(o) && !evicted(o) {
				cur += pl.valueBytes(o)
			}
		}
		for _, m := range sg.members {
			if pl.pos[m.v.Def.ID] > pl.pos[x.ID] {
				continue
			}
			for _, later := range sg.ops[k:] {
				if reads(later, m.v) {
					cur += pl.valueBytes(m.v)
					break
				}
			}
		}
		extra = max(extra, cur)
	}
	return extra
}

// commitSegment records segment sg chosen at bottleneck i and appends
// its decisions to ds: one per recomputed value, in schedule order, all
// before sg.at, the evicted ones carrying their bytes and the last one
// the segment's ΔT.
func (pl *planner) commitSegment(sg *segment, i int, ds []*passes.Decision) []*passes.Decision {
	r := sg.at
	for _, e := range sg.evict {
		pl.decided[e.v.ID] = true
		pl.segAt[e.v.ID] = int32(r)
		b := pl.valueBytes(e.v)
		for k := e.after + 1; k < r; k++ {
			pl.saved[k] += b
		}
	}
	pl.holdReads(sg.extend, sg.extra, sg.reads, r)
	all := make([]segValue, 0, len(sg.evict)+len(sg.members))
	all = append(append(all, sg.members...), sg.evict...)
	slices.SortStableFunc(all, func(a, b segValue) int {
		if pa, pb := pl.pos[a.v.Def.ID], pl.pos[b.v.Def.ID]; pa != pb {
			return pa - pb
		}
		return a.v.DefIndex - b.v.DefIndex
	})
	for n, e := range all {
		d := &passes.Decision{Value: e.v, Option: passes.Recompute, After: e.after, Before: r, At: i}
		if e.evicted {
			d.DeltaM = pl.valueBytes(e.v)
		}
		if n == len(all)-1 {
			d.DeltaT = sg.time
		}
		ds = append(ds, d)
	}
	return ds
}

// restoredBy is where a value this round evicted is back on the device: the
// position of its segment's or chain's clones, or its swap-in's trigger
// (-1: not evicted).
func (pl *planner) restoredBy(w *ir.Value) int {
	if r := pl.segAt[w.ID]; r >= 0 {
		return int(r)
	}
	return int(pl.backAt[w.ID])
}
