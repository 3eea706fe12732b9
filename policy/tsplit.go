package policy

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"

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
	pl.penalty = c.Opts.SwapPenalty
	pl.PeakFirst, pl.MaxRelease = c.Opts.PeakFirst, c.Opts.MaxRelease
	pl.chainFit = c.Opts.ChainFit
	pl.Segments = c.Opts.Segments
	pl.outputSwaps = c.Opts.OutputSwaps
	pl.LinkPrice = c.Opts.LinkPrice
	if c.Opts.LinkQueue {
		pl.queue, pl.out = true, newLinkQueue(c.Mem.Order, c.TL)
	}
	if t.split {
		pl.SplitChoices = passes.SplitChoices(c.Model, c.FT)
	}
	pl.mayDefer = c.Round < deferRounds
	p, err := pl.Run()
	if p != nil {
		p.ShortReleases = c.Opts.ShortReleases
	}
	return p, err
}

// OffloadsState says tsplit keeps parameters and optimizer state on the
// host where the step cannot fit with them on the device (TSPLIT: every
// tensor is a candidate; passes.OffloadState).
func (t *tsplit) OffloadsState() bool { return true }

// SearchesUpdate: under OrderAuto, PlanStep's search places the update
// of offloaded state itself (searchAt plans every order with the update
// on the device and on the host).
func (t *tsplit) SearchesUpdate(opts *passes.Options) bool { return opts.Order == passes.OrderAuto }

// LowerBound is the planner's bound on c's graph (planner.LowerBound),
// crediting splits where the policy may split.
func (t *tsplit) LowerBound(c *Context) int64 {
	pl := newPlanner(c.G, c.Mem, c.TL, c.Prof, c.Budget)
	if t.split && !c.Opts.NoSwap {
		pl.SplitChoices = passes.SplitChoices(c.Model, c.FT)
	}
	return pl.LowerBound()
}

// PlanStep plans the step. With an order given (Options.Order) it is
// TSPLIT's Alg. 2 in that order (planSplitOrNot), each swap-out's device
// copy released one op after it. Under OrderAuto it searches:
//
//  1. Alg. 2 under every order of passes.Orders (depth-first, backward
//     as late as possible, as built, backward as late as possible
//     with weight gradients first, and that with the backward ops that
//     shrink what they read run early, planned twice, the second time
//     with recompute chains fitted before their reader; those two only
//     where the order differs from the one before), concurrently, each
//     on its own copy
//     of the graph, with swap-out windows of up to maxRelease ops (a
//     plan that fails that way is made again with one-op windows, and
//     where another order fits, for the grid points below the budget:
//     deeper);
//  2. the best order again with the bottlenecks walked from the peak
//     down (planner.walk), and where that is not faster, every other
//     order that fits walked from the peak too;
//  3. simulate-and-repair of the fastest plan so far (repair), of the
//     fastest of step 2's other peak walks where it beats that, and
//     where no re-plan of the fastest is faster, of the next fastest; a
//     faster plan of step 1's deeper ones replaces the result;
//  4. where any variant split, steps 1–3 without splits (what
//     tsplit-nosplit does), so tsplit is never behind it;
//  5. where the plan adds time, moDNN's offload ranking (offloadRanked);
//  6. where it still adds time, steps 1–5 for the next point below the
//     budget on a grid of gridPct of the unplanned peak, and the next
//     while the last one's plan was the fastest so far (tighterBudgets).
//
// It keeps the plan with the shortest simulated step, the earliest made
// on a tie, so the result does not depend on which goroutine finishes
// first; Report.Order and Report.Chosen say which. No order and no walk
// wins everywhere: the depth-first order gives VGG's split plans their
// largest batches, while on ResNet-50 it hoists backward ops whose
// outputs no recompute chain can rebuild; walking from the peak finds
// cheaper swaps in the middle budgets and fails first near the
// smallest.
func (t *tsplit) PlanStep(s *passes.State) error {
	if s.Opts.Order != passes.OrderAuto {
		return t.planSplitOrNot(s, nil)
	}
	snap := s.Model.Clone()
	f, err := t.planAt(s, snap, "", 0, s.Opts.Update)
	if interrupted(err) {
		return err
	}
	if err == nil && !s.Opts.AnyFit && f.Report.Time > f.Report.BaseTime*(1+goodEnough) {
		// Greedy planning is not monotonic in the budget: a plan made
		// for a smaller budget, which fits this one too, can be faster
		// (resnet18-small b32: +22.8 % at 50 %, +13.1 % at 45 % of the
		// peak; +0.22 % at 70 %, +0.16 % at 65 %). So the search also
		// plans for the grid point just below the budget, on a grid of
		// gridPct of the unplanned peak (not of the budget: the budget
		// on a grid point and the budget above it then both try that
		// point's search), and keeps the faster plan, with the budget it
		// was asked for. A budget's plan is then never slower than the
		// grid point's own search below it. Where that point's plan came
		// from the next point down in turn, the budget's would stop one
		// short of it (resnet50-small b96: +0.11 % at 60 % of its peak
		// from 55 %'s search, +0.04 % at 55 % from 50 %'s), so while the
		// grid point's plan is faster than every plan before it, the
		// next point down is searched too, tighterSteps at most.
		// Nesting every budget's candidates unconditionally (every grid
		// point down to the smallest that fits) would cost several times
		// the planning time where the tighter plans are slower
		// (BERT-large at half its peak: 4.220 s for the budget, 4.266 s
		// for the grid point below).
		budget, best := f.Report.Budget, f.Report.Time
		misses, points := 0, walkPoints(s.Model.Graph)
		for k, target := range tighterBudgets(budget, f.Report.BasePeak) {
			if k >= points {
				break
			}
			g, gerr := t.planAt(s, snap, fmt.Sprintf("at-%d/", target), target, placed(f, s.Opts.Update))
			if interrupted(gerr) {
				return gerr
			}
			if gerr != nil {
				break
			}
			// The plan is for the budget if kept: its releases too.
			if err := passes.PlaceReleasesWithin(g, budget); err != nil {
				return err
			}
			if g.Report.Time >= f.Report.Time {
				if nearTie(g.Report, f.Report) {
					// The point's search landed within a hair of the
					// best plan: no sign yet that tighter budgets plan
					// slower, and the point below may still take
					// another path. Go on to it (the CI-sized
					// ResNet-101 b61 at 85 % of its peak: 80 %'s plan
					// 35 ns slower than 85 %'s own, +0.0196 %, and 75 %'s
					// +0.0000 %).
					continue
				}
				if misses++; misses < walkMisses {
					continue
				}
				break
			}
			g.Report.Budget = budget
			g.Report.Chosen = fmt.Sprintf("planned for %d bytes (%.4g s, faster than for the budget, %.4g s): %s", target, g.Report.Time, best, g.Report.Chosen)
			f = g
			if f.Report.Time <= f.Report.BaseTime*(1+goodEnough) {
				break
			}
		}
	}
	if f != nil {
		s.Adopt(f)
	}
	return err
}

// nearTie says whether plan g, not faster than f, adds at most
// tieAdded more of the time f adds over the unplanned step. The walk
// below the budget stops at a point whose plan is slower, as evidence
// that tighter budgets plan slower from there; a near tie is next to no
// such evidence (its search reached about the same step by another
// greedy path or the same one), while a clearly slower point is: BERT-large
// at half its peak plans 4.220 s for the budget and 4.266 s (35 % more
// added time) for the point below, and a walk that went on there would
// cost a third more planning time.
func nearTie(g, f *passes.Report) bool {
	return g.Time-f.Time <= tieAdded*(f.Time-f.BaseTime)
}

// Where the search plans below the budget: the grid step in percent of
// the unplanned peak, how many grid points PlanStep's whole search
// tries at most (the first always, each next one while the last paid),
// and how many searchAt tries for an order that fails where another
// fits (deeper).
const (
	gridPct      = 5
	tighterSteps = 4
	deeperSteps  = 2
	// tieAdded is nearTie's margin, a fraction of the added time.
	tieAdded = 0.01
	// walkMisses is how many clearly slower grid points end the walk
	// below the budget. A slower point is evidence, not proof, that
	// tighter budgets plan slower: resnet18-small b32 plans +22.8 % for
	// 50 % of its peak and +12.53 % for 45 %, which fits 55 % too, where
	// the budget's own search gives +12.64 %; ResNet-101 b195 +0.1305 %
	// for 90 %, +0.1356 % for 85 % and +0.1161 % for 80 %.
	walkMisses = 2
	// walkOps bounds the walk's grid points by the step's size
	// (walkPoints).
	walkOps = 9000
)

// walkPoints is how many grid points the walk below the budget searches
// at most: walkOps over the step's ops, at least one and at most
// tighterSteps. Each costs one search, and planning time grows with the
// ops: BERT-large (4918 ops) at half its peak plans in 0.75 s with one
// point and 1.2 s with two (the second gains 1 % of the step); the
// full-size ResNet-101 (4256 ops) gets two, ResNet-50 (2182) four.
func walkPoints(g *ir.Graph) int {
	return max(1, min(tighterSteps, walkOps/max(len(g.Order()), 1)))
}

// tighterBudgets are the grid points PlanStep may search below budget.
func tighterBudgets(budget, basePeak int64) []int64 {
	return gridBelow(budget, basePeak, tighterSteps)
}

// deeperBudgets are the grid points below budget where searchAt plans
// an order that failed.
func deeperBudgets(budget, basePeak int64) []int64 {
	return gridBelow(budget, basePeak, deeperSteps)
}

// gridBelow are the first n points of the grid of gridPct of basePeak
// strictly below budget, largest first (basePeak·k·gridPct/100 rounded
// down, the bytes bench's budget sweeps plan for).
func gridBelow(budget, basePeak int64, n int) []int64 {
	if budget >= basePeak || basePeak <= 0 || basePeak > math.MaxInt64/100 {
		return nil
	}
	var out []int64
	k := budget * 100 / gridPct / basePeak
	for ; k > 0 && len(out) < n; k-- {
		if g := basePeak * (k * gridPct) / 100; g < budget && g > 0 {
			out = append(out, g)
		}
	}
	return out
}

// planAt is PlanStep's search at one budget (0: the options'): the
// orders, walks and repairs (search), the same without splits where
// any variant split, and moDNN's offload ranking where that plan adds
// time. It keeps the fastest, the earliest on a tie.
func (t *tsplit) planAt(s *passes.State, snap *ir.Model, prefix string, budget int64, update passes.UpdatePlace) (*passes.State, error) {
	// The candidates are compared with their releases placed
	// (passes.PlaceReleases): the search inside each compares them
	// without.
	place := func(f *passes.State, err error) error {
		if err != nil || f == nil || f.Report == nil {
			return nil // no plan: nothing to place
		}
		return passes.PlaceReleases(f)
	}
	f, err, splits := t.searchAt(s, snap, prefix, budget, update)
	if interrupted(err) {
		return nil, err
	}
	if perr := place(f, err); perr != nil {
		return nil, perr
	}
	if splits {
		// Splits were tried somewhere: the same search without them is
		// a plan tsplit-nosplit would make, and tsplit must not be
		// behind it. (Where no variant split, it is this same plan.)
		nosplit := TsplitNoSplit.(*tsplit)
		g, gerr, _ := nosplit.searchAt(s, snap, prefix+"nosplit/", budget, placed(f, update))
		if interrupted(gerr) {
			return nil, gerr
		}
		if perr := place(g, gerr); perr != nil {
			return nil, perr
		}
		if gerr == nil && (err != nil || g.Report.Time < f.Report.Time) {
			g.Report.Policy = t.Name()
			g.Report.Chosen = "swap/recompute only: " + g.Report.Chosen
			f, err = g, nil
		}
	}
	if f != nil && !s.Opts.AnyFit && !s.Opts.NoSwap && (err != nil || f.Report.Time > f.Report.BaseTime*(1+goodEnough)) {
		g, gerr := t.offloadRanked(s, snap, prefix, budget, placed(f, update))
		if interrupted(gerr) {
			return nil, gerr
		}
		if perr := place(g, gerr); perr != nil {
			return nil, perr
		}
		if gerr == nil && (err != nil || g.Report.Time < f.Report.Time) {
			f, err = g, nil
		}
	}
	return f, err
}

// offloadRanked is the search's last candidate: swaps only, in the
// depth-first order, chosen by moDNN's Alg. 1 (Modnn on the whole
// batch) — at each bottleneck the tensors whose swap-out the compute
// before it hides best, the farthest next use first, each prefetched as
// late as hides its transfer. Its plans are in tsplit's class (swaps in
// one order), and where swaps cost nothing in Eq. 3 that ranking can
// beat Alg. 2's, which then breaks ties by size alone: the tensors with
// the farthest next use leave the link the most time to bring them back
// (vit_mini at 45 % of its peak: +0.147 % against Alg. 2's best
// +0.178 %). It is tried only where the search's plan adds time.
func (t *tsplit) offloadRanked(s *passes.State, snap *ir.Model, prefix string, budget int64, update passes.UpdatePlace) (*passes.State, error) {
	opts := *s.Opts
	opts.Policy, opts.Update = Modnn, update
	if budget > 0 {
		opts.Budget = budget
	}
	var m *ir.Model
	s.Locked(func() { m = snap.Clone() })
	f := s.Fork(m, &opts, prefix+"offload-ranked")
	f.NoBound = true
	if err := f.Reorder(Modnn.DefaultOrder()); err != nil {
		return nil, err
	}
	if err := passes.PlanRounds(f, Modnn); err != nil {
		return nil, err
	}
	r := f.Report
	r.Policy = t.Name()
	r.Chosen = fmt.Sprintf("swaps ranked by moDNN's offload order in the %s order (simulated step %.4g s)", r.Order, r.Time)
	f.Detail = nil
	return f, nil
}

// searchAt is one pass over orders, walks and repairs, for budget
// bytes (0: the options'): the plan it keeps (or the first order's
// failure, with its report as far as it got), and whether a plan it
// made tried splits (a variant that fails has already tried without
// them: planSplitOrNot).
//
// With the state offloaded and update UpdateAuto, every order is
// planned with the update on the device and on the host (the device's
// first, so that it wins a tie), and the walk from the peak and the
// repairs follow the faster variant's placement: one search instead of
// one per placement (PlanMemory, passes.UpdateSearcher).
func (t *tsplit) searchAt(s *passes.State, snap *ir.Model, prefix string, budget int64, update passes.UpdatePlace) (*passes.State, error, bool) {
	// Forks share the caller's callbacks: call them one at a time.
	base := *s.Opts
	if budget > 0 {
		base.Budget = budget
	}
	base.MaxRelease = maxRelease
	if cb := s.Opts.OnRound; cb != nil {
		base.OnRound = func(round int, peak, target int64) { s.Locked(func() { cb(round, peak, target) }) }
	}
	base.Update = update
	updates := []passes.UpdatePlace{update}
	if base.OffloadState && update == passes.UpdateAuto {
		updates = []passes.UpdatePlace{passes.UpdateDevice, passes.UpdateHost}
	}
	type variant struct {
		order     passes.OpOrder
		update    passes.UpdatePlace
		peakFirst bool
		// segments: segment candidates, and swap-out windows of up to
		// longRelease ops.
		segments bool
		// chainFit: recompute chains fitted before their reader
		// allocates (passes.Options.ChainFit).
		chainFit bool
		// price: segments, with swaps ranked at this share of their
		// transfer time and chains reading this round's swap-ins
		// (passes.Options.LinkPrice).
		price float64
		// release caps the swap-out windows (0: maxRelease); queue
		// prices the swap-outs by the link's queue (Options.LinkQueue).
		release int
		queue   bool
		// outputs: graph outputs may be swapped to the step's end
		// (passes.Options.OutputSwaps).
		outputs bool
		name    string
		// deep marks a variant that failed for the budget and was
		// planned for target bytes, below the budget asked (deeper).
		deep          bool
		target, asked int64
		plan          *passes.State
		err           error
	}
	plan := func(v *variant, noBound bool) {
		opts := base
		opts.PeakFirst, opts.Update, opts.ChainFit, opts.OutputSwaps = v.peakFirst, v.update, v.chainFit, v.outputs
		if v.segments {
			opts.Segments, opts.MaxRelease = true, longRelease
		}
		if v.price > 0 {
			opts.LinkPrice = v.price
		}
		if v.release > 0 {
			opts.MaxRelease, opts.LinkQueue = v.release, v.queue
		}
		v.plan, v.err = t.planIn(s, snap, v.order, &opts, v.name, noBound)
		if v.err != nil && !interrupted(v.err) && !errors.Is(v.err, passes.ErrSameOrder) {
			// Copies freed sooner than planned hold fewer bytes: where
			// the windows as planned leave no plan, that variant may
			// (InceptionV4 b143 at 10 % of its peak: only the
			// depth-first order's split plan fits, this way).
			short := opts
			short.ShortReleases = true
			if f, err := t.planIn(s, snap, v.order, &short, v.name+"-short-releases", true); err == nil {
				v.plan, v.err = f, nil
				return
			}
			opts.MaxRelease = 1
			if f, err := t.planIn(s, snap, v.order, &opts, v.name+"-release-1", true); err == nil {
				v.plan, v.err = f, nil
			}
		}
	}
	// deeper plans a variant that failed for the budget, where another
	// order fits it, for the grid points below it (deeperBudgets),
	// keeping the first plan that fits: its greedy path got stuck, and
	// a tighter target takes another (VGG-19 b301 as built, without
	// splits: no plan for 60 % or 55 % of its peak, 7.358 s for 50 %,
	// which fits both; docs/planner.md §2a). Such a plan competes with
	// the search's repaired plan at the end; it does not take the peak
	// walk and the repairs from the orders that fit (VGG-16 b320 at
	// 65 %: as built for 55 %, 6.732 s, beats the depth-first order's
	// 7.027 s, which the peak walk and a repair take to 6.696 s).
	deeper := func(v *variant) {
		if v.plan == nil || v.plan.Report == nil {
			return
		}
		r := v.plan.Report
		for _, target := range deeperBudgets(r.Budget, r.BasePeak) {
			opts := base
			opts.Budget, opts.PeakFirst, opts.Update, opts.ChainFit = target, v.peakFirst, v.update, v.chainFit
			f, err := t.planIn(s, snap, v.order, &opts, fmt.Sprintf("%s-at-%d", v.name, target), true)
			if err == nil || interrupted(err) {
				v.plan, v.err = f, err
				if err == nil {
					v.target, v.asked, v.deep = target, r.Budget, true
				}
				return
			}
		}
	}
	// each runs fn on every variant, at most GOMAXPROCS at once, and
	// returns when all are done
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	each := func(batch []*variant, fn func(int, *variant)) {
		var wg sync.WaitGroup
		for k, v := range batch {
			wg.Add(1)
			go func() {
				defer wg.Done()
				sem <- struct{}{}
				defer func() { <-sem }()
				fn(k, v)
			}()
		}
		wg.Wait()
	}
	var vs []*variant
	for _, u := range updates {
		for _, o := range passes.Orders {
			name := prefix + updateName(u, len(updates) > 1) + "order-" + string(o)
			vs = append(vs, &variant{order: o, update: u, name: name})
			if o == passes.OrderShrinkEarly {
				// shrink-early twice: also with chains fitted before
				// their reader allocates. That test is exact for the
				// clones, the usual one conservative by the reader's
				// outputs, and neither greedy path wins everywhere: on
				// every order the exact one cost BERT-base b275
				// +2.13/+13.87/+17.59 % -> +3.35/+15.27/+19.54 % at
				// 50/30/20 % of its peak, and on shrink-early alone
				// ResNet-101 b195 +8.63 -> +8.77 % at 30 %, while it
				// takes VGG-19 b301 at 60 % from +25.64 % to +2.91 %
				// (the first convolution's activation recomputed for
				// its weight gradient: the usual test counted that
				// gradient's 4 GB Transpose as live with the clones).
				// Where nothing shrinks (BERT) neither is planned.
				vs = append(vs, &variant{order: o, update: u, chainFit: true, name: name + "-chain-fit"})
			}
		}
	}
	// the lower bound is computed once, by the first variant
	each(vs, func(k int, v *variant) { plan(v, k > 0) })
	// An order that is another's (shrink-early where nothing shrinks)
	// was not planned: drop it.
	vs = slices.DeleteFunc(vs, func(v *variant) bool { return errors.Is(v.err, passes.ErrSameOrder) })
	best := -1
	splits := false
	pick := func() error {
		best, splits = -1, false
		for k, v := range vs {
			if interrupted(v.err) {
				return v.err
			}
			splits = splits || v.err == nil && v.plan.Report.Chosen != ""
			if v.err == nil && !v.deep && (best < 0 || v.plan.Report.Time < vs[best].plan.Report.Time) {
				best = k
			}
		}
		return nil
	}
	if err := pick(); err != nil {
		return nil, err, false
	}
	// A plan as fast as the unplanned step leaves the rest of
	// the search (the peak walk, repair, the no-split search) nothing
	// worth its time: stop there. So does a caller that only asks
	// whether the budget fits (AnyFit).
	done := best >= 0 && (s.Opts.AnyFit || vs[best].plan.Report.Time <= vs[best].plan.Report.BaseTime*(1+goodEnough))
	if best >= 0 && !done {
		// Where one order fits, the others' failures are their greedy
		// paths': plan those deeper (where none fits, the budget is
		// left failing, as without this search).
		each(vs, func(_ int, v *variant) {
			if v.err != nil {
				deeper(v)
			}
		})
		if err := pick(); err != nil {
			return nil, err, false
		}
	}
	// Steps 2 and 3 continue the fastest plan; where that is
	// grad-first's or shrink-early's, also the fastest plan of another
	// order, first (it wins a tie): such a plan can lead by a hair and
	// end behind (the CI-sized VGG-16 b100 at 85 % of its peak:
	// grad-first 5.857 ms, as built 5.869 ms, whose walk from the peak
	// and two repairs reach 5.855 ms while grad-first's reach nothing;
	// InceptionV4 b143 at 30 %: shrink-early 2.345 s, alap 2.507 s in op
	// order, shrink-early 2.185 s from the peak with no repair that
	// pays, alap 2.056 s from the peak and 1.938 s after three repairs).
	// The other order may be the other of the two (InceptionV4 at 50 %:
	// grad-first leads, shrink-early's plan ends fastest).
	gradFirst := func(o passes.OpOrder) bool { return o == passes.OrderGradFirst || o == passes.OrderShrinkEarly }
	leads := []int{best}
	if best >= 0 && !done && gradFirst(vs[best].order) {
		other := -1
		for k, v := range vs {
			if v.err == nil && !v.deep && v.order != vs[best].order && (other < 0 || v.plan.Report.Time < vs[other].plan.Report.Time) {
				other = k
			}
		}
		if other >= 0 {
			leads = []int{other, best}
		}
	}
	var segs, peaks []*variant
	// wins are the best order's window variants (windowReleases).
	var wins []*variant
	var priced *variant
	if best >= 0 && !done {
		// Each lead again with the bottlenecks walked from the peak,
		// and, concurrently, with segment candidates and long swap-out
		// windows (segments.go): where a round evicts most of the
		// forward pass, whole runs recomputed once, and swaps whose
		// copies have time to finish, beat chains that grow past
		// maxChainOps and swaps that stall the compute stream (BERT-base
		// b275 at 20 % of its peak: +35.7 % → +18.7 %). Every lead, not
		// only the best order: where grad-first leads by a hair, the
		// other lead's segments can win (shufflenet_v2_x1_0 b64 at 30 %
		// of its peak: as built with segments 0.07281 s, grad-first's
		// 0.08007 s).
		var batch []*variant
		for _, l := range leads {
			w := vs[l]
			peaks = append(peaks, &variant{order: w.order, update: w.update, peakFirst: true, chainFit: w.chainFit, name: w.name + "-peak"})
		}
		for _, l := range leads {
			w := vs[l]
			segs = append(segs, &variant{order: w.order, update: w.update, peakFirst: true, segments: true, chainFit: w.chainFit, name: w.name + "-segments"})
		}
		// The best order's only: for both leads where grad-first leads,
		// BERT-large's planning took 0.99 s.
		w := vs[best]
		for _, r := range windowReleases {
			name := fmt.Sprintf("%s-release-%d", w.name, r.ops)
			if r.peak {
				name += "-peak"
			}
			if r.queue {
				name += "-queue"
			}
			wins = append(wins, &variant{order: w.order, update: w.update, peakFirst: r.peak, chainFit: w.chainFit, release: r.ops, queue: r.queue, name: name})
		}
		// Also the best order with its updated weights swapped out
		// until the step's end (passes.Options.OutputSwaps), in op
		// order, from the peak and link-priced: where an activation
		// only just does not fit near the end of the backward pass,
		// they free it for nothing (VGG-16 b320 at 55 % of its peak:
		// 65 MiB over at the first layer's weight gradient, where the
		// classifier's 411 MB updated weight can wait on the host:
		// +42.68 → +0.59 %). They are kept, unrepaired, like the
		// segment variants, where they beat the rest: not in every
		// plan, nor as a start of the repair, because a free swap of a
		// few MiB steers the greedy path elsewhere (ResNet-50 b289 at
		// 50 % with them in every plan: +3.01 → +4.06 %; VGG-16 b320 at
		// 50 %, repaired from one: +78.45 → +80.43 %).
		for _, peak := range []bool{false, true} {
			name := w.name + "-outputs"
			if peak {
				name += "-peak"
			}
			segs = append(segs, &variant{order: w.order, update: w.update, peakFirst: peak, chainFit: w.chainFit, outputs: true, name: name})
		}
		batch = append(batch, wins...)
		priced = &variant{order: w.order, update: w.update, peakFirst: true, segments: true, chainFit: w.chainFit, price: linkPrice, name: w.name + "-priced"}
		segs = append(segs, &variant{order: w.order, update: w.update, peakFirst: true, segments: true, chainFit: w.chainFit, price: linkPrice, outputs: true, name: w.name + "-priced-outputs"})
		// And every order whose plan is within pricedSpread of the best,
		// from the peak with segments, at the lower link prices, kept like
		// the segment variants where they beat the rest: which order and
		// price wins differs by model and budget (linkPrices). Only where
		// the best plan both swaps and recomputes: the price moves
		// tensors between the two, and a plan without one of them has
		// nothing to move (the CI-sized sweep's 99 budgets, which these
		// variants never changed, then plan without them).
		if swapsAndClones(vs[best].plan) {
			for _, x := range vs {
				if x.err != nil || x.deep || x.plan.Report.Time > vs[best].plan.Report.Time*(1+pricedSpread) {
					continue
				}
				for _, pr := range linkPrices {
					segs = append(segs, &variant{order: x.order, update: x.update, peakFirst: true, segments: true, chainFit: x.chainFit, price: pr,
						name: fmt.Sprintf("%s-priced-%g", x.name, pr)})
				}
			}
		}
		batch = append(append(append(batch, peaks...), segs...), priced)
		each(batch, func(_ int, v *variant) { plan(v, true) })
		for _, v := range batch {
			if interrupted(v.err) {
				return nil, v.err, false
			}
			splits = splits || v.err == nil && v.plan.Report.Chosen != ""
		}
		vs = append(append(vs, peaks...), wins...)
	}
	type lead struct {
		w       *variant
		f       *passes.State
		repairs int
	}
	var ends []lead
	unpaid := false // a lead's peak walk was not faster than its plan
	for n, l := range leads {
		if l < 0 {
			break
		}
		w := vs[l]
		if n < len(peaks) && peaks[n].err == nil && peaks[n].plan.Report.Time < w.plan.Report.Time {
			w = peaks[n]
		} else if n < len(peaks) {
			unpaid = true
		}
		if l == best {
			// The repair starts from the fastest of the best order's
			// plans, its window variants' too.
			for _, x := range wins {
				if x.err == nil && x.plan.Report.Time < w.plan.Report.Time {
					w = x
				}
			}
		}
		e := lead{w: w, f: w.plan}
		if !done {
			e.f, e.repairs = t.repair(s, snap, w.order, w.plan, w.name)
		}
		ends = append(ends, e)
	}
	if unpaid {
		// A lead's peak walk did not pay: the walks rank that order's
		// plans otherwise than step 1 did, so step 1's ranking says
		// nothing about the other orders' peak walks. Walk those from
		// the peak too, and where the fastest of them beats every
		// plan a lead's repair started from, repair it as well (the
		// leads' repairs are kept beside it: repairs gain unequally,
		// and InceptionV4 b143 at 75 % of its peak, as built from the
		// peak 1.661 s, repairs to 1.6567 s, alap in op order 1.667 s to
		// 1.6563 s). ResNet-101 b195 at 15 % of its peak, without
		// splits: alap 3.299 s in op order, no plan from the peak; as
		// built 3.681 s in op order, 2.947 s from the peak.
		var more []*variant
		for k, v := range vs {
			if v.err != nil || v.deep || v.peakFirst || v.release > 0 || slices.Contains(leads, k) {
				continue
			}
			more = append(more, &variant{order: v.order, update: v.update, peakFirst: true, chainFit: v.chainFit, name: v.name + "-peak"})
		}
		each(more, func(_ int, v *variant) { plan(v, true) })
		var x *variant
		for _, v := range more {
			if interrupted(v.err) {
				return nil, v.err, false
			}
			splits = splits || v.err == nil && v.plan.Report.Chosen != ""
			if v.err == nil && (x == nil || v.plan.Report.Time < x.plan.Report.Time) {
				x = v
			}
		}
		vs = append(vs, more...)
		if x != nil && !slices.ContainsFunc(ends, func(e lead) bool { return e.w.plan.Report.Time <= x.plan.Report.Time }) {
			f, n := t.repair(s, snap, x.order, x.plan, x.name)
			ends = append(ends, lead{w: x, f: f, repairs: n})
		}
	}
	var tried []string
	for _, v := range append(append(vs, segs...), priced) {
		if v == nil {
			continue
		}
		what := string(v.order)
		if len(updates) > 1 {
			what += ", update on the " + v.update.String()
		}
		if v.peakFirst {
			what += " from the peak"
		}
		if v.chainFit {
			what += " with chains fitted before their reader"
		}
		if v.segments {
			what += " with segments"
		}
		if v.price > 0 {
			what += fmt.Sprintf(" and the link priced at %g", v.price)
		}
		if v.release > 0 {
			what += fmt.Sprintf(" with swap-out windows of up to %d ops", v.release)
		}
		if v.queue {
			what += " priced by the link's queue"
		}
		if v.outputs {
			what += " with updated weights swapped to the step's end"
		}
		if v.err == nil && v.plan.Opts.ShortReleases {
			what += " with the copies freed after their windows' count of ops"
		}
		if v.deep {
			what += fmt.Sprintf(": no plan; for %d bytes", v.target)
		}
		if v.err != nil {
			tried = append(tried, what+": no plan")
		} else {
			tried = append(tried, fmt.Sprintf("%s: %.4g s", what, v.plan.Report.Time))
		}
	}
	if best < 0 {
		// No order fits: the first one's failure (depth-first, which
		// computed the lower bound), and its report as far as it got,
		// stand.
		return vs[0].plan, vs[0].err, splits
	}
	e := ends[0]
	for _, o := range ends[1:] {
		if o.f.Report.Time < e.f.Report.Time {
			e = o
		}
	}
	if !done && e.repairs == 0 {
		// No re-plan of the fastest plan was faster: its swaps'
		// penalties moved the queueing onto others. The next fastest
		// plan no repair started from, whose re-plans start from other
		// swaps, is repaired too, and the faster kept (InceptionV4 b143
		// at 50 % of its peak, alap: 1.7305 s from the peak, no re-plan
		// faster; 1.7352 s in op order, repaired to 1.7034 s).
		var next *variant
		for _, v := range vs {
			if v.err == nil && !v.deep && !slices.ContainsFunc(ends, func(e lead) bool { return e.w == v }) &&
				(next == nil || v.plan.Report.Time < next.plan.Report.Time) {
				next = v
			}
		}
		if next != nil {
			if g, n := t.repair(s, snap, next.order, next.plan, next.name); g.Report.Time < e.f.Report.Time {
				e = lead{w: next, f: g, repairs: n}
			}
		}
	}
	f, w, repairs := e.f, e.w, e.repairs
	var seg *variant // the fastest segment variant, the first on a tie
	for _, v := range segs {
		if v.err == nil && (seg == nil || v.plan.Report.Time < seg.plan.Report.Time) {
			seg = v
		}
	}
	if seg != nil && seg.plan.Report.Time < f.Report.Time {
		// The segment variant is kept, unrepaired, where it beats the
		// others' repaired plan: it never makes the search's plan
		// slower than it was without it (repairing it in the others'
		// place did at 95 % of BERT-base b275's peak, +0.15 % →
		// +0.34 %), and it costs one plan, made beside the peak walk.
		// Repairing it too would gain little (BERT-base b275 at 20 %:
		// +19.2 % → +18.7 %) for two more plans in sequence: BERT-large's
		// planning time (§2a) would go past its second.
		f, repairs, w = seg.plan, 0, seg
	}
	if priced != nil && priced.err == nil && priced.plan.Report.Time < f.Report.Time {
		// Likewise the link-priced variant.
		f, repairs, w = priced.plan, 0, priced
	}
	for _, v := range vs {
		if v.deep && v.err == nil && v.plan.Report.Time < f.Report.Time {
			w, f, repairs = v, v.plan, 0
		}
	}
	r := f.Report
	walk := "in op order"
	if w.peakFirst {
		walk = "from the peak"
	}
	if w.deep {
		// Planned for less than the budget, which the plan fits too.
		r.Budget = w.asked
		walk += fmt.Sprintf(", planned for %d bytes", w.target)
	}
	if w.segments {
		walk += fmt.Sprintf(", segment recomputation and swap-out windows of up to %d ops", longRelease)
	}
	if w.chainFit {
		walk += ", recompute chains fitted before their reader"
	}
	if f.Opts.ShortReleases {
		walk += ", copies freed after their windows' count of ops (no plan otherwise)"
	}
	if w.price > 0 {
		walk += fmt.Sprintf(", swaps ranked with %g of their transfer time", w.price)
	}
	if w.release > 0 {
		walk += fmt.Sprintf(", swap-out windows of up to %d ops", w.release)
	}
	if w.queue {
		walk += ", swap-outs priced by the link's queue"
	}
	if w.outputs {
		walk += ", updated weights swapped to the step's end"
	}
	why := fmt.Sprintf("order %s, bottlenecks %s, %d repairs (simulated steps: %s)", r.Order, walk, repairs, strings.Join(tried, ", "))
	if r.Chosen != "" {
		why += "; " + r.Chosen
	}
	r.Chosen = why
	return f, nil, splits && !done
}

// placed is where f's plan runs the update of offloaded state, or
// update where f is not a plan.
func placed(f *passes.State, update passes.UpdatePlace) passes.UpdatePlace {
	if f == nil || f.Opts == nil {
		return update
	}
	return f.Opts.Update
}

// updateName prefixes the name of a variant that places the update
// (searchAt plans both placements).
func updateName(u passes.UpdatePlace, both bool) string {
	if !both {
		return ""
	}
	return "update-" + u.String() + "/"
}

// goodEnough is the overhead over the unplanned step below which the
// search stops after its first step: none (to rounding) — a plan as
// fast as the unplanned step cannot be beaten, and any looser stop let
// baselines win by a few hundredths of a percent (bench knownBeaten).
const goodEnough = 1e-9

// interrupted reports whether err is the context's: planning was
// cancelled or ran out of time.
func interrupted(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// planIn plans a copy of snap in order o with opts, as a fork of s
// named name; noBound skips the lower bound of its error message.
func (t *tsplit) planIn(s *passes.State, snap *ir.Model, o passes.OpOrder, opts *passes.Options, name string, noBound bool) (*passes.State, error) {
	var m *ir.Model
	s.Locked(func() { m = snap.Clone() })
	f := s.Fork(m, opts, name)
	f.NoBound = noBound
	if err := f.Reorder(o); err != nil {
		return f, err
	}
	// The graph planSplitOrNot plans again without splits is this one
	// before planning: another copy of snap in order o, made only where
	// needed (copying it up front was half the search's graph copies,
	// and BERT-large's plans never split).
	before := func() (*ir.Model, error) {
		var m *ir.Model
		s.Locked(func() { m = snap.Clone() })
		if err := s.Fork(m, opts, name).Reorder(o); err != nil {
			return nil, err
		}
		return m, nil
	}
	return f, t.planSplitOrNot(f, before)
}

// Simulate-and-repair's re-plans (repair): always up to minRepairs;
// after those, one more each time the last re-plan cut the added time
// by at least repairGain of what it was, up to maxRepairs.
//
// A fixed two left plans half converged where every re-plan still pays:
// InceptionV4 b143 at 65 % of its peak on titan-rtx went 1.785 → 1.726
// → 1.713 s (kept: +4.60 %, slower than the 55 % plan's +4.47 %), and
// two more re-plans, each cutting a fifth of the added time, reach
// 1.682 s (+2.70 %). Where re-plans only shuffle the queueing, each
// gains a few percent of the added time (BERT-large's at half its peak:
// 1.2 % at the second), and stopping there keeps planning under a
// second. Three since the plans' swap-ins have their triggers placed
// (passes.PlanRounds): a repair then charges only the waits placing
// cannot hide, and the path changed; InceptionV4 b143 went from +5.74
// / +18.36 % at 35 / 30 % (two before the placing) to +6.33 / +23.13 %
// with two, +5.07 / +16.92 % with three.
const (
	minRepairs = 3
	maxRepairs = 8
	repairGain = 0.1
)

// repair is simulate-and-repair. Eq. 3 estimates a swap's ΔT from the
// link's occupancy as the round found it, but in the planned step the
// copies queue on the link behind one another and behind the copies of
// later rounds. So after a plan, the simulated timeline of the planned
// step charges each swapped tensor the compute stream's waits its
// copies caused (Timeline.Blame); where that exceeds the ΔT it was
// chosen with, the excess becomes a penalty on swapping that tensor,
// and the step is planned again from the same graph: Alg. 2 then ranks
// that swap below the recomputations and other swaps it had beaten. The
// penalties accumulate: each re-plan's own stalls are charged before the
// next, whether or not it was faster, since a re-plan that moves the
// queueing onto other swaps is the one that shows which those are
// (resnet50-small b32 at 75 % of its peak: +0.0233 % after the first
// re-plan, +0.0000 % after the second). The fastest plan is kept, the
// earliest on a tie; repair stops when no swap costs more than it was
// charged, a re-plan fails, or after minRepairs where the last re-plan
// gained less than repairGain (maxRepairs at most). Deterministic: the
// penalties are a function of the plans.
func (t *tsplit) repair(s *passes.State, snap *ir.Model, o passes.OpOrder, best *passes.State, name string) (*passes.State, int) {
	if best.Opts.NoSwap {
		return best, 0
	}
	pen := maps.Clone(best.Opts.SwapPenalty)
	if pen == nil {
		pen = map[string]float64{}
	}
	last, kept := best, 0
	gained := true // the last re-plan cut the added time by repairGain
	for n := 1; n <= maxRepairs && (n <= minRepairs || gained); n++ {
		if !chargeStalls(last, pen) {
			break
		}
		opts := *best.Opts
		opts.SwapPenalty = maps.Clone(pen)
		f, err := t.planIn(s, snap, o, &opts, fmt.Sprintf("%s/repair-%d", name, n), true)
		if err != nil {
			break
		}
		last = f
		added := best.Report.Time - best.Report.BaseTime
		gained = added > 0 && best.Report.Time-f.Report.Time >= repairGain*added
		if f.Report.Time < best.Report.Time {
			best, kept = f, n
		}
	}
	return best, kept
}

// chargeStalls adds to pen, per swapped tensor of f's plan, the
// simulated waits its copies caused beyond the ΔT it was chosen with;
// it reports whether any was added.
func chargeStalls(f *passes.State, pen map[string]float64) bool {
	g := f.Model.Graph
	mem, err := memory.Analyze(g, memory.Options{})
	if err != nil {
		return false
	}
	tl := passes.Simulate(g, mem, f.Profile())
	stall := map[string]float64{}
	for i, b := range tl.Blame {
		if b < 0 || tl.Wait[i] <= 0 {
			continue
		}
		op := mem.Order[b]
		switch ir.CopyOf(op) {
		case ir.ToDevice:
			// The swap-in reads the host copy its SwapOut made of v.
			if so := op.Input(0).Def; so != nil && ir.CopyOf(so) == ir.ToHost {
				stall[so.Input(0).Name] += tl.Wait[i]
			}
		case ir.ToHost:
			stall[op.Input(0).Name] += tl.Wait[i]
		}
	}
	charged := false
	for _, d := range f.Report.Decisions {
		if d.Option != passes.Swap.String() {
			continue
		}
		if over := stall[d.Tensor] - d.DeltaT; over > 1e-9 {
			pen[d.Tensor] += over
			charged = true
		}
	}
	return charged
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
// Report.Chosen says which. before makes a copy of s's graph as it is
// before planning (nil: planSplitOrNot copies it first).
func (t *tsplit) planSplitOrNot(s *passes.State, before func() (*ir.Model, error)) error {
	if !t.split || s.Opts.NoSwap {
		return passes.PlanRounds(s, t)
	}
	var snap *ir.Model
	if before == nil {
		snap = s.Model.Clone()
	}
	err := passes.PlanRounds(s, t)
	if err == nil && s.Report.Split == 0 {
		return nil
	}
	if before != nil {
		var berr error
		if snap, berr = before(); berr != nil {
			return berr
		}
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

// maxRelease caps a swap-out's window (Decision.Release): a longer one
// keeps the device copy across more positions, which later rounds then
// have to clear, and on graphs of many short ops (Inception) that cost
// more than the stall it hid. Measured on the CI-sized zoo's budget
// sweeps (docs/planner.md), 4 ops did best overall: Inception at 30 %
// of its peak +1.9 % (+11.7 % uncapped, +2.3 % with 1), BERT-base at
// 50 % +1.1 % (+1.6 % with 1).
const maxRelease = 4

// windowReleases are the search's window variants: the best order is
// planned again with swap-out windows of up to ops ops, in op order or
// walked from the peak. Which cap is best moves with the
// model and the budget, by a fifth to a half of the time a plan adds
// (one plan each, docs/planner.md §2a: ResNet-50 b289 at half its peak,
// alap in op order, +4.35 % at 4 ops, +3.59 % at 8, +3.24 % at 16;
// ResNet-101 b195 +4.45 % at 4, +3.52 % at 8; BERT-base b275 at 40 %,
// shrink-early +10.52 % at 4, +2.61 % at 64). Since the release counts
// run to the op the planner meant (passes.InsertSwapRecompute), a
// longer window holds its copy exactly as planned.
var windowReleases = []struct {
	ops         int
	peak, queue bool
}{{8, false, true}, {8, true, true}, {16, true, true}, {longRelease, false, true},
	{8, false, false}, {8, true, false}, {16, true, false}, {longRelease, false, false}}

// longRelease caps the swap-out window of the search's segment variant
// (searchAt). Where segments take over the recomputation, the swaps
// left are the tensors too costly to recompute, and the largest of them
// need more than maxRelease ops to leave: BERT-base at batch 275 copies
// a 412 MiB feed-forward activation in 36 ms, over about ten ops.
// Measured on that step at 20 % of its peak (as built, from the peak,
// with segments): windows of 4, 8, 16 and 64 ops give +37.8 %, +29.1 %,
// +24.4 % and +19.2 %.
const longRelease = 64

// linkPrice is the share of a swap's transfer time the search's
// link-priced variant adds to its rank (passes.Options.LinkPrice). At
// 0.1 a swap of a 412 MiB tensor ranks as if it cost 7 ms, so chains
// that rebuild such tensors from a swapped checkpoint in a few
// elementwise ops (BERT's GELU, 1.3 ms an op) go first, and the tensors
// a MatMul made are swapped. Measured on BERT-base b275 (titan-rtx) at
// 40/30/20/15 % of its peak, the search's plan with the variant at 0.05:
// +6.41/+13.87/+17.29/+27.09 % (without it: +6.41/+13.87/+17.59/
// +27.09 %), at 0.1 +4.82/+5.86/+15.97/+21.81 %, at 0.2
// +5.16/+6.65/+14.51/+23.82 %.
const linkPrice = 0.1

// linkPrices are the lower prices of the search's other link-priced
// variants, each planned in every order whose step-1 plan is within
// pricedSpread of the fastest (the depth-first order's seldom is: 2–3×
// on the ResNets). At 0.1 a swap ranks behind every clone of the
// ResNets (3–12 µs per MB; 0.1 of a swap's transfers is 17 µs per MB),
// so that variant recomputes what the links could have carried; at 0.02
// a swap ranks as 3 µs per MB, behind only the cheapest clones, which
// the walk from the peak then takes (layer1's 1×1 convolutions, 3.05 µs
// per MB) before it fills the link; 0.05 sits between. Measured on the
// full-size budget sweep (titan-rtx, tsplitc bench --budget-sweep
// --policies tsplit): with 0.02 on the best order alone, 8 of 108
// budgets faster and none slower (ResNet-50 b289 at 65 % of its peak
// +1.0675 → +1.0215 %, ResNet-101 b195 at 55 % +2.3542 → +1.9925 %); with
// 0.02 and 0.05 on every order, 11 more faster and none slower
// (ResNet-50 at 40 % +5.2055 → +4.1397 %, ResNet-101 at 50 % +3.1468 →
// +2.6119 %, InceptionV4 b143 at 25 % +27.53 → +18.37 %), each won by
// one of the two prices in the shrink-early, alap or as-built order.
// Single prices tried on the best order: 0.01 and 0.04–0.06 gave none
// of the first gains, 0.025–0.03 the first two only.
var linkPrices = []float64{0.02, 0.05}

// swapsAndClones says whether f's plan swaps some tensor and recomputes
// another (the plans the link prices can change).
func swapsAndClones(f *passes.State) bool {
	var swap, clone bool
	for _, d := range f.Report.Decisions {
		swap = swap || d.Option == passes.Swap.String()
		clone = clone || d.Option == passes.Recompute.String() && d.DeltaT > 0
	}
	return swap && clone
}

// pricedSpread: the orders linkPrices are tried in.
const pricedSpread = 0.10

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
	// clonable caches chainClonable by ValueID (0: not asked yet, 1:
	// yes, -1: no).
	clonable []int8
	// chain is recomputeCandidate's scratch chain (buildChain).
	chain recomputeChain
	// segs are the runs of forward ops segment candidates recompute
	// (units); segAt and backAt, by ValueID, where a value this round
	// evicted by a segment, or by a swap or chain, is back on the device
	// (-1: none).
	segs          *segUnits
	segAt, backAt []int32
	// swappedNow marks, by ValueID, the values this round swaps (their
	// backAt is the swap-in's trigger).
	swappedNow []bool
	// byStart, active, next and activeAt keep the active set of liveAt.
	byStart  []int
	active   []int
	next     int
	activeAt int
	// splitDone marks ops already split in this round.
	splitDone map[ir.OpID]bool
	// cands is candidates' result, reused from one bottleneck to the
	// next: a fresh slice per bottleneck was a fifth of the bytes a
	// search allocates (BERT-large).
	cands []candidate

	// PeakFirst walks the bottlenecks from the peak down (walk).
	PeakFirst bool
	// Segments offers segment candidates (segments.go).
	Segments bool
	// MaxRelease caps a swap-out's window (0 or 1: the next op only).
	MaxRelease int
	// chainFit: a chain fits if it fits before its reader allocates
	// (passes.Options.ChainFit, madeAt).
	chainFit bool
	// LinkPrice is passes.Options.LinkPrice: swaps ranked with this
	// share of their transfer time added, chains reading this round's
	// swap-ins.
	LinkPrice float64
	// penalty is simulate-and-repair's extra ΔT per swapped tensor.
	penalty map[string]float64

	// mayDefer: a round may end before a costly choice where a chain
	// its own decisions ruled out would be cheaper (deferRatio, the
	// best such chain's ΔT/ΔM at the bottleneck being decided).
	// buildChain sets blocked when it refuses a chain for a decision of
	// this round; ignoreDecided makes it build the chain as if that
	// decision were not made (blockedChain).
	mayDefer, blocked, ignoreDecided bool
	deferRatio                       float64

	// out is the device-to-host link's queue of copies (linkqueue.go),
	// which prices swap-outs where queue is set (passes.Options.LinkQueue;
	// nil otherwise); outOcc and inOcc are the links' occupancy (Eq. 3's
	// Oc_u).
	out    *linkQueue
	queue  bool
	outOcc []float64
	inOcc  []float64
	opTime []float64
	n      int
	// output marks the graph's outputs, by value ID; outputSwaps lets
	// them be swapped to the step's end (passes.Options.OutputSwaps).
	output      []bool
	outputSwaps bool
}

// newPlanner prepares Alg. 2 on g's current order.
func newPlanner(g *ir.Graph, mem *memory.Model, tl *passes.Timeline, p *profile.Profile, budget int64) *planner {
	n := len(mem.Order)
	pl := &planner{G: g, Mem: mem, TL: tl, Prof: p, Budget: budget, n: n,
		pos: g.Position(), uses: make([][]int, g.NumValueIDs()), saved: make([]int64, n),
		decided: make([]bool, g.NumValueIDs()), clonable: make([]int8, g.NumValueIDs()), splitDone: map[ir.OpID]bool{},
		outOcc: append([]float64(nil), tl.OutOcc...), inOcc: append([]float64(nil), tl.InOcc...), opTime: make([]float64, n)}
	pl.Allowed = [3]bool{true, true, true}
	pl.activeAt = -1
	pl.segAt, pl.backAt = make([]int32, g.NumValueIDs()), make([]int32, g.NumValueIDs())
	pl.swappedNow = make([]bool, g.NumValueIDs())
	pl.output = make([]bool, g.NumValueIDs())
	for _, v := range g.Outputs {
		pl.output[v.ID] = true
	}
	for k := range pl.segAt {
		pl.segAt[k], pl.backAt[k] = -1, -1
	}
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
	// At most the largest of splitPNums parts: on the stack.
	var buf [64][2]int64
	parts := passes.AppendParts(buf[:0], dm.Extent, p)
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
	// seg is a segment candidate's segment (d then summarises it).
	seg *segment
}

// Run walks the order and, at each position where M_i − ΔM(S)_i exceeds
// the budget, applies the candidate with the smallest ΔT/ΔM until it
// fits (Alg. 2 without split, which package passes adds separately).
func (pl *planner) Run() (*passes.Plan, error) {
	plan := &passes.Plan{Budget: pl.Budget}
	for _, i := range pl.walk() {
		for pl.Mem.Live[i]-pl.saved[i] > pl.Budget {
			pl.deferRatio = math.Inf(1)
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
			if c.d.DeltaT > 0 && pl.deferRatio*deferFactor < c.ratio && len(plan.Decisions)+len(plan.Splits) > 0 {
				// A chain this round's decisions ruled out would free
				// these bytes for less: end the round, and let the
				// next one, on the rewritten graph, see it.
				plan.Partial = true
				return plan, nil
			}
			if c.seg != nil {
				plan.Decisions = pl.commitSegment(c.seg, i, plan.Decisions)
				continue
			}
			d := c.d
			plan.Decisions = append(plan.Decisions, &d)
			pl.decided[d.Value.ID] = true
			pl.backAt[d.Value.ID] = int32(d.Before)
			if d.Option == passes.Swap {
				pl.backAt[d.Value.ID] = int32(d.Trigger)
				pl.swappedNow[d.Value.ID] = true
			}
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
				if pl.queue {
					pl.out.add(pl.out.at(d.After+1), linkCopy{issue: d.After + 1, ready: pl.issueAt(d.Value, d.After),
						dur: pl.Prof.TransferTime(d.Value.Bytes(), true), due: pl.TL.End[min(d.After+d.Release, pl.n-1)]})
				}
				pl.occupy(pl.inOcc, d.Trigger, d.Before, pl.Prof.TransferTime(d.Value.Bytes(), false))
			}
		}
	}
	return plan, nil
}

// walk is the order in which Run visits the positions: the order of
// the ops (Alg. 2), or, peak first, the positions over the budget from
// the largest M_i down. Walking in op order, the first bottleneck sees
// only the tensors made before it, and the swaps it picks have short
// windows; walking from the peak, the first choices see every tensor
// live there, with the longest gaps, and their savings also cover the
// lower bottlenecks around it.
func (pl *planner) walk() []int {
	out := make([]int, 0, pl.n)
	for i := 0; i < pl.n; i++ {
		if !pl.PeakFirst || pl.Mem.Live[i] > pl.Budget {
			out = append(out, i)
		}
	}
	if pl.PeakFirst {
		sort.SliceStable(out, func(a, b int) bool { return pl.Mem.Live[out[a]] > pl.Mem.Live[out[b]] })
	}
	return out
}

// evictable is what could still be freed at i (for the error message).
func (pl *planner) evictable(i int) int64 {
	var b int64
	for _, c := range pl.candidates(i) {
		if c.seg == nil { // a segment's tensors are candidates of their own too
			b += c.d.DeltaM
		}
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
// The slice is pl.cands: valid until the next call.
func (pl *planner) candidates(i int) []candidate {
	out := pl.cands[:0]
	op := pl.Mem.Order[i]
	var tried []int32 // the units whose segment candidate was made
	for _, idx := range pl.liveAt(i) {
		iv := &pl.Mem.Intervals[idx]
		v := iv.Value
		// A graph output (an updated weight, made early in the backward
		// pass and read by nothing after) may be swapped over the rest of
		// the step: its swap-in ends by the step's end (q = n).
		toEnd := iv.End >= pl.n
		if !iv.Evictable() || iv.Start >= i || iv.End <= i || pl.decided[v.ID] || toEnd && !(pl.outputSwaps && pl.output[v.ID] && pl.Allowed[passes.Swap]) {
			continue
		}
		if pl.Allowed[passes.Recompute] && pl.Segments && v.Def != nil && !toEnd {
			if u := pl.units().of[v.Def.ID]; u >= 0 && !slices.Contains(tried, u) {
				tried = append(tried, u)
				if sg, ok := pl.segmentCandidate(int(u), i); ok {
					after := sg.evict[0].after
					for _, e := range sg.evict {
						after = min(after, e.after)
					}
					d := passes.Decision{Value: sg.evict[len(sg.evict)-1].v, Option: passes.Recompute, After: after, Before: sg.at, At: i, DeltaM: sg.dm, DeltaT: sg.time}
					out = append(out, candidate{d: d, ratio: (sg.time + 1e-12) / float64(sg.dm), seg: sg})
				}
			}
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
		if q < 0 && toEnd {
			q = pl.n
		}
		if q < 0 {
			continue
		}
		if pl.Allowed[passes.Swap] {
			if c, ok := pl.swapCandidate(v, iv.Bytes, a, q, i); ok {
				out = append(out, c)
			}
		}
		if pl.Allowed[passes.Recompute] && q < pl.n {
			if c, ok := pl.recomputeCandidate(v, iv.Bytes, a, q, i); ok {
				out = append(out, c)
			}
		}
	}
	pl.cands = out
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
	if i < pl.activeAt {
		// A walk that is not in op order: start the active set again.
		pl.active, pl.next = pl.active[:0], 0
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
	// The device copy stays live through op a+1 at least (decoupled
	// swap-out), so the saving starts at a+2 and must cover i.
	if a+2 > i {
		return candidate{}, false
	}
	out := pl.Prof.TransferTime(v.Bytes(), true)
	in := pl.Prof.TransferTime(v.Bytes(), false)
	// The runtime frees the device copy after the release-th op that
	// follows the SwapOut, first waiting for the copy (the memory model
	// and the simulator count the same): the window is the fewest ops
	// from a+1 on that hide the transfer, ending before i so that the
	// saving covers it. Eq. 3 hides the copy in the link time the copies
	// planned before it left free in the window; with the queue
	// (linkQueue) the copy ends after the copies issued before it, and
	// what it makes those issued after it wait at their frees is
	// charged to it too.
	release := 0
	var fwd float64
	if pl.queue {
		k := pl.out.at(a + 1)
		fin := pl.out.finish(k, pl.issueAt(v, a), out)
		for u := a + 1; u < i; u++ {
			release++
			if pl.TL.End[u] >= fin || release >= max(pl.MaxRelease, 1) {
				break
			}
		}
		fwd = max(fin-pl.TL.End[a+release], 0) + pl.out.delay(k, fin)
	} else {
		hide := 0.0
		for u := a + 1; u < i; u++ {
			hide += (1 - pl.outOcc[u]) * pl.opTime[u]
			release++
			if hide >= out || release >= max(pl.MaxRelease, 1) {
				break
			}
		}
		fwd = max(out-hide, 0)
	}
	// Trigger: walk back from q until the swap-in is hidden, but keep the
	// restored copy from raising the memory above the budget, and after i.
	p := q
	hide := 0.0
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
	d := passes.Decision{Value: v, Option: passes.Swap, After: a, Before: q, Trigger: p, Release: release, At: i, DeltaM: size,
		DeltaT: fwd + bwd + pl.penalty[v.Name]}
	// With a link price, a swap is ranked as if its transfers cost a
	// share of their time: a swap Eq. 3 charges nothing still takes link
	// time a later, costlier tensor needed. Where the link can move
	// only part of what the budget evicts, the free swaps otherwise go
	// first, largest first, and took the tensors cheapest to recompute
	// (BERT-base b275 at 30 % of its peak: the GELU outputs, 1.3 ms per
	// 412 MiB), leaving their MatMul inputs (16 ms) to be recomputed.
	rank := d.DeltaT + pl.LinkPrice*(out+in)
	return candidate{d: d, ratio: (rank + 1e-12) / float64(size), from: [2]int{a + release + 1, p - 1}}, true
}

// issueAt is when a copy of v issued after op a can start: once v is
// made and op a is done. The host issues ahead of the compute stream,
// but it waits for every task that touched a tensor it frees (a
// convolution's workspace after each convolution), so a copy issued
// right after op a seldom starts before it ends (ResNet-50 b289: the
// input's copy, issued after the first convolution, starts when that
// ends).
func (pl *planner) issueAt(v *ir.Value, a int) float64 {
	t := 0.0
	if v.Def != nil {
		t = pl.TL.End[pl.pos[v.Def.ID]]
	}
	if a >= 0 {
		t = max(t, pl.TL.End[a])
	}
	return t
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
	ch := &pl.chain
	pl.blocked = false
	if !pl.buildChain(ch, v, q) {
		if pl.blocked && pl.mayDefer {
			pl.blockedChain(ch, v, size, a, q, i)
		}
		return candidate{}, false
	}
	dm, ok := pl.chainSaving(ch, size, a, q, i)
	if !ok {
		return candidate{}, false
	}
	d := passes.Decision{Value: v, Option: passes.Recompute, After: a, Before: q, At: i, DeltaM: size, DeltaT: ch.time}
	return candidate{d: d, ratio: (ch.time + 1e-12) / float64(dm), from: [2]int{a + 1, q - 1}}, true
}

// A round ends early, in its first deferRounds rounds, where a chain
// its own decisions ruled out frees the bytes of the bottleneck for at
// most 1/deferFactor of the best candidate's ΔT per byte
// (planner.mayDefer). Only such an order of magnitude: the next round's
// greedy path differs from this one's everywhere after that
// bottleneck, and at any ratio (factor 1) it was as often slower as
// faster (tsplit's budget sweep from 173566e: 15 budgets faster, 11
// slower — BERT-base b275 at 50 % of its peak +0.83 → +1.25 %,
// ResNet-101 b195 at 15 % +41.8 → +61.0 %); at 16 the slower ones
// plan as before, and VGG-16 b320 at 60 % still goes from +20.14 % to
// +0.59 %.
const (
	deferRounds = 3
	deferFactor = 16
)

// blockedChain prices the chain that recomputes v for q as if this
// round had not decided the values that ruled it out, and keeps the
// best ratio in deferRatio. Such a chain is not a candidate: the round
// has evicted what it reads (a graph input swapped at an earlier
// bottleneck, which the rewrite restores only for its own use). The
// next round, on the rewritten graph, can read it again.
func (pl *planner) blockedChain(ch *recomputeChain, v *ir.Value, size int64, a, q, i int) {
	pl.ignoreDecided = true
	ok := pl.buildChain(ch, v, q)
	pl.ignoreDecided = false
	if !ok {
		return
	}
	if dm, ok := pl.chainSaving(ch, size, a, q, i); ok {
		pl.deferRatio = min(pl.deferRatio, (ch.time+1e-12)/float64(dm))
	}
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
	// A split whose pieces merge into the host copy of its output (a
	// weight gradient the host update reads) takes a merge in place
	// where one frees device memory: a strided merge holds the pieces
	// and the whole tensor on the host at once (VGG-16's first
	// classifier gradient at width 14: twice 75 GiB, more than the
	// host's memory).
	var best, strided *splitCandidate
	for _, ch := range pl.SplitChoices(op) {
		bestOf := &best
		if !passes.HostMergeInPlace(pl.G, op, &ch) {
			bestOf = &strided
		}
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
			// The split's copies to the host queue behind the swap-outs
			// issued before the op and delay those after it, as a
			// swap's do (linkQueue): priced the same way, so that the
			// queue does not tip Step 3 towards splits.
			dt := max(overhead, 0) + xfer
			if pl.queue {
				dt += pl.out.backlog(i, pl.TL.Start[i], pl.Prof.TransferTime(c.d2h, true))
			}
			sc := &splitCandidate{d: passes.SplitDecision{Op: op, PNum: p, Map: ch, At: i, DeltaM: dm, DeltaT: dt},
				ratio: (dt + 1e-12) / float64(dm), from: [2]int{from, i}}
			if *bestOf == nil || sc.ratio < (*bestOf).ratio {
				*bestOf = sc
			}
			break
		}
	}
	if best == nil {
		return strided
	}
	return best
}
