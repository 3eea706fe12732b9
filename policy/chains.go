package policy

import (
	"slices"

	"github.com/tsplit/tsplit/ir"
	"github.com/tsplit/tsplit/memory"
	"github.com/tsplit/tsplit/passes"
)

// Recomputation chains (TSPLIT §V-D "Recomputation Implementation",
// Eq. 4's set I).
//
// When consecutive forward tensors are all evicted, a backward consumer
// at q that needs X_N recomputes the chain op_1 → … → op_N from the
// nearest tensors still available at q (its checkpoints): the
// memory-centric strategy of SuperNeurons, which the paper adopts. Each
// consumer recomputes its own chain, and each intermediate X_k of a
// chain is freed as soon as op_k+1 has read it: O(1) extra memory, O(N²)
// compute over the backward pass. The planner charges Eq. 4's
// ΔT = Σ_{u∈I} T_u for the whole chain, and takes a chain only where its
// transient memory (two adjacent intermediates, typically) fits at q.
//
// A plan expresses a chain with the encoding the baseline policies'
// evictor already uses for the dead intermediates of a segment: the
// target X_N is an ordinary Recompute decision, and every intermediate
// the chain recomputes for its own ops is a member decision — Recompute,
// ΔM = 0, ΔT = 0 (charged to the target), Before = q — emitted just
// before the target in schedule order. InsertSwapRecompute clones the
// members first, each clone reading the latest restored copy made
// before it, so a chain reads its own intermediates; then
// reuseRecomputed applies the LRU optimisation.

// maxChainOps bounds the ops of one recomputation chain (the target's
// producer included). 1 is single-producer recomputation (the tests
// compare with it).
var maxChainOps = 16

// chainSource says how a recomputation chain gets one of its inputs at q.
type chainSource uint8

const (
	// srcKept: the tensor (or a restored copy of it) is live at q; the
	// chain reads it there (a checkpoint).
	srcKept chainSource = iota
	// srcExtend: dead before q and not recomputable (a weight, a graph
	// input, the output of a backward, random or copy op): the chain
	// reads it at q, which keeps it live from its last use until then.
	srcExtend
	// srcMember: evicted or dead at q, and recomputable: the chain
	// recomputes it.
	srcMember
	// srcNone: no chain (a tensor evicted in this round that cannot be
	// recomputed, or one not on the device).
	srcNone
)

// recomputeChain is the set I of Eq. 4 for one tensor and consumer.
type recomputeChain struct {
	// ops are the ops to clone, in schedule order; the last is the
	// target's producer.
	ops []*ir.Op
	// members are the values the chain recomputes for its own ops (the
	// outputs of ops other than the target that a chain op reads).
	members []*ir.Value
	// reads are the tensors the chain reads at q (its checkpoints);
	// extend are those of them dead before q.
	reads, extend []*ir.Value
	// time is ΔT of Eq. 4: Σ T_u over ops.
	time float64
	// extra is the transient device memory the clones need just before
	// q beyond what is live there: the chain intermediates live at once
	// (a chain op's inputs and outputs), other outputs, workspace.
	extra int64
}

// chainClonable reports whether v's producer may be cloned into a
// recomputation chain: a deterministic forward op on the device.
func chainClonable(v *ir.Value) bool {
	return passes.Clonable(v) && v.Def.Phase == ir.Forward
}

// chainClonable is chainClonable(v), asked of the schema registry once
// per value and round: every candidate's chain asks it of each input it
// reaches, and the registry's lookups were a twentieth of a search's
// time (BERT-large). The graph does not change while a round decides.
func (pl *planner) chainClonable(v *ir.Value) bool {
	if int(v.ID) >= len(pl.clonable) {
		return chainClonable(v)
	}
	if c := pl.clonable[v.ID]; c != 0 {
		return c > 0
	}
	ok := chainClonable(v)
	pl.clonable[v.ID] = -1
	if ok {
		pl.clonable[v.ID] = 1
	}
	return ok
}

// lastUse is the last position v is needed at: the end of its interval
// or the last read this round's decisions added (clones and chains).
func (pl *planner) lastUse(v *ir.Value, iv *memory.Interval) int {
	e := iv.End
	if u := pl.uses[v.ID]; len(u) > 0 {
		e = max(e, u[len(u)-1])
	}
	return e
}

// restoredAt returns a copy of w restored by an earlier round's swap-in
// (SwapOut(w) → SwapIn) that is live at q in the order planned on (as
// InsertSwapRecompute judges it) and not evicted in this round, or nil.
func (pl *planner) restoredAt(w *ir.Value, q int) *ir.Value {
	for _, u := range w.Uses() {
		if ir.CopyOf(u.Op) != ir.ToHost || u.Op.Output(0) == nil {
			continue
		}
		for _, h := range u.Op.Output(0).Uses() {
			r := h.Op.Output(0)
			if ir.CopyOf(h.Op) != ir.ToDevice || r == nil || pl.decided[r.ID] || r.DType != w.DType || !r.Shape.Equal(w.Shape) {
				continue
			}
			if idx := pl.Mem.ByValue[r.ID]; idx >= 0 {
				riv := &pl.Mem.Intervals[idx]
				if riv.Start < q && riv.End >= q {
					return r
				}
			}
		}
	}
	return nil
}

// chainSourceOf classifies w, an input of a chain op, at position q, and
// returns the tensor the chain reads for it (w or a restored copy).
func (pl *planner) chainSourceOf(w *ir.Value, q int) (*ir.Value, chainSource) {
	idx := pl.Mem.ByValue[w.ID]
	if idx < 0 {
		return nil, srcNone
	}
	iv := &pl.Mem.Intervals[idx]
	if iv.Kind == memory.Weight || iv.Kind == memory.Input {
		// Not recomputable: read where it is, kept until q when q is
		// past its last use (a replaced weight, an input only the
		// forward pass reads). One swapped in this round is not: the
		// read could fall in its gap.
		if pl.decided[w.ID] && !pl.ignoreDecided {
			pl.blocked = true
			return nil, srcNone
		}
		if pl.lastUse(w, iv) >= q {
			return w, srcKept
		}
		return w, srcExtend
	}
	if pl.decided[w.ID] && pl.segAt[w.ID] >= 0 && int(pl.segAt[w.ID]) <= q && pl.lastUse(w, iv) >= q {
		// Evicted in this round by a segment that recomputes it by q
		// and holds it to its last use: read that clone.
		return w, srcKept
	}
	if pl.LinkPrice > 0 && pl.decided[w.ID] && pl.restoredBy(w) >= 0 && pl.restoredBy(w) <= q && pl.lastUse(w, iv) >= q {
		// The link-priced variant: evicted in this round, but back on
		// the device by q — a swap-in triggered there, or a chain that
		// recomputes it — and held to its last use: read that copy
		// (InsertSwapRecompute wires a clone to the copy restored
		// latest before it; lateAt charges the chain a swap-in that
		// arrives after q). The price makes the planner swap the
		// tensors that are costly to recompute, which the chains of the
		// cheap ones then read: treated as evicted, they were
		// recomputed with their producers, the GELU of a BERT
		// feed-forward layer from its 16 ms MatMul. Other variants keep
		// the rule of their plans.
		return w, srcKept
	}
	if pl.decided[w.ID] && !pl.ignoreDecided {
		// Evicted in this round over a gap this round does not keep:
		// recompute it (a copy it restores by q is reused by
		// reuseRecomputed when it is a clone).
		if iv.Kind == memory.Activation && pl.chainClonable(w) {
			return w, srcMember
		}
		pl.blocked = true
		return nil, srcNone
	}
	if iv.Start < q && pl.lastUse(w, iv) >= q {
		return w, srcKept
	}
	if iv.Kind == memory.Activation {
		if r := pl.restoredAt(w, q); r != nil {
			return r, srcKept
		}
		if pl.chainClonable(w) {
			return w, srcMember
		}
	}
	return w, srcExtend
}

// recomputeChain builds the chain that recomputes v just before q: v's
// producer, then, for each input not available at q, its producer,
// recursively, until every input is a checkpoint (live at q, restored by
// an earlier round, or kept until q). It fails when the chain needs more
// than maxChainOps ops, a random or backward op on an evicted tensor,
// or a tensor evicted in this round that cannot be recomputed.
func (pl *planner) recomputeChain(v *ir.Value, q int) (recomputeChain, bool) {
	var ch recomputeChain
	ok := pl.buildChain(&ch, v, q)
	return ch, ok
}

// buildChain is recomputeChain into ch, whose slices it reuses: the
// candidates of every bottleneck build a chain per live tensor, and
// allocating four slices for each was most of the planner's garbage
// (BERT-large's planning).
func (pl *planner) buildChain(ch *recomputeChain, v *ir.Value, q int) bool {
	*ch = recomputeChain{ops: ch.ops[:0], members: ch.members[:0], reads: ch.reads[:0], extend: ch.extend[:0]}
	if !pl.chainClonable(v) {
		return false
	}
	ch.ops = append(ch.ops, v.Def)
	for k := 0; k < len(ch.ops); k++ {
		for _, w := range ch.ops[k].Inputs() {
			if w == nil || slices.Contains(ch.members, w) {
				continue
			}
			r, src := pl.chainSourceOf(w, q)
			switch src {
			case srcNone:
				return false
			case srcKept, srcExtend:
				if !slices.Contains(ch.reads, r) {
					ch.reads = append(ch.reads, r)
					if src == srcExtend {
						ch.extend = append(ch.extend, r)
					}
				}
			case srcMember:
				if !slices.Contains(ch.ops, w.Def) {
					if len(ch.ops) == maxChainOps {
						return false
					}
					ch.ops = append(ch.ops, w.Def)
				}
				ch.members = append(ch.members, w)
			}
		}
	}
	// Positions are distinct, and (position, output index) too: no
	// ties, so the unstable sorts are deterministic.
	sortOpsByPos(ch.ops, pl.pos)
	sortValuesByDef(ch.members, pl.pos)
	for _, op := range ch.ops {
		ch.time += pl.opTime[pl.pos[op.ID]]
	}
	if pl.LinkPrice > 0 {
		for _, r := range ch.reads {
			ch.time += pl.lateAt(r, q)
		}
	}
	if len(ch.ops) == 1 {
		// Single-producer recomputation keeps its established rule:
		// neither the clone's workspace nor a weight or graph input it
		// reads past its last use is charged here; the next round's
		// exact memory model sees them. A chain reaches further back (to
		// the graph input, to weights the optimizer has replaced) and
		// holds intermediates: what it keeps and needs is charged.
		ch.extend = slices.DeleteFunc(ch.extend, func(w *ir.Value) bool {
			k := pl.Mem.Intervals[pl.Mem.ByValue[w.ID]].Kind
			return k == memory.Weight || k == memory.Input
		})
		return true
	}
	ch.extra = pl.chainTransient(ch, v)
	return true
}

// lateAt is how long a read of w at q waits for w's swap-in when this
// round swaps w and the swap-in, triggered before q, was placed to
// arrive by the swap's own next use, after q: the transfer less the
// compute between the trigger and q (the link taken as free there, as
// Eq. 3 takes it for the swap). 0 for every other value.
func (pl *planner) lateAt(w *ir.Value, q int) float64 {
	if int(w.ID) >= len(pl.swappedNow) || !pl.swappedNow[w.ID] {
		return 0
	}
	late := pl.Prof.TransferTime(w.Bytes(), false)
	for k := int(pl.backAt[w.ID]); k < q && late > 0; k++ {
		late -= pl.opTime[k]
	}
	return max(late, 0)
}

// valueBytes is v's aligned device size in the planner's memory model.
func (pl *planner) valueBytes(v *ir.Value) int64 {
	if idx := pl.Mem.ByValue[v.ID]; idx >= 0 {
		return pl.Mem.Intervals[idx].Bytes
	}
	return memory.Align(v.Bytes())
}

// chainTransient is the most device memory the clones of ch need at once
// on top of what is live before q: while clone k runs, the members
// produced by clones ≤ k and read by clones ≥ k, the other outputs of
// clone k and its workspace. The target's own output is not counted (it
// is live at q in the model already).
func (pl *planner) chainTransient(ch *recomputeChain, v *ir.Value) int64 {
	var extra int64
	for k, op := range ch.ops {
		cur := int64(0)
		if w := pl.Mem.WorkspaceAt[pl.pos[op.ID]]; w >= 0 {
			cur += pl.Mem.Intervals[w].Bytes
		}
		for _, o := range op.Outputs() {
			if o != nil && o != v && !slices.Contains(ch.members, o) {
				cur += pl.valueBytes(o)
			}
		}
		for _, m := range ch.members {
			if pl.pos[m.Def.ID] > pl.pos[op.ID] {
				continue
			}
			for _, later := range ch.ops[k:] {
				if reads(later, m) {
					cur += pl.valueBytes(m)
					break
				}
			}
		}
		extra = max(extra, cur)
	}
	return extra
}

// chainSaving is the bytes recomputing v (size bytes, evicted after a,
// recomputed before q) through ch saves at bottleneck i: size, less the
// tensors ch keeps past their last use across i. ok is false when the
// chain does not fit: its transient memory on top of what is live at q
// (as planned so far) goes over the budget, or keeping what it reads
// would raise a position before i, already planned, over it.
func (pl *planner) chainSaving(ch *recomputeChain, size int64, a, q, i int) (int64, bool) {
	add := ch.extra
	for _, w := range ch.extend {
		if pl.lastUse(w, &pl.Mem.Intervals[pl.Mem.ByValue[w.ID]]) < q {
			add += pl.valueBytes(w)
		}
	}
	if add > 0 && pl.Mem.Live[q]-pl.madeAt(q)-pl.saved[q]+add > pl.Budget {
		return 0, false
	}
	dm := size
	if len(ch.extend) == 0 {
		return dm, dm > 0
	}
	// What the chain keeps past their last uses, by last use: at
	// position k every kept tensor whose last use is before k is held
	// as well (the sum over the others, kept as a running total instead
	// of a loop over ch.extend per position, which made this quadratic
	// in the chain's reads).
	kept := make([]keptRead, len(ch.extend))
	for n, w := range ch.extend {
		kept[n] = keptRead{end: pl.lastUse(w, &pl.Mem.Intervals[pl.Mem.ByValue[w.ID]]), bytes: pl.valueBytes(w)}
	}
	byEnd := slices.Clone(kept)
	slices.SortStableFunc(byEnd, func(x, y keptRead) int { return x.end - y.end })
	for _, w := range kept {
		if w.end < i {
			dm -= w.bytes
		}
		// held is the bytes of every kept tensor whose last use is
		// before k; w's own is counted once, as b.
		var held int64
		next := 0
		for k := w.end + 1; k < i; k++ {
			for next < len(byEnd) && byEnd[next].end < k {
				held += byEnd[next].bytes
				next++
			}
			m := pl.Mem.Live[k] - pl.saved[k]
			if k > a {
				m -= size
			}
			// Only a position that fits is already planned: one still
			// over the budget (walking from the peak, the positions
			// before i are visited later) is left to the walk, which
			// sees what the chain keeps there (commitRecompute charges
			// it to saved). Rejecting the chain there instead ruled out
			// every chain that keeps a weight past its last use — a
			// training-mode BatchNormalization's running statistics —
			// while any position between its forward op and the peak
			// was over the budget, so the planner cloned convolutions
			// (resnet50 b64 at 3 GiB) where BatchNormalization + ReLU
			// from the kept convolution output cost half as much per
			// byte.
			if m <= pl.Budget && m+held > pl.Budget {
				return 0, false
			}
		}
	}
	return dm, dm > 0
}

// madeAt is what op q allocates when it runs, its outputs and its
// workspace, where the planner fits chains before their reader
// (chainFit; 0 otherwise). The clones of a chain run before q, when q's
// inputs (the chain's target among them) are live and those are not
// yet: M_q less madeAt(q) is what is live with the clones.
func (pl *planner) madeAt(q int) int64 {
	if !pl.chainFit {
		return 0
	}
	var b int64
	for _, o := range pl.Mem.Order[q].Outputs() {
		if o == nil {
			continue
		}
		if idx := pl.Mem.ByValue[o.ID]; idx >= 0 && pl.Mem.Intervals[idx].Start == q {
			b += pl.Mem.Intervals[idx].Bytes
		}
	}
	if w := pl.Mem.WorkspaceAt[q]; w >= 0 {
		b += pl.Mem.Intervals[w].Bytes
	}
	return b
}

// keptRead is a tensor a recompute chain keeps past its last use: that
// last use and its bytes.
type keptRead struct {
	end   int
	bytes int64
}

// commitRecompute records the recompute decision just made (the last of
// ds) in the planner's state and returns ds with the chain's member
// decisions inserted before it: the checkpoints are read at d.Before (a
// use later evictions must respect), tensors kept past their last use
// cost their bytes until then, and the clones' transient memory counts
// at d.Before (chainSaving checked that it fits there), so that later
// decisions do not take that room.
func (pl *planner) commitRecompute(ds []*passes.Decision) []*passes.Decision {
	d := ds[len(ds)-1]
	q := d.Before
	ch, ok := pl.recomputeChain(d.Value, q)
	if !ok {
		// Not from recomputeCandidate (which built the chain from this
		// state): the producer alone, reading its inputs at q.
		for _, w := range d.Value.Def.Inputs() {
			if w != nil {
				pl.addUse(w, q)
			}
		}
		return placeBeforeReaders(ds[:len(ds)-1], ds[len(ds)-1:])
	}
	pl.holdReads(ch.extend, ch.extra, ch.reads, q)
	block := make([]*passes.Decision, 0, len(ch.members)+1)
	for _, w := range ch.members {
		a := pl.pos[w.Def.ID]
		for _, u := range pl.uses[w.ID] {
			if u < q {
				a = max(a, u)
			}
		}
		block = append(block, &passes.Decision{Value: w, Option: passes.Recompute, After: a, Before: q, At: d.At})
	}
	return placeBeforeReaders(ds[:len(ds)-1], append(block, d))
}

// placeBeforeReaders returns ds with block (a recompute chain's
// decisions, all for the same consumer) inserted before the first
// recompute decision for that consumer whose clone reads a value of
// block, else at the end. InsertSwapRecompute clones in decision order
// and each clone reads the copy restored latest before it: a clone made
// earlier in the round that reads v at q must come after v's own clone
// there, or it reads the original v and keeps it live over the gap the
// recompute was to free.
func placeBeforeReaders(ds, block []*passes.Decision) []*passes.Decision {
	q := block[len(block)-1].Before
	at := len(ds)
	for k, e := range ds {
		if e.Option != passes.Recompute || e.Before != q {
			continue
		}
		if slices.ContainsFunc(block, func(b *passes.Decision) bool { return reads(e.Value.Def, b.Value) }) {
			at = k
			break
		}
	}
	out := make([]*passes.Decision, 0, len(ds)+len(block))
	out = append(out, ds[:at]...)
	out = append(out, block...)
	return append(out, ds[at:]...)
}

// holdReads books what a recompute placed at q keeps on the device: the
// inputs it extends past their last use (held to q), its extra
// intermediates at q, and its reads as uses at q. Chains and segments
// both commit through it.
func (pl *planner) holdReads(extend []*ir.Value, extra int64, reads []*ir.Value, q int) {
	for _, w := range extend {
		b := pl.valueBytes(w)
		for k := pl.lastUse(w, &pl.Mem.Intervals[pl.Mem.ByValue[w.ID]]) + 1; k <= q && k < pl.n; k++ {
			pl.saved[k] -= b
		}
	}
	pl.saved[q] -= extra
	for _, w := range reads {
		pl.addUse(w, q)
	}
}
