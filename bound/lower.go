package bound

import (
	"fmt"
	"math"
	"os"
	"sort"
	"time"

	"github.com/tsplit/tsplit/ir"
	"github.com/tsplit/tsplit/memory"
	"github.com/tsplit/tsplit/passes"
	"github.com/tsplit/tsplit/profile"
)

// Result is a lower bound on the step time any swap + recompute plan of
// a graph's order adds at a budget.
type Result struct {
	// Added is the bound in seconds: no plan of the class adds less to
	// the base step. +Inf when no plan of the class fits (Infeasible).
	Added float64 `json:"added_s"`
	// BaseStep is the unplanned step's simulated time; BaseStep + Added
	// bounds the planned step time.
	BaseStep float64 `json:"base_step_s"`
	// Infeasible: at some position the tensors that could be evicted
	// there do not cover what is over the budget; no plan of the class
	// fits (Where names the op).
	Infeasible bool   `json:"infeasible,omitempty"`
	Where      string `json:"where,omitempty"`
	// LP is the optimum of the aggregated LP; Added is the larger of it
	// and the Lagrangian bound of the unaggregated model (lagrange.go).
	LP float64 `json:"lp_s"`
	// Recompute and Stall split LP at its optimum: clone time and link
	// time no compute hides.
	Recompute float64 `json:"recompute_s"`
	Stall     float64 `json:"stall_s"`
	// Size of the LP solved: over-budget positions of the graph, memory
	// rows written, rows and columns in all, cutting-plane rounds.
	Positions int `json:"over_budget_positions"`
	MemRows   int `json:"memory_rows"`
	Rows      int `json:"rows"`
	Cols      int `json:"cols"`
	Rounds    int `json:"rounds"`
	// Solve is the time the bound took.
	Solve time.Duration `json:"solve_ns"`
}

// Step is the bound on the planned step time, BaseStep + Added.
func (r *Result) Step() float64 { return r.BaseStep + r.Added }

// Gap is (added − bound) / bound for a plan that adds added seconds: how
// far the plan is from the bound, relative to the bound (+Inf when the
// bound is 0 and the plan adds time; 0 when both are 0).
func (r *Result) Gap(added float64) float64 {
	if r.Added <= 0 {
		if added <= 0 {
			return 0
		}
		return math.Inf(1)
	}
	return (added - r.Added) / r.Added
}

// Options tune the LP's size; the zero value is the default.
type Options struct {
	// MemRows caps the memory rows (default 20).
	MemRows int
	// Classes caps the classes that need a bound row (default 40).
	Classes int
	// LinkRows caps the link rows added by separation (default 24).
	LinkRows int
	// StartBlocks and EndBlocks are how many blocks of rows a swap's
	// first and last rows off are told apart by (defaults: one block
	// per row, and 5; doc.go).
	StartBlocks, EndBlocks int
}

func (o Options) withDefaults() Options {
	if o.MemRows <= 0 {
		o.MemRows = 20
	}
	if o.Classes <= 0 {
		o.Classes = 40
	}
	if o.LinkRows <= 0 {
		o.LinkRows = 24
	}
	if o.EndBlocks <= 0 {
		o.EndBlocks = 5
	}
	return o
}

// blocks is the count of start blocks over rows memory rows.
func (o Options) blocks(rows int) int {
	if o.StartBlocks <= 0 {
		return rows
	}
	return min(o.StartBlocks, rows)
}

// Lower computes the LP bound for g in its current order at budget: mem
// and tl are its memory model and simulated timeline (memory.Analyze,
// passes.Simulate), prof the device.
func Lower(g *ir.Graph, mem *memory.Model, tl *passes.Timeline, prof *profile.Profile, budget int64) (*Result, error) {
	return LowerWith(g, mem, tl, prof, budget, Options{})
}

// LowerWith is Lower with explicit LP sizes.
func LowerWith(g *ir.Graph, mem *memory.Model, tl *passes.Timeline, prof *profile.Profile, budget int64, opts Options) (*Result, error) {
	t0 := time.Now()
	m, err := build(g, mem, tl, prof, budget)
	if err != nil {
		return nil, err
	}
	res := &Result{BaseStep: m.start[m.n], Positions: len(m.over)}
	defer func() { res.Solve = time.Since(t0) }()
	if len(m.over) == 0 {
		return res, nil
	}
	if at := m.uncoverable(); at >= 0 {
		res.Added, res.Infeasible, res.Where = math.Inf(1), true, g.Order()[at].Describe()
		return res, nil
	}
	opts = opts.withDefaults()
	rows := m.pickRows(opts.MemRows)
	classes := m.lpClasses(rows, opts.Classes)
	f := newFormulation(m, rows, opts.blocks(len(rows)), opts.EndBlocks, classes)
	f.boundRows(false)
	res.MemRows = len(rows)
	if err := f.separate(opts.LinkRows, res); err != nil {
		return nil, err
	}
	res.LP = res.Added
	if f.duals != nil {
		// The same rows with every gap on its own: its Lagrangian at the
		// LP's duals.
		full := newOptions(m, rows, opts.blocks(len(rows)), opts.EndBlocks, m.gapClasses(rows))
		g := newLagrangian(full)
		if l := g.along(g.fromDuals(f.p, f.duals)) * full.timeUnit; l > res.Added {
			res.Added = l
		}
	}
	return res, nil
}

// separate solves the LP, adding the most violated link rows each
// round until none is violated or the cap is reached. Every round's
// optimum is a bound; the last is the largest.
func (f *formulation) separate(maxLinks int, res *Result) error {
	cands := f.linkCandidates()
	added := make([]bool, len(cands))
	links := 0
	for round := 0; ; round++ {
		if os.Getenv("BOUND_DEBUG") != "" {
			fmt.Fprintf(os.Stderr, "round %d rows %d cols %d\n", round, len(f.p.rows), len(f.p.cost))
		}
		opt, x, y, err := solveSimplexDuals(f.p)
		if err != nil {
			return err
		}
		f.duals = y
		res.Added = opt * f.timeUnit
		res.Recompute = 0
		for _, o := range f.options {
			res.Recompute += o.cost * x[o.col]
		}
		res.Stall = math.Max(0, res.Added-res.Recompute)
		res.Rows, res.Cols, res.Rounds = len(f.p.rows), len(f.p.cost), round+1
		if links >= maxLinks {
			return nil
		}
		type viol struct {
			k int
			v float64
		}
		var vs []viol
		for k, l := range cands {
			if added[k] {
				continue
			}
			rw := f.link(l)
			if len(rw.cols) == 0 {
				added[k] = true
				continue
			}
			if v := violation(rw, x); v > 1e-9 {
				vs = append(vs, viol{k, v})
			}
		}
		if len(vs) == 0 {
			return nil
		}
		sort.Slice(vs, func(i, j int) bool {
			if vs[i].v != vs[j].v {
				return vs[i].v > vs[j].v
			}
			return vs[i].k < vs[j].k
		})
		// A few rows per round: the most violated device-to-host and
		// host-to-device windows first.
		per := max(2, maxLinks/6)
		for _, v := range vs {
			if per == 0 || links >= maxLinks {
				break
			}
			added[v.k] = true
			f.p.add(f.link(cands[v.k]))
			links++
			per--
		}
	}
}

// uncoverable returns an over-budget position where evicting every
// candidate still leaves the deficit (-1: none).
func (m *model) uncoverable() int {
	diff := make([]int64, m.n+1)
	for _, gp := range m.gaps {
		diff[gp.from+1] += gp.bytes
		diff[gp.to] -= gp.bytes
	}
	var run int64
	for i := 0; i < m.n; i++ {
		run += diff[i]
		if m.deficit[i] > 0 && m.dur[i] > 0 && run < m.deficit[i] {
			return i
		}
	}
	return -1
}

// pickRows chooses at most k memory rows among the over-budget
// positions: the over-budget positions are cut into k runs of equal
// length, and each run gives its position of largest deficit. Any set
// of rows gives a bound; these follow the deficit's shape.
func (m *model) pickRows(k int) []int {
	if len(m.over) <= k {
		return append([]int(nil), m.over...)
	}
	var rows []int
	for b := 0; b < k; b++ {
		lo, hi := b*len(m.over)/k, (b+1)*len(m.over)/k
		best := m.over[lo]
		for _, p := range m.over[lo:hi] {
			if m.deficit[p] > m.deficit[best] {
				best = p
			}
		}
		rows = append(rows, best)
	}
	return rows
}

// rowSpan is the rows strictly inside a gap: indices lo..hi of rows
// (lo > hi: none).
func rowSpan(rows []int, from, to int) (int, int) {
	lo := sort.SearchInts(rows, from+1)
	hi := sort.SearchInts(rows, to) - 1
	return lo, hi
}

// lpClasses groups the gaps into fluid classes: gaps over the same rows,
// with the same flags, next uses in the same stretch and recompute costs
// per byte within a factor of two share a class; then classes that still
// need a bound row are merged, nearest first, until at most k do.
func (m *model) lpClasses(rows []int, k int) []class {
	type key struct {
		lo, hi int
		first  bool
		bucket int // log2 of the cheapest recompute per byte; MinInt: none
		chain  bool
		to     int
	}
	// Next uses are rounded up to the next row, or past the last row to
	// one of four stretches of what remains of the step.
	last := rows[len(rows)-1]
	toGrid := func(to int) int {
		i := sort.SearchInts(rows, to)
		if i < len(rows) {
			return rows[i]
		}
		q := (m.n - last) / 4
		if q <= 0 {
			return m.n
		}
		return min(m.n, last+((to-last+q-1)/q)*q)
	}
	idx := map[key]int{}
	var cls []fluid
	for gi, gp := range m.gaps {
		lo, hi := rowSpan(rows, gp.from, gp.to)
		if lo > hi {
			continue
		}
		fl := newFluid(gp, gi, lo, hi)
		kk := key{lo: lo, hi: hi, first: gp.first, bucket: math.MinInt, chain: len(gp.recompute) > 1, to: toGrid(gp.to)}
		if c := fl.perByte(); !math.IsInf(c, 1) {
			kk.bucket = int(math.Floor(math.Log2(math.Max(c*1e12, 1e-6))))
		}
		c, ok := idx[kk]
		if !ok {
			idx[kk] = len(cls)
			cls = append(cls, fl)
			continue
		}
		cls[c].merge(fl)
	}
	cls = mergeFluids(m, rows, cls, k)
	out := make([]class, len(cls))
	for i, f := range cls {
		out[i] = f.class()
	}
	return out
}

// fluid is an LP class while it is built, per byte of it. Its
// recomputation keeps three variants (chainVariants): the cheapest that
// restores an input by a clone (clone), the cheapest and the least
// moving that swaps it in (swap), and the one that frees the most while
// keeping it (keep). Every variant of every member frees no more, costs
// no less and moves no less than the slot it falls in; a member without
// a chain fills all three with its one variant.
type fluid struct {
	c                  class
	xfer               float64 // per byte
	cloneCost          float64
	swapCost, swapXfer float64
	keepSave, keepCost float64
}

func newFluid(gp gap, gi, lo, hi int) fluid {
	b := float64(gp.bytes)
	inf := math.Inf(1)
	f := fluid{c: class{lo: lo, hi: hi, bytes: b, first: gp.first, def: gp.def, to: gp.to, gaps: []int{gi}},
		xfer: float64(gp.xfer) / b, cloneCost: inf, swapCost: inf, swapXfer: inf, keepCost: inf}
	for _, vr := range gp.recompute {
		switch {
		case vr.xfer > 0:
			f.swapCost = math.Min(f.swapCost, vr.cost/b)
			f.swapXfer = math.Min(f.swapXfer, vr.xfer/b)
		case vr.save < b:
			f.keepSave = math.Max(f.keepSave, vr.save/b)
			f.keepCost = math.Min(f.keepCost, vr.cost/b)
		default: // frees it all, moves nothing: a clone chain, or no chain
			f.cloneCost = math.Min(f.cloneCost, vr.cost/b)
			if len(gp.recompute) == 1 {
				f.swapCost, f.swapXfer = f.cloneCost, 0
				f.keepSave, f.keepCost = 1, f.cloneCost
			}
		}
	}
	return f
}

// merge folds d into f: the union of rows and windows, the least cost
// and transfer per byte, the most freed. Swap-outs count on the
// device-to-host link only when both did.
func (f *fluid) merge(d fluid) {
	f.c.bytes += d.c.bytes
	f.c.lo, f.c.hi = min(f.c.lo, d.c.lo), max(f.c.hi, d.c.hi)
	f.c.def, f.c.to = min(f.c.def, d.c.def), max(f.c.to, d.c.to)
	f.c.first = f.c.first && d.c.first
	f.c.gaps = append(f.c.gaps, d.c.gaps...)
	f.xfer = math.Min(f.xfer, d.xfer)
	f.cloneCost = math.Min(f.cloneCost, d.cloneCost)
	f.swapCost = math.Min(f.swapCost, d.swapCost)
	f.swapXfer = math.Min(f.swapXfer, d.swapXfer)
	f.keepSave = math.Max(f.keepSave, d.keepSave)
	f.keepCost = math.Min(f.keepCost, d.keepCost)
}

// class is the fluid as the formulation takes it (totals, not per
// byte), without variants another one dominates.
func (f *fluid) class() class {
	c := f.c
	b := c.bytes
	c.xfer = f.xfer * b
	c.recompute = nil
	clone := !math.IsInf(f.cloneCost, 1)
	if clone {
		c.recompute = append(c.recompute, variant{save: b, cost: f.cloneCost * b})
	}
	if !math.IsInf(f.swapCost, 1) && (!clone || f.swapCost < f.cloneCost) {
		c.recompute = append(c.recompute, variant{save: b, cost: f.swapCost * b, xfer: f.swapXfer * b})
	}
	if f.keepSave > 0 && !math.IsInf(f.keepCost, 1) && (!clone || f.keepCost < f.cloneCost) {
		c.recompute = append(c.recompute, variant{save: f.keepSave * b, cost: f.keepCost * b})
	}
	return c
}

// perByte is the cheapest recomputation per byte (+Inf: none).
func (f *fluid) perByte() float64 { return math.Min(f.cloneCost, math.Min(f.swapCost, f.keepCost)) }

// mergeFluids merges classes that need a bound row (their bytes do not
// cover their rows' deficit) until at most k remain, each time the pair
// nearest in rows, next use and cost.
func mergeFluids(m *model, rows []int, cls []fluid, k int) []fluid {
	need := func(c *class) bool {
		var d int64
		for r := c.lo; r <= c.hi; r++ {
			d = max(d, m.deficit[rows[r]])
		}
		return c.bytes < float64(d)
	}
	// lg is log2 of each class's cheapest recompute per byte (NaN: not
	// recomputable), kept beside cls to spare the pair scan the logs.
	lg := make([]float64, len(cls))
	setLog := func(i int) {
		lg[i] = math.NaN()
		if p := cls[i].perByte(); !math.IsInf(p, 1) {
			lg[i] = math.Log2(p + 1e-18)
		}
	}
	for i := range cls {
		setLog(i)
	}
	for {
		var small []int
		for i := range cls {
			if need(&cls[i].c) {
				small = append(small, i)
			}
		}
		if len(small) <= k {
			return cls
		}
		best, bi, bj := math.Inf(1), small[0], small[1]
		for x := 0; x < len(small); x++ {
			c := &cls[small[x]]
			for y := x + 1; y < len(small); y++ {
				d := &cls[small[y]]
				dist := float64(abs(c.c.lo-d.c.lo)+abs(c.c.hi-d.c.hi)) + math.Abs(float64(c.c.to-d.c.to))/float64(m.n)
				if c.c.first != d.c.first {
					dist += 0.5
				}
				lc, ld := lg[small[x]], lg[small[y]]
				switch {
				case math.IsNaN(lc) != math.IsNaN(ld):
					dist += 8 // recomputable with not: the merged class may recompute all
				case !math.IsNaN(lc):
					dist += math.Abs(lc - ld)
				}
				if dist < best {
					best, bi, bj = dist, small[x], small[y]
				}
			}
		}
		cls[bi].merge(cls[bj])
		cls = append(cls[:bj], cls[bj+1:]...)
		lg = append(lg[:bj], lg[bj+1:]...)
		setLog(bi)
	}
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}
