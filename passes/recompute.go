package passes

import (
	"slices"
	"sort"

	"github.com/tsplit/tsplit/ir"
	"github.com/tsplit/tsplit/memory"
)

// How InsertSwapRecompute wires recomputation: the restorer picks, for
// each clone's input, the copy restored latest before it, and
// reuseRecomputed applies TSPLIT's LRU optimisation to repeated clones.
// Which tensors to recompute, and through which chains, is the policies'
// choice (package policy); a chain arrives here as member decisions
// (Recompute, ΔM = 0, the target's Before) emitted before the target.

// restorer tracks, during InsertSwapRecompute, the copies of values the
// rewrite restores, so that each clone reads the right one.
type restorer struct {
	// made lists, by original value, the ops of this rewrite that restore
	// it (swap-ins, clones) and the restored value.
	made map[*ir.Value][]restored
	// origPos and lastUse describe the order before the rewrite: op
	// positions by OpID, and each value's last device read by ValueID (a
	// swap-out reads one op longer, as in the memory model).
	origPos []int
	lastUse []int
}

type restored struct {
	op    *ir.Op
	value *ir.Value
}

func newRestorer(g *ir.Graph) *restorer {
	r := &restorer{made: map[*ir.Value][]restored{}, origPos: g.Position(), lastUse: make([]int, g.NumValueIDs())}
	for i := range r.lastUse {
		r.lastUse[i] = -1
	}
	n := len(g.Order())
	for i, op := range g.Order() {
		p := i
		if ir.CopyOf(op) == ir.ToHost {
			p = min(i+1, n)
		}
		for _, v := range op.Inputs() {
			if v != nil {
				r.lastUse[v.ID] = max(r.lastUse[v.ID], p)
			}
		}
	}
	for _, v := range g.Outputs {
		r.lastUse[v.ID] = n
	}
	return r
}

func (r *restorer) add(orig *ir.Value, op *ir.Op, v *ir.Value) {
	r.made[orig] = append(r.made[orig], restored{op, v})
}

// latest is the copy of w restored by this rewrite latest before
// position p, or nil.
func (r *restorer) latest(w *ir.Value, p int, pos []int) *ir.Value {
	var best *restored
	for k := range r.made[w] {
		x := &r.made[w][k]
		if pos[x.op.ID] < p && (best == nil || pos[x.op.ID] > pos[best.op.ID]) {
			best = x
		}
	}
	if best == nil {
		return nil
	}
	return best.value
}

// readAt is what a clone inserted just before op before reads for w: the
// copy of w this rewrite restored latest before it (a swap-in, or a
// clone — a chain clones its members first, so it reads its own); else,
// when w is dead there, a copy an earlier round's swap-in restored that
// is still live there; else w.
func (r *restorer) readAt(w *ir.Value, before *ir.Op, pos []int) *ir.Value {
	if x := r.latest(w, pos[before.ID], pos); x != nil {
		return x
	}
	q := r.origPos[before.ID]
	if w.Def == nil || int(w.ID) >= len(r.lastUse) || r.lastUse[w.ID] >= q {
		return w
	}
	for _, u := range w.Uses() {
		if ir.CopyOf(u.Op) != ir.ToHost || u.Op.Output(0) == nil {
			continue
		}
		for _, h := range u.Op.Output(0).Uses() {
			c := h.Op.Output(0)
			if ir.CopyOf(h.Op) != ir.ToDevice || c == nil || int(c.ID) >= len(r.lastUse) || c.DType != w.DType || !c.Shape.Equal(w.Shape) {
				continue
			}
			if int(h.Op.ID) < len(r.origPos) && r.origPos[h.Op.ID] >= 0 && r.origPos[h.Op.ID] < q && r.lastUse[c.ID] >= q {
				if x := r.latest(c, pos[before.ID], pos); x != nil {
					return x
				}
				return c
			}
		}
	}
	return w
}

// recomputeClone is a clone InsertSwapRecompute made and the op it
// clones.
type recomputeClone struct{ op, of *ir.Op }

// reuseRecomputed is the LRU optimisation of TSPLIT §V-D mapped to a
// static plan. The runtime strategy it stands for: run each chain in the
// speed-centric manner, keeping its intermediates in a cache for later
// consumers, and abandon the least recently used intermediate once the
// available memory is not enough. Statically, with the whole schedule
// known:
//
//   - "Keeping an intermediate for a later consumer" is reusing a clone
//     of an op for a later clone of the same op: the later clone's
//     readers read the earlier clone's output, whose life extends to
//     them, and the later clone goes away with every clone that only fed
//     it.
//   - "When memory allows" is checked on the exact memory model of the
//     rewritten graph (memory.Analyze, kept up to date as reuses are
//     applied): the reuse is taken only if no position it raises goes
//     over the plan's budget. Positions it frees (the removed clones)
//     are credited.
//   - "Least recently used first out" is the order reuses are tried in:
//     consumers in schedule order (the cache's time), and for each, the
//     clones of its chain from the last (the most recently used
//     intermediate of the earlier chain, the one nearest the target)
//     back to the first, each reusing the latest earlier clone of its op.
//     A reuse that does not fit is dropped, as the cache drops its least
//     recently used entries, and the chain recomputes from there.
//
// Without a budget (0) nothing is reused. Clones of ops cloned once are
// never touched, so plans without repeated clones (the baselines'
// evictor shares one clone per value) are unchanged.
func reuseRecomputed(g *ir.Graph, budget int64, clones []recomputeClone) error {
	if budget <= 0 || len(clones) < 2 {
		return nil
	}
	byOf := map[ir.OpID][]*ir.Op{}
	of := map[ir.OpID]*ir.Op{}
	repeated := false
	for _, c := range clones {
		byOf[c.of.ID] = append(byOf[c.of.ID], c.op)
		of[c.op.ID] = c.of
		repeated = repeated || len(byOf[c.of.ID]) > 1
	}
	if !repeated {
		return nil
	}
	mem, err := memory.Analyze(g, memory.Options{})
	if err != nil {
		return err
	}
	pos := g.Position()
	lr := &lruState{g: g, mem: mem, pos: pos, live: slices.Clone(mem.Live), budget: budget,
		of: of, byOf: byOf, end: map[ir.ValueID]int{}, removed: map[ir.OpID]bool{}}
	order := make([]*ir.Op, 0, len(clones))
	for _, c := range clones {
		order = append(order, c.op)
	}
	sort.Slice(order, func(a, b int) bool { return pos[order[a].ID] < pos[order[b].ID] })
	// Runs of adjacent clones are the chains inserted before one
	// consumer; each run is tried from its last clone back.
	for lo := 0; lo < len(order); {
		hi := lo + 1
		for hi < len(order) && pos[order[hi].ID] == pos[order[hi-1].ID]+1 {
			hi++
		}
		for k := hi - 1; k >= lo; k-- {
			c := order[k]
			if lr.removed[c.ID] {
				continue
			}
			if p := lr.latestBefore(c); p != nil {
				if err := lr.reuse(c, p); err != nil {
					return err
				}
			}
		}
		lo = hi
	}
	return nil
}

// lruState is reuseRecomputed's view of the rewritten graph: positions
// and the memory model are those before any reuse; live and end follow
// the reuses applied.
type lruState struct {
	g       *ir.Graph
	mem     *memory.Model
	pos     []int
	live    []int64
	budget  int64
	of      map[ir.OpID]*ir.Op   // clone → the op it clones
	byOf    map[ir.OpID][]*ir.Op // op → its clones
	end     map[ir.ValueID]int   // interval ends extended by reuses
	removed map[ir.OpID]bool
}

// latestBefore is the latest clone of c's op, still in the graph, before c.
func (lr *lruState) latestBefore(c *ir.Op) *ir.Op {
	var best *ir.Op
	for _, p := range lr.byOf[lr.of[c.ID].ID] {
		if !lr.removed[p.ID] && lr.pos[p.ID] < lr.pos[c.ID] && (best == nil || lr.pos[p.ID] > lr.pos[best.ID]) {
			best = p
		}
	}
	return best
}

// interval returns v's interval end and bytes (ok false: not on the device).
func (lr *lruState) interval(v *ir.Value) (end int, bytes int64, ok bool) {
	idx := lr.mem.ByValue[v.ID]
	if idx < 0 {
		return 0, 0, false
	}
	iv := &lr.mem.Intervals[idx]
	end = iv.End
	if e, ok := lr.end[v.ID]; ok {
		end = e
	}
	return end, iv.Bytes, true
}

// reuse lets c's readers read p's outputs instead, if the memory model
// says it fits, and removes c with the clones that only fed it.
func (lr *lruState) reuse(c, p *ir.Op) error {
	// dead: c, then every clone all of whose readers are dead, latest
	// first (a clone's readers come after it).
	dead := []*ir.Op{c}
	inDead := map[ir.OpID]bool{c.ID: true}
	pending := []*ir.Op{}
	push := func(op *ir.Op) {
		for _, w := range op.Inputs() {
			if w != nil && w.Def != nil && lr.of[w.Def.ID] != nil && !lr.removed[w.Def.ID] && !inDead[w.Def.ID] && !slices.Contains(pending, w.Def) {
				pending = append(pending, w.Def)
			}
		}
	}
	push(c)
	for len(pending) > 0 {
		sort.Slice(pending, func(a, b int) bool { return lr.pos[pending[a].ID] > lr.pos[pending[b].ID] })
		r := pending[0]
		pending = pending[1:]
		unused := true
		for _, o := range r.Outputs() {
			if o == nil {
				continue
			}
			for _, u := range o.Uses() {
				if !inDead[u.Op.ID] {
					unused = false
				}
			}
		}
		if unused {
			dead = append(dead, r)
			inDead[r.ID] = true
			push(r)
		}
	}
	// The change to M_k: the dead clones' outputs and workspace go, and
	// each used output of p lives on to the last reader of c's.
	delta := map[int]int64{}
	add := func(lo, hi int, b int64) {
		for k := lo; k <= hi && k < len(lr.live); k++ {
			delta[k] += b
		}
	}
	for _, r := range dead {
		pr := lr.pos[r.ID]
		for _, o := range r.Outputs() {
			if o == nil {
				continue
			}
			if e, b, ok := lr.interval(o); ok {
				add(pr, e, -b)
			}
		}
		if w := lr.mem.WorkspaceAt[pr]; w >= 0 {
			add(pr, pr, -lr.mem.Intervals[w].Bytes)
		}
	}
	type move struct {
		from, to *ir.Value
		end      int
	}
	var moves []move
	for j, o := range c.Outputs() {
		if o == nil || o.NumUses() == 0 {
			continue
		}
		to := p.Output(j)
		if to == nil {
			return nil
		}
		ec, _, ok1 := lr.interval(o)
		ep, b, ok2 := lr.interval(to)
		if !ok1 || !ok2 {
			return nil
		}
		add(ep+1, ec, b)
		moves = append(moves, move{o, to, max(ep, ec)})
	}
	for k, d := range delta {
		if d > 0 && lr.live[k]+d > lr.budget {
			return nil // no room: recompute instead
		}
	}
	for k, d := range delta {
		lr.live[k] += d
	}
	for _, mv := range moves {
		mv.from.ReplaceAllUsesWith(mv.to)
		lr.end[mv.to.ID] = mv.end
	}
	// Remove latest first: a clone's readers are gone before it.
	sort.Slice(dead, func(a, b int) bool { return lr.pos[dead[a].ID] > lr.pos[dead[b].ID] })
	for _, r := range dead {
		if err := lr.g.RemoveOp(r); err != nil {
			return err
		}
		lr.removed[r.ID] = true
	}
	return nil
}
