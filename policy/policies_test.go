package policy

import (
	"bytes"
	"math"
	"sort"
	"strings"
	"testing"

	"github.com/tsplit/tsplit/compiler"
	"github.com/tsplit/tsplit/ir"
	. "github.com/tsplit/tsplit/ir/irtest"
	"github.com/tsplit/tsplit/passes"
)

// weights makes a deterministic initializer of the given shape.
func weights(b *B, name string, dims ...int64) *ir.Value {
	n := int64(1)
	for _, d := range dims {
		n *= d
	}
	vals := make([]float64, n)
	for i := range vals {
		vals[i] = math.Sin(float64(i)*0.37) * 0.2
	}
	return b.Init(name, ir.TensorFromFloat64s(ir.Float, ir.Shape(dims), vals))
}

// train turns a forward model into its training step.
func train(t *testing.T, m *ir.Model) *ir.Model {
	t.Helper()
	if _, err := compiler.BuildTrainingStep(m, compiler.TrainOptions{}); err != nil {
		t.Fatal(err)
	}
	return m
}

// tinyCNN: conv → relu → conv → relu → maxpool → flatten → gemm.
func tinyCNN(t *testing.T) *ir.Model {
	b := New(t)
	x := b.Input("x", ir.Float, 4, 3, 8, 8)
	c1 := b.Op("Conv", V(x, weights(b, "w1", 8, 3, 3, 3)), Ints("pads", 1, 1, 1, 1))
	r1 := b.Op("Relu", V(c1))
	c2 := b.Op("Conv", V(r1, weights(b, "w2", 8, 8, 3, 3)), Ints("pads", 1, 1, 1, 1))
	r2 := b.Op("Relu", V(c2))
	p := b.Op("MaxPool", V(r2), Ints("kernel_shape", 2, 2), Ints("strides", 2, 2))
	fl := b.Op("Flatten", V(p))
	y := b.Op("Gemm", V(fl, weights(b, "w3", 128, 10)))
	return train(t, b.Return(y))
}

// chainMLP: layers × (MatMul → Relu), then a MatMul to 10 classes:
// 2·layers+1 forward ops in a chain. Its feature maps (batch 256) are
// much larger than its weights.
func chainMLP(t *testing.T, layers int) *ir.Model {
	b := New(t)
	h := b.Input("x", ir.Float, 256, 16)
	for i := 0; i < layers; i++ {
		h = b.Op("Relu", V(b.Op("MatMul", V(h, weights(b, "w"+string(rune('a'+i)), 16, 16)))))
	}
	return train(t, b.Return(b.Op("MatMul", V(h, weights(b, "out", 16, 10)))))
}

// names is the set of value names of a plan's decisions.
func names(ds []*passes.Decision) map[string]bool {
	out := map[string]bool{}
	for _, d := range ds {
		out[d.Value.Name] = true
	}
	return out
}

func sameSet(t *testing.T, what string, got, want map[string]bool) {
	t.Helper()
	var missing, extra []string
	for k := range want {
		if !got[k] {
			missing = append(missing, k)
		}
	}
	for k := range got {
		if !want[k] {
			extra = append(extra, k)
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	if len(missing)+len(extra) > 0 {
		t.Errorf("%s: missing %v, extra %v", what, missing, extra)
	}
}

// applyAndCompare inserts a plan, verifies the graph, and checks that
// the step computes what it computed before.
func applyAndCompare(t *testing.T, m *ir.Model, plan *passes.Plan) {
	t.Helper()
	in := stepInputs(m)
	c := policyCtx(t, m, nil, 0)
	want := runStep(t, m, c.Mem.Need(), in)
	if err := passes.InsertSwapRecompute(m, plan); err != nil {
		t.Fatal(err)
	}
	if err := ir.Verify(m); err != nil {
		t.Fatal(err)
	}
	c2 := policyCtx(t, m, nil, 0)
	got := runStep(t, m, c2.Mem.Need(), in)
	for k, w := range want.Outputs {
		if !bytes.Equal(got.Outputs[k], w) {
			t.Errorf("output %q changed by the plan", k)
		}
	}
}

// vDNN-conv swaps exactly the convolutions' feature maps (their inputs,
// or what hoisted backward ops derived from them), layer-synchronously;
// vDNN-all every feature map the backward pass reads.
func TestVDNN(t *testing.T) {
	for _, model := range []string{"tiny", "resnet50"} {
		t.Run(model, func(t *testing.T) {
			mk := func() *ir.Model {
				if model == "tiny" {
					return tinyCNN(t)
				}
				return zooStep(t, "resnet50", 4)
			}
			m := mk()
			c := policyCtx(t, m, nil, 0)
			f, err := newFmaps(c)
			if err != nil {
				t.Fatal(err)
			}
			convIn := map[ir.ValueID]bool{}
			for _, op := range m.Graph.Order() {
				if op.Type == "Conv" && op.Phase == ir.Forward {
					convIn[op.Input(0).ID] = true
				}
			}
			wantConv, wantAll := map[string]bool{}, map[string]bool{}
			relu := false // a convolution input produced by a layer is swapped
			for _, v := range f.crossing() {
				wantAll[v.Name] = true
				for _, o := range f.origins(v) {
					if convIn[o.ID] {
						wantConv[v.Name] = true
						relu = relu || o.Def != nil
					}
				}
			}
			if !relu || len(wantConv) >= len(wantAll) {
				t.Fatalf("degenerate test graph: %d conv feature maps of %d", len(wantConv), len(wantAll))
			}
			for _, pol := range []string{"vdnn-conv", "vdnn-all"} {
				plan := planWith(t, pol, c)
				for _, d := range plan.Decisions {
					if d.Option != passes.Swap || d.Trigger != d.Before || d.After >= d.Before || d.After > f.turn || d.Before <= f.turn {
						t.Errorf("%s: %q: %v after %d, before %d, trigger %d (turn %d)", pol, d.Value.Name, d.Option, d.After, d.Before, d.Trigger, f.turn)
					}
				}
				want := wantAll
				if pol == "vdnn-conv" {
					want = wantConv
				}
				sameSet(t, pol, names(plan.Decisions), want)
			}
			if model == "tiny" {
				applyAndCompare(t, m, planWith(t, "vdnn-conv", c))
			}
		})
	}
}

// Checkpoints keeps about √n segment boundaries and recomputes every
// other feature map from them, chains included.
func TestCheckpointSqrtN(t *testing.T) {
	for _, layers := range []int{8, 12, 24} {
		m := chainMLP(t, layers)
		c := policyCtx(t, m, nil, 0)
		f, _ := newFmaps(c)
		cuts, at, n := forwardCuts(f.order, f.evictable)
		if n != 2*layers+1 || len(cuts) < n-1 {
			t.Fatalf("%d layers: %d forward ops, %d cuts", layers, n, len(cuts))
		}
		ck := checkpointSegments(cuts, at, n)
		k := int(math.Round(math.Sqrt(float64(n))))
		if len(ck)+1 != k {
			t.Errorf("%d forward ops: %d segments, want round(√n) = %d", n, len(ck)+1, k)
		}
		isCk := map[string]bool{}
		for _, v := range ck {
			isCk[v.Name] = true
		}
		plan := planWith(t, "checkpoint", c)
		chained := 0
		for _, d := range plan.Decisions {
			if d.Option != passes.Recompute || isCk[d.Value.Name] {
				t.Errorf("%v of %q (checkpoint %v)", d.Option, d.Value.Name, isCk[d.Value.Name])
			}
			if d.DeltaM == 0 {
				chained++ // a tensor that died in the forward pass, recomputed for a later clone
			}
		}
		if chained == 0 {
			t.Errorf("%d layers: no recomputation chain", layers)
		}
		t.Logf("%d forward ops: %d segments, %d recomputations (%d chained)", n, len(ck)+1, len(plan.Decisions), chained)
		applyAndCompare(t, m, plan)
	}
	// resnet50: boundaries only between residual blocks (a block's sum or
	// its ReLU).
	m := zooStep(t, "resnet50", 4)
	c := policyCtx(t, m, nil, 0)
	f, _ := newFmaps(c)
	cuts, at, n := forwardCuts(f.order, f.evictable)
	ck := checkpointSegments(cuts, at, n)
	k := math.Sqrt(float64(n))
	if s := float64(len(ck) + 1); s < k/2 || s > k+1 {
		t.Errorf("resnet50: %d segments for %d forward ops (√n = %.1f)", len(ck)+1, n, k)
	}
	for _, v := range ck {
		if v.Def.Type != "Relu" && v.Def.Type != "Add" && v.Def.Type != "MaxPool" && v.Def.Type != "GlobalAveragePool" && v.Def.Type != "Flatten" {
			t.Errorf("resnet50: checkpoint %q inside a block (%s)", v.Name, v.Def.Type)
		}
	}
	t.Logf("resnet50: %d forward ops, %d cuts, %d segments", n, len(cuts), len(ck)+1)
}

// SuperNeurons decides by layer type: convolution outputs are swapped,
// pooling/normalization/activation feature maps recomputed, and no
// convolution is ever recomputed.
func TestSuperNeuronsByLayerType(t *testing.T) {
	m := zooStep(t, "resnet50", 4)
	c := policyCtx(t, m, nil, 0)
	f, _ := newFmaps(c)
	plan := planWith(t, "superneurons", c)
	byName := map[string]*passes.Decision{}
	for _, d := range plan.Decisions {
		byName[d.Value.Name] = d
		switch d.Option {
		case passes.Swap:
			if d.Value.Def.Type != "Conv" || d.Value.Def.Phase != ir.Forward {
				t.Errorf("swapped %q, a %s output", d.Value.Name, d.Value.Def.Type)
			}
		case passes.Recompute:
			if d.Value.Def.Type == "Conv" {
				t.Errorf("recomputed the convolution %q", d.Value.Name)
			}
		}
	}
	counts := map[string]int{}
	for _, v := range f.crossing() {
		o := f.origins(v)
		typ := "input"
		if len(o) == 1 && o[0].Def != nil {
			typ = o[0].Def.Type
		}
		d := byName[v.Name]
		switch {
		case snCheapTypes[typ]:
			if d == nil || d.Option != passes.Recompute {
				t.Errorf("%q (a %s feature map) is not recomputed", v.Name, typ)
			}
			counts[typ]++
		case typ == "Conv":
			if d == nil {
				t.Errorf("%q (a convolution feature map) is kept", v.Name)
			}
			counts[typ]++
		default:
			if d != nil && d.DeltaM > 0 {
				t.Errorf("%q (a %s feature map) is evicted", v.Name, typ)
			}
		}
	}
	for _, typ := range []string{"Conv", "Relu", "MaxPool"} {
		if counts[typ] == 0 {
			t.Errorf("no %s feature map in resnet50", typ)
		}
	}
	t.Logf("by origin type: %v", counts)
}

// Capuchin ranks candidates by free time (Eq. 1) and swaps the largest
// FT first, with its in-trigger the latest access before the ideal
// swap-in start.
func TestCapuchinFreeTime(t *testing.T) {
	m := chainMLP(t, 6)
	c := policyCtx(t, m, nil, 0)
	cp, err := newCapuchin(c)
	if err != nil {
		t.Fatal(err)
	}
	cands := cp.candidates()
	if len(cands) < 3 {
		t.Fatalf("%d candidates", len(cands))
	}
	p := c.Prof
	for i, cd := range cands {
		ft := c.TL.Start[cd.q] - p.TransferTime(cd.v.Bytes(), false) - cp.accessEnd(cd.a) - p.TransferTime(cd.v.Bytes(), true)
		if math.Abs(ft-cd.ft) > 1e-12 {
			t.Errorf("%q: FT %g, Eq. 1 gives %g", cd.v.Name, cd.ft, ft)
		}
		if i > 0 && cands[i-1].ft < cd.ft {
			t.Errorf("candidates not by decreasing FT: %g before %g", cands[i-1].ft, cd.ft)
		}
	}
	// The feature map of the first layer is back-accessed last: the
	// longest free time.
	if cands[0].a > cands[len(cands)-1].a {
		t.Errorf("largest FT at %q (evicted at %d), not the earliest feature map", cands[0].v.Name, cands[0].a)
	}
	targets := cp.selectEvictions()
	if len(targets) == 0 || targets[0].V != cands[0].v || targets[0].Opt != passes.Swap {
		t.Fatalf("first eviction %v, want a swap of %q", targets, cands[0].v.Name)
	}
	plan := planWith(t, "capuchin", c)
	for _, d := range plan.Decisions {
		if d.Value != cands[0].v {
			continue
		}
		in := c.TL.Start[d.Before] - p.TransferTime(d.Value.Bytes(), false)
		if c.TL.Start[d.Trigger] > in || (d.Trigger+1 < d.Before && c.TL.Start[d.Trigger+1] <= in) {
			t.Errorf("in-trigger %d (start %g) is not the latest access before the swap-in start %g", d.Trigger, c.TL.Start[d.Trigger], in)
		}
	}
}

// Alg. 2 on the paper's lineage T1 → T2 → T3 → T4 (T3 dead after the
// forward pass, candidates T1, T2, T4): choosing T2 moves T4's source to
// T1 and adds T2's recomputation time to T4's, and charges T1 its
// repeated recomputation; choosing T1 last makes the others start from
// T1's source.
func TestCapuchinMSPSUpdates(t *testing.T) {
	const t0, t1, t2, t4 ir.ValueID = 100, 1, 2, 4
	mk := func() (*capRecompute, map[ir.ValueID]*capRC) {
		r1 := &capRC{id: t1, mem: 100, srcs: map[ir.ValueID]bool{t0: true}, rpTime: 1}
		r2 := &capRC{id: t2, mem: 400, srcs: map[ir.ValueID]bool{t1: true}, rpTime: 2}
		r4 := &capRC{id: t4, mem: 700, srcs: map[ir.ValueID]bool{t2: true}, rpTime: 7} // op3 + op4
		return &capRecompute{cands: []*capRC{r1, r2, r4}}, map[ir.ValueID]*capRC{t1: r1, t2: r2, t4: r4}
	}
	rc, by := mk()
	if got := rc.max(nil); got != by[t2] {
		t.Fatalf("max MSPS is %d, want T2 (MSPS %g vs %g, %g)", got.id, by[t2].MSPS(), by[t1].MSPS(), by[t4].MSPS())
	}
	rc.commit(by[t2])
	if r := by[t4]; len(r.srcs) != 1 || !r.srcs[t1] || r.rpTime != 9 || r.extTime != 0 {
		t.Errorf("T4 after T2: srcs %v rp %g ext %g, want {T1} 9 0", r.srcs, r.rpTime, r.extTime)
	}
	if r := by[t1]; r.extTime != 1 {
		t.Errorf("T1 after T2: ext %g, want 1 (recomputed once more for T2)", r.extTime)
	}
	if got := rc.max(nil); got != by[t4] {
		t.Errorf("next max MSPS is %d, want T4", got.id)
	}
	rc.commit(by[t4])
	rc.commit(by[t1])
	for _, id := range []ir.ValueID{t2, t4} {
		if s := by[id].srcs; len(s) != 1 || !s[t0] {
			t.Errorf("%d after T1: srcs %v, want {T0}", id, s)
		}
	}
	rc, by = mk()
	if got := rc.run(500); len(got) != 2 || got[0] != by[t2] || got[1] != by[t4] {
		t.Errorf("Alg. 2 for 500 bytes chose %v", got)
	}
}

// When no swap can be hidden (a slow link), Capuchin's evictions are
// recomputations in Alg. 2's order of MSPS.
func TestCapuchinRecomputesByMSPS(t *testing.T) {
	m := chainMLP(t, 6)
	c := policyCtx(t, m, nil, 0)
	slow := *c.Prof
	slow.H2D, slow.D2H = 1e3, 1e3
	c.Prof = &slow
	cp, _ := newCapuchin(c)
	var rest []*capCand
	isCand := map[ir.ValueID]bool{}
	for _, cd := range cp.candidates() {
		rest = append(rest, cd)
		isCand[cd.v.ID] = true
	}
	rc := &capRecompute{}
	for _, cd := range rest {
		if passes.Clonable(cd.v) {
			rc.cands = append(rc.cands, cp.lineage(cd, isCand))
		}
	}
	order := rc.run(math.MaxInt64)
	targets := cp.selectEvictions()
	if len(targets) == 0 {
		t.Fatal("nothing evicted")
	}
	for i, tg := range targets {
		if tg.Opt != passes.Recompute || tg.V.ID != order[i].id {
			t.Fatalf("eviction %d: %v of %q, Alg. 2 picks %d", i, tg.Opt, tg.V.Name, order[i].id)
		}
	}
	applyAndCompare(t, m, planWith(t, "capuchin", c))
}

// Eq. 3: the largest sub-batch whose every task fits with the weights.
func TestModnnSubBatch(t *testing.T) {
	cases := []struct {
		m, w  int64
		tasks []modnnTask
		batch int64
		want  int64
	}{
		{1000, 200, []modnnTask{{PerSample: 30, WSPerSample: 10}}, 64, 20},
		{1000, 200, []modnnTask{{PerSample: 10, Fixed: 100}}, 128, 70},
		{1000, 200, []modnnTask{{PerSample: 10, Fixed: 100}, {PerSample: 20, WSFixed: 50}}, 128, 37},
		{1000, 200, []modnnTask{{PerSample: 10, Fixed: 100}}, 16, 16},
		{250, 200, []modnnTask{{PerSample: 30, WSPerSample: 10, Fixed: 20}}, 8, 0},
	}
	for _, tc := range cases {
		got := modnnSubBatch(tc.m, tc.w, tc.tasks, tc.batch)
		if got != tc.want {
			t.Errorf("M=%d S_W=%d %+v batch %d: sub-batch %d, want %d", tc.m, tc.w, tc.tasks, tc.batch, got, tc.want)
		}
		if got > 0 {
			for _, task := range tc.tasks {
				if tc.w+task.Mmin(got) > tc.m {
					t.Errorf("sub-batch %d does not fit %+v", got, task)
				}
			}
		}
	}
	if lb := modnnLowerBound(200, []modnnTask{{PerSample: 30, WSPerSample: 10, Fixed: 20, BaseWSFixed: 5}}); lb != 255 {
		t.Errorf("Eq. 2 lower bound %d, want 255", lb)
	}
	// On a graph: resnet50's tasks scale with the batch, and the
	// sub-batch shrinks with the budget.
	m := zooStep(t, "resnet50", 16)
	c := policyCtx(t, m, nil, 0)
	var weights int64
	for _, iv := range c.Mem.Intervals {
		if iv.Kind == 0 {
			weights += iv.Bytes
		}
	}
	tasks := modnnTasks(c.Mem, c.Prof, 16)
	prev := int64(17)
	for _, frac := range []float64{1.2, 0.8, 0.6, 0.45} {
		b := modnnSubBatch(int64(frac*float64(c.Mem.Peak)), weights, tasks, 16)
		if b > prev || b < 1 {
			t.Errorf("budget %.2f·peak: sub-batch %d after %d", frac, b, prev)
		}
		prev = b
	}
}

// Eq. 4: a prefetch starts before the first task after which starting
// it would delay its consumer.
func TestModnnPrefetchEq4(t *testing.T) {
	m := zooStep(t, "resnet50", 8)
	c := policyCtx(t, m, nil, 0)
	md := &modnn{c: c, n: len(c.Mem.Order), budget: c.Mem.Peak * 2, saved: make([]int64, len(c.Mem.Order))}
	f, _ := newFmaps(c)
	checked := 0
	for _, v := range f.crossing() {
		a, q := f.gap(v)
		trans := c.Prof.TransferTime(v.Bytes(), false)
		tr := md.prefetchStart(a+1, a, q, v.Bytes())
		if tr <= a+2 || tr >= q {
			continue
		}
		checked++
		if c.TL.End[tr]+trans <= c.TL.Start[q] || c.TL.End[tr-1]+trans > c.TL.Start[q] {
			t.Errorf("%q: prefetch starts before %d, Eq. 4 does not switch there", v.Name, tr)
		}
	}
	if checked == 0 {
		t.Fatal("no prefetch checked")
	}
}

// Eq. 5: every convolution gets the algorithm of largest gain. With room
// for its workspace the fastest wins by T_base − T_alg; with no room and
// nothing to offload, only the baseline (no workspace) can run.
func TestModnnConvAlgos(t *testing.T) {
	m := zooStep(t, "resnet50", 8)
	c := policyCtx(t, m, nil, 0)
	plan, err := modnnPolicy(c)
	if err != nil {
		t.Fatal(err)
	}
	res, _ := plan.Detail.(*ModnnResult)
	convs := 0
	for _, op := range c.Mem.Order {
		if isConvTask(op) {
			convs++
		}
	}
	if res == nil || len(res.Convs) != convs {
		t.Fatalf("%d convolutions, result %+v", convs, res)
	}
	algos := map[string]int{}
	for _, ch := range res.Convs {
		algos[ch.Algo]++
		if ch.Gain < 0 {
			t.Errorf("%s: negative gain %g", ch.Op, ch.Gain)
		}
	}
	t.Logf("just below the peak: %v; sub-batch %d of %d", algos, res.SubBatch, res.Batch)
	// conv1, the first task: nothing can be offloaded before it.
	if !isConvTask(c.Mem.Order[0]) {
		t.Fatalf("first task %s", c.Mem.Order[0].Describe())
	}
	op := c.Mem.Order[0]
	tBase := c.Prof.OpTime(op)
	fastest := c.Prof.ConvAlgos[0]
	for _, a := range c.Prof.ConvAlgos {
		if a.Speed < fastest.Speed {
			fastest = a
		}
	}
	fastestWS := convAlgoWorkspace(op, fastest)
	for _, tc := range []struct {
		room int64
		algo string
		gain float64
	}{
		{0, "implicit_gemm", 0},
		{fastestWS, fastest.Name, (1 - fastest.Speed) * tBase},
	} {
		n := len(c.Mem.Order)
		md := &modnn{c: c, n: n, saved: make([]int64, n), uses: make([][]int, c.G.NumValueIDs()), byVal: map[ir.ValueID]*passes.Decision{}, restore: map[int]int64{}}
		md.budget = md.need(0) + tc.room
		md.chooseAlgo(0)
		if len(md.convs) != 1 || md.convs[0].Algo != tc.algo || math.Abs(md.convs[0].Gain-tc.gain) > 1e-15 {
			t.Errorf("room %d: chose %+v, want %s with gain %g", tc.room, md.convs, tc.algo, tc.gain)
		}
		if md.need(0) > md.budget {
			t.Errorf("room %d: the chosen workspace does not fit", tc.room)
		}
	}
}

// TFLMS: n_tensors counts tensors in breadth-first order; the swap-in's
// control op lies lb..ub ops before the consumer (direct_order) or is a
// backward op reaching it (chain_rule); fuse_swapins makes one swap-in
// per tensor.
func TestTFLMSParams(t *testing.T) {
	for _, tc := range []struct {
		params map[string]string
		check  func(t *testing.T, f *fmaps, tf *tflms, ds []*passes.Decision)
	}{
		{map[string]string{"ctrld_strategy": "direct_order", "lb": "3", "ub": "6", "fuse_swapins": "true"}, func(t *testing.T, f *fmaps, tf *tflms, ds []*passes.Decision) {
			for _, d := range ds {
				g := d.Trigger - 1
				if g < d.Before-6+1 || g > d.Before-3 || !tf.ancestors(d.Before, g-1)[f.order[g].ID] {
					t.Errorf("%q: control op %d for consumer %d outside lb..ub or not reaching it", d.Value.Name, g, d.Before)
				}
			}
		}},
		{map[string]string{"ctrld_strategy": "chain_rule", "lb": "1", "ub": "3"}, func(t *testing.T, f *fmaps, tf *tflms, ds []*passes.Decision) {
			for _, d := range ds {
				g := d.Trigger - 1
				if f.order[g].Phase != ir.Backward || g <= f.turn || !tf.ancestors(d.Before, g-1)[f.order[g].ID] {
					t.Errorf("%q: control op %s is not a backward op reaching the consumer", d.Value.Name, f.order[g].Describe())
				}
			}
		}},
		{map[string]string{"n_tensors": "5", "fuse_swapins": "true"}, func(t *testing.T, f *fmaps, tf *tflms, ds []*passes.Decision) {
			vs, _ := tf.tensors()
			want := map[string]bool{}
			for _, v := range vs[:5] {
				want[v.Name] = true
			}
			got := names(ds)
			for k := range got {
				if !want[k] {
					t.Errorf("swapped %q, not among the first 5 tensors", k)
				}
			}
			if len(ds) != len(got) {
				t.Errorf("fused: %d swap-ins for %d tensors", len(ds), len(got))
			}
		}},
	} {
		m := zooStep(t, "resnet50", 4)
		c := policyCtx(t, m, &passes.Options{PolicyParams: tc.params}, 0)
		plan := planWith(t, "tflms", c)
		f, _ := newFmaps(c)
		p, _ := parseTFLMSParams(tc.params)
		tf := &tflms{f: f, p: p, derived: map[ir.ValueID][]*ir.Value{}}
		for _, v := range f.crossing() {
			for _, o := range f.origins(v) {
				tf.derived[o.ID] = append(tf.derived[o.ID], v)
			}
		}
		for _, d := range plan.Decisions {
			if d.Option != passes.Swap || d.Trigger <= d.After+1 || d.Trigger > d.Before {
				t.Errorf("%v: %q after %d trigger %d before %d", tc.params, d.Value.Name, d.After, d.Trigger, d.Before)
			}
		}
		tc.check(t, f, tf, plan.Decisions)
		t.Logf("%v: %d swap-ins for %d tensors", tc.params, len(plan.Decisions), len(names(plan.Decisions)))
	}
	// Unfused swap-ins are per consumer, and the graph still computes the
	// same step.
	m := tinyCNN(t)
	c := policyCtx(t, m, &passes.Options{PolicyParams: map[string]string{"ctrld_strategy": "direct_order"}}, 0)
	applyAndCompare(t, m, planWith(t, "tflms", c))
	for _, bad := range []map[string]string{{"lb": "0"}, {"lb": "5", "ub": "4"}, {"n_tensors": "0"}, {"ctrld_strategy": "random"}, {"fuse": "true"}} {
		if _, err := parseTFLMSParams(bad); err == nil || !strings.Contains(err.Error(), "tflms") {
			t.Errorf("%v: error %v", bad, err)
		}
	}
}
