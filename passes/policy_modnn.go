package passes

import (
	"fmt"
	"runtime"
	"sort"
	"sync"
	"weak"

	"github.com/tsplit/tsplit/compiler"
	"github.com/tsplit/tsplit/ir"
	"github.com/tsplit/tsplit/memory"
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
//     (ModnnSubBatch).
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
//
// What is missing: sub-batching itself. The selected sub-batch is
// computed and reported (ModnnResult), but the step still runs on the
// whole batch — running it as sub-batches with gradient accumulation is
// a graph rewrite (a loop over sub-batches, accumulated gradients, BN
// over sub-batches) that no pass does yet; when the budget needs a
// sub-batch smaller than the batch the error says so. The chosen
// algorithms are reported and their workspace is reserved in the plan
// (so a GPU runtime could use them), but neither the memory model, the
// simulator nor the CPU runtime knows per-op algorithms, so the
// predicted step time does not include their speed-up. Defragmentation
// does not apply: the static layout is computed after planning.

func init() {
	RegisterPolicy("modnn", modnnPolicy)
	ownTriggers["modnn"] = true
}

// ModnnTask is one task of Eq. 1, its memory split by how it scales with
// the sub-batch b.
type ModnnTask struct {
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
func (t ModnnTask) Mmin(b int64) int64 {
	return b*(t.PerSample+t.WSPerSample) + t.Fixed + t.WSFixed
}

// ModnnLowerBound is Eq. 2: weights plus the largest task at sub-batch
// 1 with the baseline algorithm.
func ModnnLowerBound(weights int64, tasks []ModnnTask) int64 {
	var worst int64
	for _, t := range tasks {
		worst = max(worst, t.PerSample+t.Fixed+t.BaseWSFixed)
	}
	return weights + worst
}

// ModnnSubBatch is Eq. 3: b ← (M − S_W) / max_t M_min(t, b)/b, the
// per-sample need at the current b, iterated from the whole batch until
// it no longer changes; then the largest b in [1, batch] whose every
// task fits, S_W + max_t M_min(t, b) ≤ M. It returns 0 when not even
// b = 1 fits with the fastest algorithms.
func ModnnSubBatch(m, weights int64, tasks []ModnnTask, batch int64) int64 {
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

// ModnnResult is what the modnn policy decided beyond its Plan.
type ModnnResult struct {
	Batch, SubBatch int64
	LowerBound      int64 // Eq. 2
	Convs           []ModnnConvChoice
}

var (
	modnnMu      sync.Mutex
	modnnResults = map[weak.Pointer[State]]*ModnnResult{}
)

// ModnnResultOf returns what the modnn policy decided for s in its last
// round (nil if it did not run). The Report has no field for it yet.
func ModnnResultOf(s *State) *ModnnResult {
	modnnMu.Lock()
	defer modnnMu.Unlock()
	return modnnResults[weak.Make(s)]
}

func setModnnResult(s *State, r *ModnnResult) {
	modnnMu.Lock()
	defer modnnMu.Unlock()
	k := weak.Make(s)
	if _, ok := modnnResults[k]; !ok {
		runtime.AddCleanup(s, func(k weak.Pointer[State]) {
			modnnMu.Lock()
			delete(modnnResults, k)
			modnnMu.Unlock()
		}, k)
	}
	modnnResults[k] = r
}

// modnnBatch is the batch of the step: the leading dimension of its
// first floating-point graph input.
func modnnBatch(g *ir.Graph) int64 {
	for _, v := range g.Inputs {
		if v.Kind == ir.KindInput && v.DType.IsFloat() && len(v.Shape) > 0 && v.Shape[0] > 0 {
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

// modnnTasks builds the tasks of Eq. 1 from the memory model.
func modnnTasks(mem *memory.Model, p *profile.Profile, batch int64) []ModnnTask {
	var fastest *profile.ConvAlgo
	for i := range p.ConvAlgos {
		if fastest == nil || p.ConvAlgos[i].Speed < fastest.Speed {
			fastest = &p.ConvAlgos[i]
		}
	}
	var tasks []ModnnTask
	for i, op := range mem.Order {
		if ir.CopyOf(op) != ir.NoCopy {
			continue
		}
		t := ModnnTask{Name: op.Describe()}
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
				b := mem.Intervals[idx].Bytes
				if len(v.Shape) > 0 && v.Shape[0] == batch && batch > 1 {
					t.PerSample += (b + batch - 1) / batch
				} else {
					t.Fixed += b
				}
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
	c      *PolicyContext
	n      int
	budget int64
	saved  []int64 // bytes the decisions free at each position (negative: reserved workspace)
	uses   [][]int
	d2h    linkTimes
	dec    []*Decision
	byVal  map[ir.ValueID]*Decision
	// restore[s] is the bytes prefetched for task s (Eq. 4's sum).
	restore map[int]int64
	convs   []ModnnConvChoice
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
	for idx := range c.Mem.Intervals {
		iv := &c.Mem.Intervals[idx]
		v := iv.Value
		if (iv.Kind != memory.Activation && iv.Kind != memory.Input) || v == nil || iv.Start >= i || iv.End <= i || iv.End >= m.n || m.byVal[v.ID] != nil || reads(op, v) {
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
		d := &Decision{Value: oc.v, Option: Swap, After: oc.a, Before: oc.q, Trigger: trig, At: i, DeltaM: oc.size}
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
func (m *modnn) inflight(i int) []*Decision {
	var out []*Decision
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
	var bestDelayed []*Decision
	var bestOff int64
	first := true
	for _, a := range c.Prof.ConvAlgos {
		ws := convAlgoWorkspace(op, a)
		room := m.budget - m.need(i)
		var tOff, tPre float64
		var delayed []*Decision
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

func modnnPolicy(c *PolicyContext) (*Plan, error) {
	mem := c.Mem
	batch := modnnBatch(c.G)
	var weights int64
	for _, iv := range mem.Intervals {
		if iv.Kind == memory.Weight {
			weights += iv.Bytes
		}
	}
	tasks := modnnTasks(mem, c.Prof, batch)
	res := &ModnnResult{Batch: batch, LowerBound: ModnnLowerBound(weights, tasks)}
	res.SubBatch = ModnnSubBatch(c.Budget, weights, tasks, batch)
	setModnnResult(c.State, res)
	if c.Budget < res.LowerBound {
		return nil, fmt.Errorf("policy modnn: the budget of %s is below moDNN's lower bound (Eq. 2) of %s",
			compiler.FormatBytes(c.Budget), compiler.FormatBytes(res.LowerBound))
	}
	m := &modnn{c: c, n: len(mem.Order), budget: c.Budget, saved: make([]int64, len(mem.Order)),
		uses: make([][]int, c.G.NumValueIDs()), byVal: map[ir.ValueID]*Decision{}, restore: map[int]int64{}}
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
			mem.Order[i].Describe(), compiler.FormatBytes(m.need(i)), compiler.FormatBytes(c.Budget))
		if res.SubBatch > 0 && res.SubBatch < batch {
			msg += fmt.Sprintf("; moDNN would train this budget with sub-batches of %d (Eq. 3), which needs a sub-batching rewrite of the step that is not implemented", res.SubBatch)
		}
		return nil, fmt.Errorf("%s", msg)
	}
	if len(m.dec) == 0 {
		return nil, fmt.Errorf("policy modnn: nothing to offload at a peak of %s (budget %s)", compiler.FormatBytes(mem.Peak), compiler.FormatBytes(c.Budget))
	}
	return &Plan{Budget: c.Budget, Decisions: m.dec}, nil
}
