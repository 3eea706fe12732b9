package bound

import (
	"fmt"
	"math"
	"sort"

	"github.com/tsplit/tsplit/ir"
	"github.com/tsplit/tsplit/memory"
	"github.com/tsplit/tsplit/passes"
	"github.com/tsplit/tsplit/profile"
)

// model is the relaxation of one graph at one budget, before it is
// written as an LP or a MILP: the over-budget positions, every eviction
// candidate (a tensor over one gap between two uses), and the base
// timeline that prices windows. doc.go says why each part is valid.
type model struct {
	n int
	// start[i] is when op i starts in the base timeline; start[n] is
	// the base step time. dur[i] is op i's time.
	start, dur []float64
	// deficit[i] is M_i − budget (positive at over-budget positions).
	deficit []int64
	// over lists the over-budget positions with a positive duration, in
	// order: the positions a memory row may be written at.
	over []int
	// gaps are the candidates: a tensor and the positions between two
	// consecutive uses, with at least one over-budget position inside.
	gaps []gap
	// d2h and h2d are the link bandwidths, bytes/s.
	d2h, h2d float64
}

// gap is one eviction candidate: value v may be off the device at
// positions strictly between from and to, its required positions (a
// def, a read, the step's start or end). Every plan of the class that
// frees v somewhere in the gap restores it before to.
type gap struct {
	v *ir.Value
	// bytes is what leaving the device saves (aligned, as the memory
	// model counts it); xfer is what a copy moves (unaligned).
	bytes int64
	xfer  int64
	// def is the position of v's producer (-1: resident before the
	// first op, a weight or an input): no copy of v exists before it
	// ends.
	def      int
	from, to int
	// recompute lists the ways a clone can restore v here, each with
	// the least compute it costs and the bytes it moves to the device
	// (none when v cannot be recomputed). See chainVariants.
	recompute []variant
	// first marks the one gap of v charged with what its gaps may
	// share: one swap-out may serve several gaps of a value, so only
	// this gap's swap is charged its swap-out on the device-to-host
	// link, and only this gap's clone is charged a dead input
	// (chainVariants). Any one gap would do (doc.go); it is the gap whose
	// over-budget positions are the most over the budget, the one a
	// plan is likeliest to evict v in. (It was the first such gap: a
	// value read twice in the forward pass then had its long backward
	// gap's swap-out free.)
	first bool
}

// build derives the model from a graph in its fixed order, its memory
// model and base timeline.
func build(g *ir.Graph, mem *memory.Model, tl *passes.Timeline, prof *profile.Profile, budget int64) (*model, error) {
	order := g.Order()
	n := len(order)
	switch {
	case prof == nil:
		return nil, fmt.Errorf("bound: no device profile")
	case mem == nil || tl == nil:
		return nil, fmt.Errorf("bound: no memory model or timeline")
	case len(mem.Order) != n || len(tl.Start) != n || len(mem.Live) != n:
		return nil, fmt.Errorf("bound: the memory model or timeline is not of the graph's order (%d ops)", n)
	case prof.D2H <= 0 || prof.H2D <= 0:
		return nil, fmt.Errorf("bound: profile %s: link bandwidths must be positive", prof.Name)
	}
	for i, op := range order {
		if mem.Order[i] != op {
			return nil, fmt.Errorf("bound: the memory model's op %d is not the graph's %s", i, op.Describe())
		}
		if ir.CopyOf(op) != ir.NoCopy || op.Host {
			// The class is swap + recompute on an unplanned order: a
			// graph that already moves tensors is a plan, not a base.
			return nil, fmt.Errorf("bound: %s already copies between host and device: the bound is of an unplanned step", op.Describe())
		}
	}
	m := &model{n: n, start: make([]float64, n+1), dur: make([]float64, n), deficit: make([]int64, n), d2h: prof.D2H, h2d: prof.H2D}
	// Ops run one after another on the compute stream of an unplanned
	// step; the base times are their durations laid end to end, which
	// is what a plan's compute stream runs besides its clones and stalls.
	for i := range order {
		m.start[i] = tl.Start[i]
		m.dur[i] = tl.End[i] - tl.Start[i]
		m.deficit[i] = mem.Live[i] - budget
		if m.deficit[i] > 0 && m.dur[i] > 0 {
			m.over = append(m.over, i)
		}
	}
	if n > 0 {
		m.start[n] = tl.StepTime
	}
	if len(m.over) == 0 {
		return m, nil
	}
	pos := g.Position()
	// inOver[i]: count of over-budget positions before i, to test
	// whether a gap holds one in O(1).
	before := make([]int, n+2)
	for i := 0; i <= n; i++ {
		before[i+1] = before[i]
		if i < n && m.deficit[i] > 0 && m.dur[i] > 0 {
			before[i+1]++
		}
	}
	// mass[i] is the sum of the deficits over the over-budget
	// positions before i: how much a gap's positions are over.
	mass := make([]float64, n+1)
	for i := 0; i < n; i++ {
		mass[i+1] = mass[i]
		if m.deficit[i] > 0 && m.dur[i] > 0 {
			mass[i+1] += float64(m.deficit[i])
		}
	}
	overIn := func(a, b int) bool { // any over-budget position in (a, b)?
		lo, hi := a+1, min(b, n) // positions lo..hi-1
		return lo < hi && before[hi] > before[lo]
	}
	for idx := range mem.Intervals {
		iv := &mem.Intervals[idx]
		v := iv.Value
		if v == nil || iv.Bytes <= 0 || v.Pinned() {
			// A pinned value (shape data) stays on the device in every
			// plan: passes.InsertSwapRecompute refuses to evict it.
			continue
		}
		req := []int{iv.Start, iv.End}
		for _, u := range v.Uses() {
			p := pos[u.Op.ID]
			req = append(req, p)
		}
		sort.Ints(req)
		// The gaps of v that hold an over-budget position; the one whose
		// positions are the most over the budget (the earliest on a tie)
		// is charged what v's gaps share (see gap.first).
		var gs []gap
		mostAt, most := 0, -1.0
		for k := 0; k+1 < len(req); k++ {
			a, b := req[k], req[k+1]
			if b-a < 2 || a < iv.Start || b > iv.End || !overIn(a, b) {
				continue
			}
			if w := mass[min(b, n)] - mass[a+1]; w > most {
				mostAt, most = len(gs), w
			}
			gs = append(gs, gap{v: v, bytes: iv.Bytes, xfer: v.Bytes(), def: iv.Start, from: a, to: b})
		}
		for k := range gs {
			gs[k].first = k == mostAt
		}
		m.gaps = append(m.gaps, gs...)
	}
	// A chain input with no gap of its own has no swap-out the model
	// charges elsewhere, so a chain that swaps it back in is charged
	// that swap-out (chainVariants).
	hasGap := make(map[ir.ValueID]bool, len(m.gaps))
	for _, gp := range m.gaps {
		hasGap[gp.v.ID] = true
	}
	for k := range m.gaps {
		gp := &m.gaps[k]
		if passes.Clonable(gp.v) {
			gp.recompute = m.chainVariants(gp.v, gp.from, gp.first, mem, pos, hasGap)
		}
	}
	return m, nil
}

// variant is one way of restoring a tensor by recomputation: the
// device bytes evicting it frees (less than its size when it makes the
// plan keep an input longer), the compute it costs at least, and the
// bytes it swaps in.
type variant struct {
	save float64
	cost float64
	xfer float64
	// out is the bytes the variant moves to the host before the first
	// row its chain input is off at, after that input's producer
	// (outDef) ends; keep is what it frees at the rows before that one,
	// where the input is still held. Only a variant that swaps its
	// input back in has them (out > 0): the formulation writes it as
	// one column per start block the input may first be off in.
	out    float64
	outDef int
	keep   float64
}

// chainVariants lists how a clone of v's producer can restore v in a
// gap that starts after position from. A clone needs the producer's
// inputs on the device. Take an input x dead before the gap in the
// unplanned step (its last read is at or before from); its readers are
// ops D₁…D_k, whose outputs take S bytes, and v's part of them is
// α = bytes(v)/S. The plan either keeps x on the device at every row
// where v is off (x was dead there in the unplanned step: it adds
// bytes(x) there, which v is charged α of), or brings x back after some
// such row by a clone of its producer or a swap-in, charged α of its
// time or of its bytes. The α of all outputs of all of x's readers add
// up to 1, so one kept or restored x is never charged more than once.
// Only the first gap of v gets the chain (a later gap may reuse the
// restored x); the input followed is the one that weighs most (α·bytes).
//
// A swap-in of x reads a host copy of x that a swap-out made while x
// was held. Where x has no gap of its own (no swap of x is charged that
// swap-out elsewhere) the swap-in variant is charged α of it too: it
// ended before the first row x is off at, and started after x's
// producer ended. At the rows of the gap before that one x is held, so
// the variant frees only max(0, bytes(v) − α·bytes(x)) there (doc.go).
func (m *model) chainVariants(v *ir.Value, from int, first bool, mem *memory.Model, pos []int, hasGap map[ir.ValueID]bool) []variant {
	def := v.Def
	bv := float64(mem.Intervals[mem.ByValue[v.ID]].Bytes)
	own := outputShare(v) * m.dur[pos[def.ID]]
	plain := []variant{{save: bv, cost: own}}
	if !first {
		return plain
	}
	var best *ir.Value
	var bestAlpha, bestWeight float64
	seen := map[*ir.Value]bool{}
	for _, x := range def.Inputs() {
		if x == nil || seen[x] {
			continue
		}
		seen[x] = true
		xi := mem.ByValue[x.ID]
		if xi < 0 {
			continue
		}
		iv := &mem.Intervals[xi]
		if iv.End > from || iv.End >= m.n {
			continue // live over the gap, or kept to the end
		}
		var outs float64
		readers := map[*ir.Op]bool{}
		for _, u := range x.Uses() {
			if readers[u.Op] {
				continue
			}
			readers[u.Op] = true
			for _, o := range u.Op.Outputs() {
				if o != nil && mem.ByValue[o.ID] >= 0 {
					outs += float64(mem.Intervals[mem.ByValue[o.ID]].Bytes)
				}
			}
		}
		if outs <= 0 {
			continue
		}
		alpha := bv / outs
		if w := alpha * float64(iv.Bytes); w > bestWeight {
			best, bestAlpha, bestWeight = x, alpha, w
		}
	}
	if best == nil {
		return plain
	}
	var out []variant
	if passes.Clonable(best) {
		out = append(out, variant{save: bv, cost: own + bestAlpha*outputShare(best)*m.dur[pos[best.Def.ID]]})
	}
	in := variant{save: bv, cost: own, xfer: bestAlpha * float64(best.Bytes())}
	if !hasGap[best.ID] {
		in.out, in.outDef, in.keep = in.xfer, mem.Intervals[mem.ByValue[best.ID]].Start, math.Max(0, bv-bestWeight)
	}
	out = append(out, in)
	if keep := bv - bestWeight; keep > 0 {
		out = append(out, variant{save: keep, cost: own})
	}
	return out
}

// outputShare is the part of its producer's time charged to
// restoring v by a clone: one clone restores every output of the
// producer, so its time is split among them by bytes, and the shares of
// one clone never add up to more than the clone.
func outputShare(v *ir.Value) float64 {
	var total int64
	for _, o := range v.Def.Outputs() {
		if o != nil {
			total += o.Bytes()
		}
	}
	if total <= 0 {
		return 1
	}
	return float64(v.Bytes()) / float64(total)
}

// tStart is when op i starts in the base step (i == n: the step's end;
// i < 0: its start).
func (m *model) tStart(i int) float64 {
	if i < 0 {
		return 0
	}
	return m.start[min(i, m.n)]
}

// tEnd is when op i ends in the base step (i < 0: the step's start).
func (m *model) tEnd(i int) float64 {
	if i < 0 {
		return 0
	}
	return m.start[i] + m.dur[i]
}
