package policy

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/tsplit/tsplit/ir"
	"github.com/tsplit/tsplit/memory"
	"github.com/tsplit/tsplit/passes"
	"github.com/tsplit/tsplit/profile"
)

// tsplit is TSPLIT's planner as a policy: Alg. 2 over the depth-first
// order, each round choosing per bottleneck the swap, recompute or split
// with the smallest ΔT/ΔM (planner).
type tsplit struct {
	spec
	// split: Alg. 2's Step 2 and 3 (split the bottleneck op) are allowed.
	split bool
}

// Plan is one round of Alg. 2.
func (t *tsplit) Plan(c *Context) (*passes.Plan, error) {
	pl := newPlanner(c.G, c.Mem, c.TL, c.Prof, c.Budget)
	pl.Allowed[passes.Swap] = !c.Opts.NoSwap
	pl.Allowed[passes.Recompute] = !c.Opts.NoRecompute
	if t.split {
		pl.SplitChoices = passes.SplitChoices(c.Model)
	}
	return pl.Run()
}

// LowerBound is the planner's bound on c's graph (planner.LowerBound),
// crediting splits where the policy may split.
func (t *tsplit) LowerBound(c *Context) int64 {
	pl := newPlanner(c.G, c.Mem, c.TL, c.Prof, c.Budget)
	if t.split && !c.Opts.NoSwap {
		pl.SplitChoices = passes.SplitChoices(c.Model)
	}
	return pl.LowerBound()
}

// PlanStep plans the step. Under OrderAuto it plans under every order
// of passes.Orders (depth-first, backward as late as possible, as
// built), each on its own copy of the graph, and keeps the plan with
// the shortest simulated step, the first in that list on a tie
// (Report.Order says which). No order wins everywhere: the depth-first
// order gives VGG's split plans their largest batches, while on
// ResNet-50 it hoists backward ops whose outputs no recompute chain can
// rebuild, and the later orders plan at a fraction of its overhead.
func (t *tsplit) PlanStep(s *passes.State) error {
	if s.Opts.Order != passes.OrderAuto {
		return t.planSplitOrNot(s)
	}
	snap := s.Model.Clone()
	var (
		best, first *passes.State
		firstErr    error
		tried       []string
	)
	for _, o := range passes.Orders {
		f := s.Fork(snap.Clone(), s.Opts, "order-"+string(o))
		err := f.Reorder(o)
		if err == nil {
			err = t.planSplitOrNot(f)
		}
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return err
		}
		if err != nil {
			if firstErr == nil {
				first, firstErr = f, err
			}
			tried = append(tried, fmt.Sprintf("%s: no plan", o))
			continue
		}
		tried = append(tried, fmt.Sprintf("%s: %.4g s", o, f.Report.Time))
		if best == nil || f.Report.Time < best.Report.Time {
			best = f
		}
	}
	if best == nil {
		// No order fits: the first order's failure, and its report as far
		// as it got, stand.
		s.Adopt(first)
		return firstErr
	}
	r := best.Report
	why := fmt.Sprintf("order %s (simulated steps: %s)", r.Order, strings.Join(tried, ", "))
	if r.Chosen != "" {
		why += "; " + r.Chosen
	}
	r.Chosen = why
	s.Adopt(best)
	return nil
}

// planSplitOrNot plans the step in rounds in s's order and, with splits,
// keeps a split plan only where it pays. Alg. 2 takes a split when its
// ΔT/ΔM beats every swap and recompute at one bottleneck, a greedy
// choice that can leave the whole plan slower than — or, through later
// rounds, infeasible where — the swap/recompute-only plan of the same
// graph is not; TSPLIT "resorts to swapping/recomputing full tensors if
// the cost outweighs the benefits" (§V-C). So when the split plan
// contains splits or fails, the swap/recompute-only plan (TsplitNoSplit)
// is made on a copy of the graph taken before planning, and the one with
// the shorter simulated step (or the one that exists) is kept.
// Report.Chosen says which.
func (t *tsplit) planSplitOrNot(s *passes.State) error {
	if !t.split || s.Opts.NoSwap {
		return passes.PlanRounds(s, t)
	}
	snap := s.Model.Clone()
	err := passes.PlanRounds(s, t)
	if err == nil && s.Report.Split == 0 {
		return nil
	}
	opts := *s.Opts
	opts.Policy = TsplitNoSplit
	alt := s.Fork(snap, &opts, TsplitNoSplit.Name())
	altErr := passes.PlanRounds(alt, TsplitNoSplit)
	switch {
	case altErr != nil && err != nil:
		return err
	case altErr != nil:
		s.Report.Chosen = "split plan (the swap/recompute-only plan failed)"
		return nil
	case err == nil && s.Report.Time <= alt.Report.Time:
		s.Report.Chosen = fmt.Sprintf("split plan (simulated step %.4g s; swap/recompute only: %.4g s)", s.Report.Time, alt.Report.Time)
		return nil
	}
	r := alt.Report
	r.Policy = t.Name()
	if err != nil {
		r.Chosen = "swap/recompute-only plan (the split plan failed: " + err.Error() + ")"
	} else {
		r.Chosen = fmt.Sprintf("swap/recompute-only plan (simulated step %.4g s; with splits: %.4g s)", r.Time, s.Report.Time)
	}
	s.Adopt(alt)
	return nil
}

// splitPNums are the split numbers the planner tries (TSPLIT §IV-B).
var splitPNums = []int{2, 4, 8, 16, 32, 64}

// planner holds the state of TSPLIT Alg. 2 over one order.
type planner struct {
	G       *ir.Graph
	Mem     *memory.Model
	TL      *passes.Timeline
	Prof    *profile.Profile
	Budget  int64
	Allowed [3]bool // which options may be chosen (index by Option)
	// SplitChoices lists how an op may be split (nil: never split).
	SplitChoices func(op *ir.Op) []passes.DimMap

	pos     []int
	uses    [][]int // use positions of each value, sorted
	saved   []int64 // ΔM(S)_i: bytes the decisions free at each position
	decided []bool  // by ValueID
	// byStart, active, next and activeAt keep the active set of liveAt.
	byStart  []int
	active   []int
	next     int
	activeAt int
	// splitDone marks ops already split in this round.
	splitDone map[ir.OpID]bool

	outOcc []float64
	inOcc  []float64
	opTime []float64
	n      int
}

// newPlanner prepares Alg. 2 on g's current order.
func newPlanner(g *ir.Graph, mem *memory.Model, tl *passes.Timeline, p *profile.Profile, budget int64) *planner {
	n := len(mem.Order)
	pl := &planner{G: g, Mem: mem, TL: tl, Prof: p, Budget: budget, n: n,
		pos: g.Position(), uses: make([][]int, g.NumValueIDs()), saved: make([]int64, n),
		decided: make([]bool, g.NumValueIDs()), splitDone: map[ir.OpID]bool{}, outOcc: append([]float64(nil), tl.OutOcc...),
		inOcc: append([]float64(nil), tl.InOcc...), opTime: make([]float64, n)}
	pl.Allowed = [3]bool{true, true, true}
	pl.activeAt = -1
	for i := range pl.opTime {
		pl.opTime[i] = tl.End[i] - tl.Start[i]
	}
	for i, op := range mem.Order {
		for _, v := range op.Inputs() {
			if v != nil {
				pl.uses[v.ID] = append(pl.uses[v.ID], i)
			}
		}
	}
	for id := range pl.uses {
		sort.Ints(pl.uses[id])
	}
	return pl
}

// splitFloor is the least device memory op's own tensors need when it is
// split as finely as any of its split choices allows: the activations
// read whole plus the micro-tensors of the split ones (math.MaxInt64: not
// splittable).
func (pl *planner) splitFloor(op *ir.Op) int64 {
	best := int64(math.MaxInt64)
	if pl.SplitChoices == nil || !pl.Allowed[passes.Swap] {
		return best
	}
	for _, dm := range pl.SplitChoices(op) {
		p := int(min(dm.Extent, int64(splitPNums[len(splitPNums)-1])))
		if p < 2 {
			continue
		}
		c := pl.splitCost(op, &dm, p)
		best = min(best, c.kept+c.micro)
	}
	return best
}

// splitCostOf is what splitting an op p ways does to the device memory
// and the links (InsertSplit's rewrite, counted).
type splitCostOf struct {
	// whole is the bytes of the split activations (inputs and outputs)
	// and the workspace at the op unsplit; micro what they need split:
	// two micro-tensors of each (one in use, the next in flight) — a sum
	// merge's partial outputs have the full shape — the device slices of
	// split weights, and a micro-op's share of the workspace.
	whole, micro int64
	// kept is the activations the op reads whole.
	kept int64
	// d2h and h2d are the bytes the split moves over each link.
	d2h, h2d int64
}

func (pl *planner) splitCost(op *ir.Op, dm *passes.DimMap, p int) splitCostOf {
	var c splitCostOf
	parts := passes.Parts(dm.Extent, p)
	for j, x := range op.Inputs() {
		if x == nil || j >= len(dm.Inputs) {
			continue
		}
		idx := pl.Mem.ByValue[x.ID]
		if idx < 0 {
			continue
		}
		iv := &pl.Mem.Intervals[idx]
		im := dm.Inputs[j]
		if im.Dim < 0 || (j == 1 && dm.Rewrite == passes.RewriteShape) {
			if iv.Kind != memory.Weight {
				c.kept += iv.Bytes
			}
			continue
		}
		size := x.Shape[im.Dim]
		var biggest, sum int64
		for _, pr := range parts {
			r := im.Range(pr[0], pr[1], size)
			b := memory.Align(iv.Bytes / max(size, 1) * (r.End - r.Start))
			biggest, sum = max(biggest, b), sum+b
		}
		c.micro += 2 * biggest
		if iv.Kind == memory.Weight {
			continue // sliced on the device
		}
		c.whole += iv.Bytes
		c.h2d += sum
		if x.Def == nil || ir.CopyOf(x.Def) != ir.ToDevice {
			c.d2h += iv.Bytes // staged on the host first
		}
	}
	if w := pl.Mem.WorkspaceAt[pl.pos[op.ID]]; w >= 0 {
		// The kernels' scratch scales with the micro-op's output (Conv's
		// im2col blocks, reductions' partials).
		b := pl.Mem.Intervals[w].Bytes
		c.whole += b
		c.micro += memory.Align(b / int64(p))
	}
	for i, y := range op.Outputs() {
		if y == nil {
			continue
		}
		b := memory.Align(y.Bytes())
		c.whole += b
		c.h2d += b // merged on the host, back whole
		if dm.Merge == passes.MergeSum {
			c.micro += 2 * b
			c.d2h += int64(p) * b
			continue
		}
		n := y.Shape[dm.Outputs[i].Dim]
		c.micro += 2 * memory.Align(b/max(n, 1)*(parts[0][1]-parts[0][0]))
		c.d2h += b
	}
	return c
}

// LowerBound is the memory no plan of this planner goes below: the
// largest, over ops, of the weights live at the op, the graph outputs
// already computed, and the op's own inputs, outputs and workspace
// (moDNN Eq. 2 in spirit). Splitting can go lower for splittable ops,
// which this bound does not credit.
func (pl *planner) LowerBound() int64 {
	// fixed[i]: bytes no eviction can free at i — weights live there and
	// graph outputs already computed (kept to the end).
	fixed := make([]int64, pl.n+1)
	for idx := range pl.Mem.Intervals {
		iv := &pl.Mem.Intervals[idx]
		var lo, hi int
		switch {
		case iv.Kind == memory.Weight:
			lo, hi = max(iv.Start, 0), min(iv.End, pl.n-1)
		case iv.Kind == memory.Activation && iv.End >= pl.n:
			lo, hi = iv.Start+1, pl.n-1
		default:
			continue
		}
		if lo <= hi {
			fixed[lo] += iv.Bytes
			fixed[hi+1] -= iv.Bytes
		}
	}
	var worst, run int64
	for i, op := range pl.Mem.Order {
		run += fixed[i]
		b := run
		seen := map[ir.ValueID]bool{}
		own := func(v *ir.Value) int64 {
			if v == nil || seen[v.ID] {
				return 0
			}
			seen[v.ID] = true
			idx := pl.Mem.ByValue[v.ID]
			if idx < 0 {
				return 0
			}
			iv := &pl.Mem.Intervals[idx]
			if iv.Kind == memory.Weight || (iv.Kind == memory.Activation && iv.End >= pl.n && iv.Start < i) {
				return 0 // counted in fixed
			}
			return iv.Bytes
		}
		var whole int64
		for _, list := range [][]*ir.Value{op.Inputs(), op.Outputs()} {
			for _, v := range list {
				whole += own(v)
			}
		}
		if w := pl.Mem.WorkspaceAt[i]; w >= 0 {
			whole += pl.Mem.Intervals[w].Bytes
		}
		b += min(whole, pl.splitFloor(op))
		worst = max(worst, b)
	}
	return worst
}

// candidate is one possible decision at a bottleneck.
type candidate struct {
	d     passes.Decision
	ratio float64
	from  [2]int // saving range [lo, hi]
}

// Run walks the order and, at each position where M_i − ΔM(S)_i exceeds
// the budget, applies the candidate with the smallest ΔT/ΔM until it
// fits (Alg. 2 without split, which package passes adds separately).
func (pl *planner) Run() (*passes.Plan, error) {
	plan := &passes.Plan{Budget: pl.Budget}
	for i := 0; i < pl.n; i++ {
		for pl.Mem.Live[i]-pl.saved[i] > pl.Budget {
			c := pl.best(i)
			if sp := pl.bestSplit(i); sp != nil && (c == nil || sp.ratio < c.ratio) {
				// Step 3 of Alg. 2: the split wins.
				plan.Splits = append(plan.Splits, &sp.d)
				pl.splitDone[sp.d.Op.ID] = true // the op split, which may follow a bottleneck swap-in
				for k := sp.from[0]; k <= sp.from[1]; k++ {
					pl.saved[k] += sp.d.DeltaM
				}
				continue
			}
			if c == nil && len(plan.Decisions)+len(plan.Splits) > 0 {
				// Stuck, but this round evicted something: a tensor can be
				// decided once per round, so values it restores (and the
				// later gaps of the tensors it decided) become candidates
				// only on the rewritten graph. End the round here.
				plan.Partial = true
				return plan, nil
			}
			if c == nil {
				return nil, &passes.InfeasibleError{Budget: pl.Budget, At: pl.Mem.Order[i].Describe(),
					Need: pl.Mem.Live[i] - pl.saved[i] - pl.evictable(i), LowerBound: pl.LowerBound()}
			}
			d := c.d
			plan.Decisions = append(plan.Decisions, &d)
			pl.decided[d.Value.ID] = true
			if d.Option == passes.Recompute {
				// The chain reads its checkpoints at d.Before (uses later
				// evictions must respect), keeps what it reads past its
				// last use until then, and needs its clones' transient
				// memory there; its members are decided just before it
				// (recompute.go).
				plan.Decisions = pl.commitRecompute(plan.Decisions)
			}
			for k := c.from[0]; k <= c.from[1]; k++ {
				pl.saved[k] += d.DeltaM
			}
			if d.Option == passes.Swap {
				pl.occupy(pl.outOcc, d.After+1, pl.n, pl.Prof.TransferTime(d.Value.Bytes(), true))
				pl.occupy(pl.inOcc, d.Trigger, d.Before, pl.Prof.TransferTime(d.Value.Bytes(), false))
			}
		}
	}
	return plan, nil
}

// evictable is what could still be freed at i (for the error message).
func (pl *planner) evictable(i int) int64 {
	var b int64
	for _, c := range pl.candidates(i) {
		b += c.d.DeltaM
	}
	return b
}

// occupy marks link time as used on the ops from lo on (Oc_u := 1)
// until dur seconds are covered.
func (pl *planner) occupy(occ []float64, lo, hi int, dur float64) {
	for u := lo; u < hi && u < pl.n && dur > 0; u++ {
		free := (1 - occ[u]) * pl.opTime[u]
		if free <= 0 {
			continue
		}
		take := min(free, dur)
		occ[u] += take / pl.opTime[u]
		dur -= take
	}
}

func (pl *planner) best(i int) *candidate {
	var best *candidate
	for _, c := range pl.candidates(i) {
		if best == nil || c.ratio < best.ratio || (c.ratio == best.ratio && c.d.After < best.d.After) {
			cc := c
			best = &cc
		}
	}
	return best
}

// candidates lists the non-split options at bottleneck i: every
// activation live across i that op i does not read, evicted over the
// gap of its uses that contains i.
func (pl *planner) candidates(i int) []candidate {
	var out []candidate
	op := pl.Mem.Order[i]
	for _, idx := range pl.liveAt(i) {
		iv := &pl.Mem.Intervals[idx]
		v := iv.Value
		if !iv.Evictable() || iv.Start >= i || iv.End <= i || iv.End >= pl.n || pl.decided[v.ID] {
			continue
		}
		if reads(op, v) {
			continue
		}
		a, q := iv.Start, -1
		for _, u := range pl.uses[v.ID] {
			if u < i {
				a = max(a, u)
			} else if u > i {
				q = u
				break
			}
		}
		if q < 0 {
			continue
		}
		if pl.Allowed[passes.Swap] {
			if c, ok := pl.swapCandidate(v, iv.Bytes, a, q, i); ok {
				out = append(out, c)
			}
		}
		if pl.Allowed[passes.Recompute] {
			if c, ok := pl.recomputeCandidate(v, iv.Bytes, a, q, i); ok {
				out = append(out, c)
			}
		}
	}
	return out
}

// liveAt returns the evictable intervals (activations and graph inputs)
// live across position i. Positions are visited in increasing order, so
// it keeps an active set: intervals enter when the walk passes their
// start and leave once it passes their end.
func (pl *planner) liveAt(i int) []int {
	if pl.byStart == nil {
		for idx := range pl.Mem.Intervals {
			iv := &pl.Mem.Intervals[idx]
			if iv.Value != nil && (iv.Kind == memory.Activation || iv.Kind == memory.Input) {
				pl.byStart = append(pl.byStart, idx)
			}
		}
		sort.SliceStable(pl.byStart, func(a, b int) bool {
			return pl.Mem.Intervals[pl.byStart[a]].Start < pl.Mem.Intervals[pl.byStart[b]].Start
		})
	}
	if i != pl.activeAt {
		for pl.next < len(pl.byStart) && pl.Mem.Intervals[pl.byStart[pl.next]].Start < i {
			pl.active = append(pl.active, pl.byStart[pl.next])
			pl.next++
		}
		kept := pl.active[:0]
		for _, idx := range pl.active {
			if pl.Mem.Intervals[idx].End > i {
				kept = append(kept, idx)
			}
		}
		pl.active = kept
		pl.activeAt = i
	}
	return pl.active
}

// addUse records a use of v at position q (a recompute clone's read).
func (pl *planner) addUse(v *ir.Value, q int) {
	u := pl.uses[v.ID]
	k := sort.SearchInts(u, q)
	if k < len(u) && u[k] == q {
		return
	}
	u = append(u, 0)
	copy(u[k+1:], u[k:])
	u[k] = q
	pl.uses[v.ID] = u
}

func reads(op *ir.Op, v *ir.Value) bool {
	for _, w := range op.Inputs() {
		if w == v {
			return true
		}
	}
	return false
}

// swapCandidate applies TSPLIT Eq. 2–3: ΔM = size; ΔT = the part of the
// swap-out not hidden by the ops between eviction and the bottleneck,
// plus the part of the swap-in not hidden before its consumer q.
func (pl *planner) swapCandidate(v *ir.Value, size int64, a, q, i int) (candidate, bool) {
	// The device copy stays live through op a+1 (decoupled swap-out),
	// so the saving starts at a+2 and must cover i.
	if a+2 > i {
		return candidate{}, false
	}
	out := pl.Prof.TransferTime(v.Bytes(), true)
	in := pl.Prof.TransferTime(v.Bytes(), false)
	// The runtime frees the device copy after the op that follows the
	// SwapOut (position a+1 here), first waiting for the copy: only
	// that op hides the swap-out (the memory model and the simulator
	// count the same).
	hide := (1 - pl.outOcc[a+1]) * pl.opTime[a+1]
	fwd := max(out-hide, 0)
	// Trigger: walk back from q until the swap-in is hidden, but keep the
	// restored copy from raising the memory above the budget, and after i.
	p := q
	hide = 0
	for p-1 > i && hide < in {
		k := p - 1
		if pl.Mem.Live[k]-pl.saved[k]+size > pl.Budget {
			break
		}
		hide += (1 - pl.inOcc[k]) * pl.opTime[k]
		p = k
	}
	bwd := max(in-hide, 0)
	if p <= i {
		return candidate{}, false
	}
	d := passes.Decision{Value: v, Option: passes.Swap, After: a, Before: q, Trigger: p, At: i, DeltaM: size, DeltaT: fwd + bwd}
	return candidate{d: d, ratio: (d.DeltaT + 1e-12) / float64(size), from: [2]int{a + 2, p - 1}}, true
}

// recomputeCandidate applies Eq. 4 with the memory-centric strategy of
// §V-D: v is recomputed just before q by cloning its producer and, for
// every input not available at q, that input's producer, back to the
// nearest checkpoints (recomputeChain: activations live at q, copies an
// earlier round restored, weights and graph inputs; at most maxChainOps
// forward, non-random ops). ΔT is the time of every op of the chain; ΔM
// at i is v's size less what the chain keeps past its last use across i.
// The chain's transient memory (its intermediates, other outputs and
// workspace) must fit at q with what is planned to be live there.
func (pl *planner) recomputeCandidate(v *ir.Value, size int64, a, q, i int) (candidate, bool) {
	ch, ok := pl.recomputeChain(v, q)
	if !ok {
		return candidate{}, false
	}
	dm, ok := pl.chainSaving(&ch, size, a, q, i)
	if !ok {
		return candidate{}, false
	}
	d := passes.Decision{Value: v, Option: passes.Recompute, After: a, Before: q, At: i, DeltaM: size, DeltaT: ch.time}
	return candidate{d: d, ratio: (ch.time + 1e-12) / float64(dm), from: [2]int{a + 1, q - 1}}, true
}

type splitCandidate struct {
	d     passes.SplitDecision
	ratio float64
	from  [2]int
}

// bestSplit is Step 2 of Alg. 2: split the bottleneck op itself. Its
// split inputs are staged in host memory and its output leaves piece by
// piece (InsertSplit), so while micro-op k runs the device holds about
// two pieces of each split tensor instead of the whole: Eq. 5's saving,
// min-less because input and output pieces both move. ΔT (Eq. 6) is the
// transfers of the split tensors (not hidden: conservative) plus the
// split overhead, p micro-kernels against one (TSPLIT Fig. 5). The
// smallest p that reaches the budget is taken.
func (pl *planner) bestSplit(i int) *splitCandidate {
	if pl.SplitChoices == nil || !pl.Allowed[passes.Swap] {
		return nil // splits stage their pieces on the host: they swap
	}
	op := pl.Mem.Order[i]
	from := i
	if ir.CopyOf(op) == ir.ToDevice {
		// The bottleneck is a swap-in bringing back a whole tensor for a
		// consumer: split that consumer, which then reads the host copy
		// piece by piece (the swap-in goes away).
		uses := op.Output(0).Uses()
		if len(uses) != 1 {
			return nil
		}
		op = uses[0].Op
	}
	if pl.splitDone[op.ID] || ir.CopyOf(op) != ir.NoCopy || len(op.Outputs()) == 0 {
		return nil
	}
	i = pl.pos[op.ID]
	var best *splitCandidate
	for _, ch := range pl.SplitChoices(op) {
		for _, p := range splitPNums {
			if int64(p) > ch.Extent {
				break
			}
			c := pl.splitCost(op, &ch, p)
			dm := c.whole - c.micro
			if dm <= 0 {
				continue
			}
			if pl.Mem.Live[from]-pl.saved[from]-dm > pl.Budget && p != splitPNums[len(splitPNums)-1] && int64(2*p) <= ch.Extent {
				continue // not enough yet: try a finer split
			}
			w := profile.OpWork(op)
			micro := profile.Work{FLOPs: w.FLOPs / float64(p), Bytes: w.Bytes / float64(p)}
			overhead := float64(p)*pl.Prof.WorkTime(micro) - pl.Prof.WorkTime(w)
			xfer := pl.Prof.TransferTime(c.d2h, true) + pl.Prof.TransferTime(c.h2d, false)
			dt := max(overhead, 0) + xfer
			sc := &splitCandidate{d: passes.SplitDecision{Op: op, PNum: p, Map: ch, At: i, DeltaM: dm, DeltaT: dt},
				ratio: (dt + 1e-12) / float64(dm), from: [2]int{from, i}}
			if best == nil || sc.ratio < best.ratio {
				best = sc
			}
			break
		}
	}
	return best
}
