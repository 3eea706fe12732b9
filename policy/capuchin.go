package policy

import (
	"fmt"
	"sort"

	"github.com/tsplit/tsplit/internal/units"
	"github.com/tsplit/tsplit/ir"
	"github.com/tsplit/tsplit/memory"
	"github.com/tsplit/tsplit/passes"
)

// Capuchin (Peng et al., ASPLOS'20, §4.3–4.5) on the simulated timeline
// instead of a measured execution:
//
//   - Candidates: feature maps (crossing values, see fmaps) accessed more
//     than once whose eviction gap — evicted-access a, back-access q —
//     covers a position where the memory exceeds the budget.
//   - Free time (Eq. 1): FT = SwapInStartTime − SwapOutEndTime, with
//     SwapOutEndTime = end of a + swap time and SwapInStartTime = start of
//     q − swap time.
//   - Swap first (§4.5): candidates by decreasing FT; a candidate is
//     swapped when its in-trigger can hide the prefetch completely. The
//     in-trigger (§4.4) is the latest access whose time is before
//     SwapInStartTime, moved later while it would put the restored copy
//     into a peak period (over the budget); swaps are serialized on each
//     PCIe direction, so a swap waits for the link.
//   - Then Alg. 1: while memory is still over, the cheapest swap (its
//     unhidden swap-in time) competes with the tensor of largest MSPS
//     (Eq. 2, memory saved per second of recomputation) under Alg. 2's
//     source updates (recomputation sources, rp_time, ext_time); the
//     smaller overhead wins and the loser stays a candidate.
//   - Recomputation is on demand (no in-trigger) from the nearest
//     resident sources.
//
// Deviations: memory per position is the static model's M_i, lowered by
// the decisions' saving ranges (Capuchin measures passive-mode
// evictions); there is no runtime feedback to move in-triggers; a
// recomputation's dead intermediate tensors are restored once by clones
// that later recomputations share (InsertSwapRecompute), where Capuchin
// recomputes the lineage for each target — ext_time still charges the
// repetitions, so the selection is Capuchin's and the executed plan
// recomputes less. Rounds: when the exact memory model of the rewritten
// graph is still over, the next round runs the same selection on it.

// capCand is one Capuchin candidate.
type capCand struct {
	v    *ir.Value
	a, q int // evicted-access and back-access positions
	size int64
	ft   float64
}

// capuchin is one planning round.
type capuchin struct {
	f      *fmaps
	budget int64
	saved  []int64
	d2h    linkTimes
	h2d    linkTimes
	// trig is the in-trigger chosen for a swapped value (by ValueID),
	// for its back-access.
	trig map[ir.ValueID]int
}

// linkTimes are the reserved intervals of one PCIe direction.
type linkTimes [][2]float64

// earliest returns the earliest start ≥ lo of a free window of length d.
func (l linkTimes) earliest(lo, d float64) float64 {
	t := lo
	for _, iv := range l { // sorted by start
		if iv[1] <= t {
			continue
		}
		if iv[0] >= t+d {
			break
		}
		t = iv[1]
	}
	return t
}

// latest returns the latest start s with lo ≤ s and s+d ≤ hi of a free
// window (ok false: none).
func (l linkTimes) latest(lo, hi, d float64) (float64, bool) {
	end := hi
	for k := len(l) - 1; k >= 0; k-- {
		iv := l[k]
		if iv[0] >= end {
			continue
		}
		if iv[1] <= end-d {
			break
		}
		end = iv[0]
	}
	return end - d, end-d >= lo
}

func (l *linkTimes) reserve(s, e float64) {
	if e <= s {
		return
	}
	*l = append(*l, [2]float64{s, e})
	sort.Slice(*l, func(i, j int) bool { return (*l)[i][0] < (*l)[j][0] })
}

// candidates lists Capuchin's eviction candidates by decreasing FT.
func (c *capuchin) candidates() []*capCand {
	f := c.f
	var out []*capCand
	for _, v := range f.crossing() {
		a, q := f.gap(v)
		if q < 0 || !c.overIn(a+1, q-1) {
			continue
		}
		p := f.c.Prof
		ft := (f.c.TL.Start[q] - p.TransferTime(v.Bytes(), false)) - (c.accessEnd(a) + p.TransferTime(v.Bytes(), true))
		out = append(out, &capCand{v: v, a: a, q: q, size: f.bytes(v), ft: ft})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].ft > out[j].ft })
	return out
}

// accessEnd is when the access at position a ends (0 before the first
// op: a graph input evicted before it is read).
func (c *capuchin) accessEnd(a int) float64 {
	if a < 0 {
		return 0
	}
	return c.f.c.TL.End[a]
}

func (c *capuchin) over(k int) bool { return c.f.c.Mem.Live[k]-c.saved[k] > c.budget }

// overIn reports whether some position in [lo, hi] is over the budget.
func (c *capuchin) overIn(lo, hi int) bool {
	for k := max(lo, 0); k <= hi && k < c.f.n; k++ {
		if c.over(k) {
			return true
		}
	}
	return false
}

func (c *capuchin) fits() bool { return !c.overIn(0, c.f.n-1) }

// capSwap is the evaluation of swapping one candidate.
type capSwap struct {
	trigger          int
	outStart, outEnd float64
	inStart, inEnd   float64
	overhead         float64
}

// inTrigger is §4.4's in-trigger for a swap-in that must end by the
// start of position x: the latest position whose start is before the
// swap-in start, moved later out of any peak period (a position over the
// budget, where the restored copy — already counted in M_i — would have
// to be evicted again); never before a+2.
func (c *capuchin) inTrigger(a, x int, inStart float64) int {
	f := c.f
	p := x
	for p-1 >= a+2 && f.c.TL.Start[p] > inStart {
		p--
	}
	for k := x - 1; k >= p; k-- {
		if c.over(k) {
			return k + 1
		}
	}
	return p
}

// evalSwap schedules the candidate's swap-out and swap-in on the links.
func (c *capuchin) evalSwap(cd *capCand) capSwap {
	f := c.f
	p := f.c.Prof
	outT, inT := p.TransferTime(cd.v.Bytes(), true), p.TransferTime(cd.v.Bytes(), false)
	var s capSwap
	s.outStart = c.d2h.earliest(c.accessEnd(cd.a), outT)
	s.outEnd = s.outStart + outT
	ideal, ok := c.h2d.latest(s.outEnd, f.c.TL.Start[cd.q], inT)
	if !ok {
		ideal = max(s.outEnd, f.c.TL.Start[cd.q]-inT)
	}
	s.trigger = c.inTrigger(cd.a, cd.q, ideal)
	s.inStart = c.h2d.earliest(max(ideal, f.c.TL.Start[s.trigger], s.outEnd), inT)
	s.inEnd = s.inStart + inT
	s.overhead = max(0, s.inEnd-f.c.TL.Start[cd.q])
	return s
}

func (c *capuchin) commitSwap(cd *capCand, s capSwap) {
	for k := cd.a + 2; k < s.trigger; k++ {
		c.saved[k] += cd.size
	}
	c.d2h.reserve(s.outStart, s.outEnd)
	c.h2d.reserve(s.inStart, s.inEnd)
	c.trig[cd.v.ID] = s.trigger
}

// capRC is a recomputation candidate of Alg. 2.
type capRC struct {
	id      ir.ValueID
	mem     int64
	srcs    map[ir.ValueID]bool
	rpTime  float64
	extTime float64
}

// MSPS is Eq. 2: memory saving per second of recomputation.
func (r *capRC) MSPS() float64 { return float64(r.mem) / max(r.rpTime+r.extTime, 1e-12) }

// capRecompute is the state of Capuchin's Alg. 2.
type capRecompute struct {
	cands   []*capRC
	recomps []*capRC
}

// max returns the candidate of largest MSPS (nil: none).
func (r *capRecompute) max(ok func(*capRC) bool) *capRC {
	var best *capRC
	for _, c := range r.cands {
		if (ok == nil || ok(c)) && (best == nil || c.MSPS() > best.MSPS()) {
			best = c
		}
	}
	return best
}

// remove drops a candidate (chosen for swap).
func (r *capRecompute) remove(t *capRC) {
	for i, c := range r.cands {
		if c == t {
			r.cands = append(r.cands[:i], r.cands[i+1:]...)
			return
		}
	}
}

// commit is lines 5–34 of Alg. 2: t becomes a recomputation target and
// the sources, rp_time and ext_time of the others are updated.
func (r *capRecompute) commit(t *capRC) {
	extCt := 1.0
	for _, rp := range r.recomps {
		if rp.srcs[t.id] {
			delete(rp.srcs, t.id)
			for s := range t.srcs {
				rp.srcs[s] = true
			}
			extCt++
		}
	}
	r.recomps = append(r.recomps, t)
	r.remove(t)
	for _, cand := range r.cands {
		if cand.srcs[t.id] {
			delete(cand.srcs, t.id)
			for s := range t.srcs {
				cand.srcs[s] = true
			}
			cand.rpTime += t.rpTime
			cand.extTime = 0
			for _, rp := range r.recomps {
				if rp.srcs[cand.id] {
					cand.extTime += cand.rpTime
				}
			}
		}
		if t.srcs[cand.id] {
			cand.extTime = extCt * cand.rpTime
		}
	}
}

// run is Alg. 2 on its own: recomputation targets until memSaving is
// reached.
func (r *capRecompute) run(memSaving int64) []*capRC {
	for memSaving > 0 && len(r.cands) > 0 {
		t := r.max(nil)
		r.commit(t)
		memSaving -= t.mem
	}
	return r.recomps
}

// lineage is InitMSPS for one candidate (§4.4): walking back from its
// producer, a tensor is a source when it is a candidate (assumed in
// memory) or still live at the back-access; a dead tensor is recomputed
// too and its producer's time added.
func (c *capuchin) lineage(cd *capCand, isCand map[ir.ValueID]bool) *capRC {
	f := c.f
	r := &capRC{id: cd.v.ID, mem: cd.size, srcs: map[ir.ValueID]bool{}}
	seen := map[ir.OpID]bool{}
	var walk func(op *ir.Op)
	walk = func(op *ir.Op) {
		if seen[op.ID] {
			return
		}
		seen[op.ID] = true
		r.rpTime += f.c.Prof.OpTime(op)
		for _, w := range op.Inputs() {
			if w == nil || w.Kind != ir.KindOp || w.IsConst() {
				continue
			}
			iv := f.interval(w)
			if isCand[w.ID] || (iv != nil && (iv.Kind != memory.Activation || iv.End >= cd.q)) || !passes.Clonable(w) {
				r.srcs[w.ID] = true
				continue
			}
			walk(w.Def)
		}
	}
	walk(cd.v.Def)
	return r
}

// selectEvictions is Alg. 1 with Alg. 2: the tensors to evict, in the
// order chosen.
func (cp *capuchin) selectEvictions() []evictTarget {
	var targets []evictTarget
	// Swap while the prefetch can be hidden, by decreasing FT.
	var rest []*capCand
	for _, cd := range cp.candidates() {
		if cp.fits() {
			break
		}
		if s := cp.evalSwap(cd); s.overhead == 0 && s.trigger > cd.a+2 && cp.overIn(cd.a+2, s.trigger-1) {
			cp.commitSwap(cd, s)
			targets = append(targets, evictTarget{cd.v, passes.Swap})
			continue
		}
		rest = append(rest, cd)
	}
	// Then the cheaper of the best swap and the best recomputation.
	byID := map[ir.ValueID]*capCand{}
	isCand := map[ir.ValueID]bool{}
	for _, cd := range rest {
		byID[cd.v.ID] = cd
		isCand[cd.v.ID] = true
	}
	rc := &capRecompute{}
	rcOf := map[ir.ValueID]*capRC{}
	for _, cd := range rest {
		if passes.Clonable(cd.v) {
			r := cp.lineage(cd, isCand)
			rc.cands = append(rc.cands, r)
			rcOf[cd.v.ID] = r
		}
	}
	for !cp.fits() && len(rest) > 0 {
		var bestSwap *capCand
		var bs capSwap
		for _, cd := range rest {
			s := cp.evalSwap(cd)
			if s.trigger <= cd.a+2 || !cp.overIn(cd.a+2, s.trigger-1) {
				continue
			}
			if bestSwap == nil || s.overhead < bs.overhead {
				bestSwap, bs = cd, s
			}
		}
		bestRec := rc.max(func(r *capRC) bool {
			cd := byID[r.id]
			return cp.overIn(cd.a+1, cd.q-1)
		})
		if bestSwap == nil && bestRec == nil {
			break
		}
		var chosen *capCand
		if bestRec != nil && (bestSwap == nil || bestRec.rpTime+bestRec.extTime < bs.overhead) {
			chosen = byID[bestRec.id]
			rc.commit(bestRec)
			for k := chosen.a + 1; k < chosen.q; k++ {
				cp.saved[k] += chosen.size
			}
			targets = append(targets, evictTarget{chosen.v, passes.Recompute})
		} else {
			chosen = bestSwap
			cp.commitSwap(chosen, bs)
			if r := rcOf[chosen.v.ID]; r != nil {
				rc.remove(r)
			}
			targets = append(targets, evictTarget{chosen.v, passes.Swap})
		}
		for i, cd := range rest {
			if cd == chosen {
				rest = append(rest[:i], rest[i+1:]...)
				break
			}
		}
	}
	return targets
}

func newCapuchin(c *Context) (*capuchin, error) {
	f, err := newFmaps(c)
	if err != nil {
		return nil, fmt.Errorf("policy capuchin: %w", err)
	}
	return &capuchin{f: f, budget: c.Budget, saved: make([]int64, f.n), trig: map[ir.ValueID]int{}}, nil
}

func capuchinPolicy(c *Context) (*passes.Plan, error) {
	cp, err := newCapuchin(c)
	if err != nil {
		return nil, err
	}
	f := cp.f
	targets := cp.selectEvictions()
	if !cp.fits() {
		k := 0
		for ; k < f.n && !cp.over(k); k++ {
		}
		if len(targets) == 0 {
			return nil, fmt.Errorf("policy capuchin: no feature map can be evicted where the memory exceeds the budget of %s: %s needs %s",
				c.BudgetText(), f.order[k].Describe(), units.Bytes(c.Mem.Live[k]))
		}
		if c.Round > 0 {
			return nil, fmt.Errorf("policy capuchin: after evicting every candidate, %s stay live at %s, over the budget of %s",
				units.Bytes(c.Mem.Live[k]-cp.saved[k]), f.order[k].Describe(), c.BudgetText())
		}
	}
	if len(targets) == 0 {
		return nil, fmt.Errorf("policy capuchin: nothing left to evict at a peak of %s (budget %s)", units.Bytes(c.Mem.Peak), c.BudgetText())
	}
	e := &evictor{f: f, at: max(c.Mem.PeakAt, 0), trigger: func(v *ir.Value, a, x int) int {
		if _, q := f.gap(v); q == x {
			if p, ok := cp.trig[v.ID]; ok {
				return p
			}
		}
		// An earlier anchor (a recomputation reads the swapped tensor):
		// the in-trigger for it.
		inT := f.c.Prof.TransferTime(v.Bytes(), false)
		return cp.inTrigger(a, x, f.c.TL.Start[x]-inT)
	}}
	return &passes.Plan{Budget: c.Budget, Decisions: e.plan(targets)}, nil
}
