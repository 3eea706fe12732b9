package policy

import (
	"fmt"
	"slices"
	"sort"

	"github.com/tsplit/tsplit/compiler"
	"github.com/tsplit/tsplit/internal/units"
	"github.com/tsplit/tsplit/ir"
	"github.com/tsplit/tsplit/memory"
	"github.com/tsplit/tsplit/passes"
	"github.com/tsplit/tsplit/profile"
)

// moDNN (Chen et al., DATE'18, §IV):
//
//   - Sub-batch size selection (Eq. 1–3): M_min(t, b) is what task t
//     needs at sub-batch b — its inputs, output and workspace, weights
//     excluded (Eq. 1), with the workspace of its fastest convolution
//     algorithm; Eq. 2's lower bound is S_W + max_t M_min(t, 1) with the
//     baseline algorithm; the sub-batch is Eq. 3 iterated to its fixed
//     point, then the largest b ≤ batch whose every task fits
//     (modnnSubBatch). Which bytes of a tensor grow with b is exact when
//     the step is also built at the batch + 1 (as the sub-batching
//     layer does, subbatch.go): bytes(B) = F + P·B per tensor.
//     Without it a tensor scales when its leading dimension is the batch,
//     which counts as fixed the tensors that fold the batch into another
//     dimension (a weight gradient's transposed operands, a pooling
//     gradient per (n, c) plane) and makes Eq. 2 grow with the batch.
//   - Offloading and prefetching (Alg. 1): the tasks are simulated in
//     order. Where a task's memory does not fit (M_i minus what earlier
//     offloads saved, plus its chosen algorithm's workspace), data not
//     read by the task, used since its generation and not just
//     prefetched is offloaded, lowest delay first (Fig. 3: the part of
//     the swap-out the compute before the task does not hide; the D2H
//     link is serial), then farthest next use. Its prefetch starts before
//     the first task t with T + T_alg(t) + Σ T_trans(d) > EST(s) (Eq. 4;
//     the sum is over the data task s waits for), and not while the
//     prefetched data would put a task over the budget (Alg. 1 lines
//     16–17: the prefetch waits).
//   - Convolution algorithms (Eq. 5): for every Conv task, each
//     algorithm of the profile's ConvAlgos (relative time, workspace per
//     input byte) gains T_base − T_alg − T_off − T_pre, where T_off is the
//     delay of the offloads its workspace needs and T_pre the delay of
//     the nearest task's prefetches its workspace pushes after the task;
//     the largest gain wins (implicit GEMM, no workspace, gains 0).
//   - Sub-batching (§IV-A: "the gradients are accumulated from all the
//     sub-batches"): when Eq. 3's b is below the batch B, moDNN trains
//     the step as sub-batches of b samples, the last one smaller when b
//     does not divide B (B = 10, b = 4: 4, 4, 2; the loss and gradients
//     weigh each sub-batch by its size, so nothing else changes). That
//     is a different training graph, so it is built before planning:
//     the sub-batching layer above the policies (SubBatchedStep,
//     PlanSubBatched in subbatch.go) computes Eq. 1–3 on the plain step
//     and, where b < B, rebuilds it with compiler.AccumulateSubBatches
//     (k replicas of the step at b, gradients accumulated, one optimizer
//     update), which this policy then plans with Alg. 1 like any step.
//     The accumulated step records its sub-batches (compiler.SubBatchKey)
//     and ModnnResult (the plan's Detail) reports them. PlanSubBatched,
//     which tsplitc and tsplitc bench use for modnn (Policy.SubBatches),
//     plans that step and, where Alg. 1 here cannot realize Eq. 3's b,
//     halves b until the plan fits.
//     A plain step handed to the policy whose Eq. 3 needs sub-batches is
//     planned whole, and its error names the sub-batch.
//     BatchNormalization then normalizes with each sub-batch's statistics
//     (moDNN's semantics; docs/training.md), so for BN models the step is
//     not the one the other policies plan.
//
// What is missing: the unrolled step grows with k (k copies of the
// sub-batch step's ops) where moDNN's runtime loops, so callers bound k
// (tsplitc bench does); Alg. 1 cannot offload what the previous task
// read or what was not used since it was made, so Eq. 3's guarantee
// that any budget above Eq. 2 schedules does not hold here
// (PlanSubBatched's halving stands in for it). The chosen algorithms are reported and
// their workspace is reserved in the plan (so a GPU runtime could use
// them), but neither the memory model, the simulator nor the CPU
// runtime knows per-op algorithms, so the predicted step time does not
// include their speed-up. Defragmentation does not apply: the static
// layout is computed after planning.

// modnnTask is one task of Eq. 1, its memory split by how it scales with
// the sub-batch b.
type modnnTask struct {
	Name string
	// PerSample is the bytes of its inputs and output per sample (they
	// scale with b); Fixed the bytes that do not (weight gradients,
	// statistics). Weights are excluded.
	PerSample, Fixed int64
	// WSPerSample and WSFixed are the workspace of its fastest algorithm.
	WSPerSample, WSFixed int64
	// BaseWSFixed is the workspace of the baseline algorithm (Eq. 2).
	BaseWSFixed int64
}

// Mmin is Eq. 1 at sub-batch b with the fastest algorithm.
func (t modnnTask) Mmin(b int64) int64 {
	return b*(t.PerSample+t.WSPerSample) + t.Fixed + t.WSFixed
}

// modnnLowerBound is Eq. 2: weights plus the largest task at sub-batch
// 1 with the baseline algorithm.
func modnnLowerBound(weights int64, tasks []modnnTask) int64 {
	var worst int64
	for _, t := range tasks {
		worst = max(worst, t.PerSample+t.Fixed+t.BaseWSFixed)
	}
	return weights + worst
}

// modnnSubBatch is Eq. 3: b ← (M − S_W) / max_t M_min(t, b)/b, the
// per-sample need at the current b, iterated from the whole batch until
// it no longer changes; then the largest b in [1, batch] whose every
// task fits, S_W + max_t M_min(t, b) ≤ M. It returns 0 when not even
// b = 1 fits with the fastest algorithms.
func modnnSubBatch(m, weights int64, tasks []modnnTask, batch int64) int64 {
	fits := func(b int64) bool {
		for _, t := range tasks {
			if weights+t.Mmin(b) > m {
				return false
			}
		}
		return true
	}
	avail := m - weights
	if avail <= 0 || batch <= 0 {
		return 0
	}
	b := batch
	seen := map[int64]bool{}
	for !seen[b] {
		seen[b] = true
		var per float64 // max_t M_min(t, b) / b
		for _, t := range tasks {
			per = max(per, float64(t.Mmin(b))/float64(b))
		}
		nb := batch
		if per > 0 {
			nb = min(batch, max(1, int64(float64(avail)/per)))
		}
		if nb == b {
			break
		}
		b = nb
	}
	for b > 1 && !fits(b) {
		b--
	}
	for b < batch && fits(b+1) {
		b++
	}
	if !fits(b) {
		return 0
	}
	return b
}

// ModnnConvChoice is the algorithm moDNN chose for one convolution.
type ModnnConvChoice struct {
	Op        string
	Algo      string
	Workspace int64
	Gain      float64 // Eq. 5, seconds
}

// ModnnResult is what the modnn policy decided beyond its Plan
// (Plan.Detail, Result.Detail): Eq. 1–3 as it saw them and Eq. 5's
// convolution algorithms.
type ModnnResult struct {
	SubBatching
	Convs []ModnnConvChoice
}

// modnnBatch is the batch of the step: the leading dimension of its
// first graph input that is fed data, not a parameter (images, token
// ids; a step's labels have it too), whatever its element type.
func modnnBatch(g *ir.Graph) int64 {
	for _, v := range g.Inputs {
		if v.Kind == ir.KindInput && !v.Param && len(v.Shape) > 0 && v.Shape[0] > 0 {
			return v.Shape[0]
		}
	}
	return 1
}

// isConvTask reports whether a task can choose a convolution algorithm.
func isConvTask(op *ir.Op) bool {
	return op.Domain == "" && (op.Type == "Conv" || op.Type == "ConvTranspose") && ir.CopyOf(op) == ir.NoCopy
}

// convAlgoWorkspace is the workspace of algorithm a for a convolution.
func convAlgoWorkspace(op *ir.Op, a profile.ConvAlgo) int64 {
	if a.Workspace <= 0 || op.Input(0) == nil {
		return 0
	}
	return memory.Align(int64(a.Workspace * float64(op.Input(0).Bytes())))
}

// modnnTasks builds the tasks of Eq. 1 from the memory model of a step
// at a batch. A tensor whose leading dimension is the batch scales with
// it; others count as fixed, which misses tensors that fold the batch
// into another dimension (the transposed operands of a weight gradient,
// a pooling gradient per (n, c) plane): modnnTasksExact splits them.
func modnnTasks(mem *memory.Model, p *profile.Profile, batch int64) []modnnTask {
	return modnnTasksOf(mem, p, batch, func(v *ir.Value, bytes int64) (int64, int64) {
		if len(v.Shape) > 0 && v.Shape[0] == batch && batch > 1 {
			return (bytes + batch - 1) / batch, 0
		}
		return 0, bytes
	})
}

// modnnTasksExact is modnnTasks with each tensor's bytes split exactly
// into what grows with the batch and what does not, from the same step
// built at batch + 1 (other): an op there has the same name and its
// inputs and outputs the same positions, and bytes(batch) = F + P·batch.
// It returns nil when the two steps do not correspond.
func modnnTasksExact(mem *memory.Model, other *ir.Graph, p *profile.Profile, batch int64) []modnnTask {
	ops := map[string]*ir.Op{}
	for _, op := range other.Order() {
		if op.Name == "" || ops[op.Name] != nil {
			return nil
		}
		ops[op.Name] = op
	}
	twin := map[*ir.Value]*ir.Value{}
	for _, op := range mem.Order {
		o := ops[op.Name]
		if o == nil || o.Type != op.Type || len(o.Inputs()) != len(op.Inputs()) || len(o.Outputs()) != len(op.Outputs()) {
			return nil
		}
		for _, pair := range [][2][]*ir.Value{{op.Inputs(), o.Inputs()}, {op.Outputs(), o.Outputs()}} {
			for j, v := range pair[0] {
				if v != nil && pair[1][j] != nil {
					twin[v] = pair[1][j]
				}
			}
		}
	}
	return modnnTasksOf(mem, p, batch, func(v *ir.Value, bytes int64) (int64, int64) {
		w := twin[v]
		if w == nil {
			return 0, bytes
		}
		per := w.Bytes() - v.Bytes()
		if per <= 0 || per*batch > bytes {
			return 0, bytes
		}
		return per, bytes - per*batch
	})
}

// modnnTasksOf builds the tasks of Eq. 1 with split telling, for each
// tensor and its device bytes at the step's batch, its bytes per sample
// and its fixed bytes.
func modnnTasksOf(mem *memory.Model, p *profile.Profile, batch int64, split func(v *ir.Value, bytes int64) (perSample, fixed int64)) []modnnTask {
	var fastest *profile.ConvAlgo
	for i := range p.ConvAlgos {
		if fastest == nil || p.ConvAlgos[i].Speed < fastest.Speed {
			fastest = &p.ConvAlgos[i]
		}
	}
	var tasks []modnnTask
	for i, op := range mem.Order {
		if ir.CopyOf(op) != ir.NoCopy {
			continue
		}
		t := modnnTask{Name: op.Describe()}
		seen := map[ir.ValueID]bool{}
		for _, list := range [][]*ir.Value{op.Inputs(), op.Outputs()} {
			for _, v := range list {
				if v == nil || seen[v.ID] {
					continue
				}
				seen[v.ID] = true
				idx := mem.ByValue[v.ID]
				if idx < 0 || mem.Intervals[idx].Kind == memory.Weight {
					continue
				}
				per, fixed := split(v, mem.Intervals[idx].Bytes)
				t.PerSample += per
				t.Fixed += fixed
			}
		}
		if w := mem.WorkspaceAt[i]; w >= 0 {
			t.WSFixed = mem.Intervals[w].Bytes
			t.BaseWSFixed = t.WSFixed
		}
		if fastest != nil && isConvTask(op) && batch > 0 {
			t.WSPerSample = (convAlgoWorkspace(op, *fastest) + batch - 1) / batch
		}
		tasks = append(tasks, t)
	}
	return tasks
}

// modnn is one round of Alg. 1.
type modnn struct {
	c      *Context
	n      int
	budget int64
	saved  []int64 // bytes the decisions free at each position (negative: reserved workspace)
	uses   [][]int
	d2h    linkTimes
	dec    []*passes.Decision
	byVal  map[ir.ValueID]*passes.Decision
	// restore[s] is the bytes prefetched for task s (Eq. 4's sum).
	restore map[int]int64
	convs   []ModnnConvChoice
	// live is the intervals live across task liveAt, by index: Alg. 1
	// asks at nondecreasing tasks, so a sweep over byStart keeps it
	// (a sub-batched step has tens of thousands of intervals).
	live    []int
	liveAt  int
	byStart []int
	next    int
}

// liveAcross returns the indices, ascending, of the intervals live
// across task i (Start < i < End).
func (m *modnn) liveAcross(i int) []int {
	ivs := m.c.Mem.Intervals
	if m.byStart == nil || i < m.liveAt {
		m.byStart = make([]int, len(ivs))
		for k := range m.byStart {
			m.byStart[k] = k
		}
		sort.SliceStable(m.byStart, func(a, b int) bool { return ivs[m.byStart[a]].Start < ivs[m.byStart[b]].Start })
		m.live, m.next = m.live[:0], 0
	}
	m.liveAt = i
	for m.next < len(m.byStart) && ivs[m.byStart[m.next]].Start < i {
		m.live = append(m.live, m.byStart[m.next])
		m.next++
	}
	m.live = slices.DeleteFunc(m.live, func(k int) bool { return ivs[k].End <= i })
	slices.Sort(m.live)
	return m.live
}

func (m *modnn) need(i int) int64 { return m.c.Mem.Live[i] - m.saved[i] }

// offloadCand is data that could be offloaded before task i.
type offloadCand struct {
	v        *ir.Value
	a, q     int
	size     int64
	outStart float64
	delay    float64
}

// offloadable lists what may be offloaded for task i, best first.
func (m *modnn) offloadable(i int) []offloadCand {
	c := m.c
	op := c.Mem.Order[i]
	var out []offloadCand
	for _, idx := range m.liveAcross(i) {
		iv := &c.Mem.Intervals[idx]
		v := iv.Value
		if !iv.Evictable() || iv.Start >= i || iv.End <= i || iv.End >= m.n || m.byVal[v.ID] != nil || reads(op, v) {
			continue
		}
		a, q := iv.Start, -1
		for _, u := range m.uses[v.ID] {
			if u < i {
				a = max(a, u)
			} else if u > i {
				q = u
				break
			}
		}
		if q < 0 || a < 0 || a+2 > i {
			continue // a graph input not read yet has not been "used since its generation"
		}
		// Not used since it was prefetched: keep it.
		if a == iv.Start && v.Def != nil && ir.CopyOf(v.Def) == ir.ToDevice {
			continue
		}
		outT := c.Prof.TransferTime(v.Bytes(), true)
		st := m.d2h.earliest(c.TL.End[a], outT)
		out = append(out, offloadCand{v: v, a: a, q: q, size: iv.Bytes, outStart: st, delay: max(0, st+outT-c.TL.Start[i])})
	}
	sort.SliceStable(out, func(x, y int) bool {
		if out[x].delay != out[y].delay {
			return out[x].delay < out[y].delay
		}
		if out[x].q != out[y].q {
			return out[x].q > out[y].q
		}
		return out[x].size > out[y].size
	})
	return out
}

// prefetchStart is Eq. 4 with the memory check of Alg. 1 lines 16–17:
// the first task t in (i, q) after which starting the prefetch of task
// q's offloaded data would delay q, moved later while the prefetched
// data would not fit.
func (m *modnn) prefetchStart(i, a, q int, bytes int64) int {
	c := m.c
	trans := c.Prof.TransferTime(bytes, false)
	t := max(i+1, a+2)
	for ; t < q; t++ {
		if c.TL.End[t]+trans > c.TL.Start[q] {
			break
		}
	}
	for k := q - 1; k >= t; k-- {
		if m.need(k) > m.budget {
			return k + 1
		}
	}
	return t
}

// offload frees at least deficit bytes at task i (dry: only estimate).
// It returns the freed bytes and the delay the offloads cause.
func (m *modnn) offload(i int, deficit int64, dry bool) (int64, float64) {
	var freed int64
	var delay float64
	for _, oc := range m.offloadable(i) {
		if freed >= deficit {
			break
		}
		trig := m.prefetchStart(i, oc.a, oc.q, m.restore[oc.q]+oc.size)
		if trig <= i {
			continue
		}
		freed += oc.size
		delay = max(delay, oc.delay)
		if dry {
			continue
		}
		m.restore[oc.q] += oc.size
		d := &passes.Decision{Value: oc.v, Option: passes.Swap, After: oc.a, Before: oc.q, Trigger: trig, At: i, DeltaM: oc.size}
		var hide float64
		for u := trig; u < oc.q; u++ {
			hide += m.c.TL.End[u] - m.c.TL.Start[u]
		}
		d.DeltaT = oc.delay + max(0, m.c.Prof.TransferTime(oc.v.Bytes(), false)-hide)
		m.dec = append(m.dec, d)
		m.byVal[oc.v.ID] = d
		for k := oc.a + 2; k < trig; k++ {
			m.saved[k] += oc.size
		}
		outT := m.c.Prof.TransferTime(oc.v.Bytes(), true)
		m.d2h.reserve(oc.outStart, oc.outStart+outT)
	}
	return freed, delay
}

// inflight lists the prefetches in progress at task i (triggered at or
// before i for a later task), nearest task first.
func (m *modnn) inflight(i int) []*passes.Decision {
	var out []*passes.Decision
	for _, d := range m.dec {
		if d.Trigger <= i && d.Before > i {
			out = append(out, d)
		}
	}
	sort.SliceStable(out, func(a, b int) bool { return out[a].Before < out[b].Before })
	return out
}

// chooseAlgo is Eq. 5 for the convolution at i; it applies the choice.
func (m *modnn) chooseAlgo(i int) {
	c := m.c
	op := c.Mem.Order[i]
	tBase := c.Prof.OpTime(op)
	best := ModnnConvChoice{Op: op.Describe(), Algo: "implicit_gemm"}
	var bestDelayed []*passes.Decision
	var bestOff int64
	first := true
	for _, a := range c.Prof.ConvAlgos {
		ws := convAlgoWorkspace(op, a)
		room := m.budget - m.need(i)
		var tOff, tPre float64
		var delayed []*passes.Decision
		var off int64
		if deficit := ws - max(room, 0); deficit > 0 {
			// Prefetches in flight take the room first: those of the
			// nearest task are delayed until after this task.
			var db int64
			for _, d := range m.inflight(i) {
				if db >= deficit {
					break
				}
				delayed = append(delayed, d)
				db += d.DeltaM
			}
			if db > 0 {
				s := delayed[0].Before
				tPre = max(0, c.TL.End[i]+c.Prof.TransferTime(min(db, deficit), false)-c.TL.Start[s])
			}
			if rest := deficit - db; rest > 0 {
				freed, delay := m.offload(i, rest, true)
				if freed < rest {
					continue // no offloading scheme: the algorithm cannot run here
				}
				tOff, off = delay, rest
			}
		}
		gain := tBase - a.Speed*tBase - tOff - tPre
		if first || gain > best.Gain || (gain == best.Gain && ws < best.Workspace) {
			best = ModnnConvChoice{Op: op.Describe(), Algo: a.Name, Workspace: ws, Gain: gain}
			bestDelayed, bestOff = delayed, off
			first = false
		}
	}
	if first {
		return
	}
	for _, d := range bestDelayed {
		for k := d.Trigger; k <= i; k++ {
			m.saved[k] += d.DeltaM
		}
		d.Trigger = i + 1
	}
	if bestOff > 0 {
		m.offload(i, bestOff, false)
	}
	m.saved[i] -= best.Workspace
	m.convs = append(m.convs, best)
}

func modnnPolicy(c *Context) (*passes.Plan, error) {
	mem := c.Mem
	sb, err := compiler.ReadSubBatching(c.Model)
	if err != nil {
		return nil, fmt.Errorf("policy modnn: %w", err)
	}
	res := &ModnnResult{}
	if sb == nil {
		res.SubBatching = selectSubBatch(c.G, mem, nil, c.Prof, c.Budget)
	} else {
		// An accumulated step (PlanSubBatched): Eq. 2 and 3 were
		// computed on the plain step, which chose these sub-batches.
		res.SubBatching = SubBatching{Batch: sb.Batch, SubBatch: sb.Sizes[0], SubBatches: sb.Sizes}
	}
	batch := res.Batch
	if c.Budget < res.LowerBound {
		return nil, fmt.Errorf("policy modnn: the budget of %s is below moDNN's lower bound (Eq. 2) of %s",
			c.BudgetText(), units.Bytes(res.LowerBound))
	}
	m := &modnn{c: c, n: len(mem.Order), budget: c.Budget, saved: make([]int64, len(mem.Order)),
		uses: make([][]int, c.G.NumValueIDs()), byVal: map[ir.ValueID]*passes.Decision{}, restore: map[int]int64{}}
	for i, op := range mem.Order {
		for _, v := range op.Inputs() {
			if v != nil {
				m.uses[v.ID] = append(m.uses[v.ID], i)
			}
		}
	}
	for i, op := range mem.Order {
		if over := m.need(i) - m.budget; over > 0 {
			m.offload(i, over, false)
		}
		if isConvTask(op) && len(c.Prof.ConvAlgos) > 0 {
			m.chooseAlgo(i)
		}
	}
	res.Convs = m.convs
	for i := 0; i < m.n; i++ {
		if m.need(i) <= m.budget {
			continue
		}
		msg := fmt.Sprintf("policy modnn: at %s, %s stay live after offloading everything that can be (budget %s)",
			mem.Order[i].Describe(), units.Bytes(m.need(i)), c.BudgetText())
		if sb == nil && res.SubBatch > 0 && res.SubBatch < batch {
			msg += fmt.Sprintf("; moDNN trains this budget with sub-batches of %d (Eq. 3): plan the step policy.SubBatchedStep builds (tsplitc and tsplitc bench do)", res.SubBatch)
		}
		return nil, fmt.Errorf("%s", msg)
	}
	if len(m.dec) == 0 {
		return nil, fmt.Errorf("policy modnn: nothing to offload at a peak of %s (budget %s)", units.Bytes(mem.Peak), c.BudgetText())
	}
	return &passes.Plan{Budget: c.Budget, Decisions: m.dec, Detail: res}, nil
}
