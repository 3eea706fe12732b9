package compiler_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tsplit/tsplit/backend"
	"github.com/tsplit/tsplit/compiler"
	"github.com/tsplit/tsplit/executor"
	"github.com/tsplit/tsplit/executor/cpu"
	"github.com/tsplit/tsplit/internal/oracle"
	"github.com/tsplit/tsplit/internal/units"
	"github.com/tsplit/tsplit/ir"
	"github.com/tsplit/tsplit/memory"
	"github.com/tsplit/tsplit/passes"
	"github.com/tsplit/tsplit/policy"
	"github.com/tsplit/tsplit/profile"
	"github.com/tsplit/tsplit/zoo"
)

// zooForward builds the CI-sized zoo model name (weights with data, a
// symbolic batch) at a batch.
func zooForward(name string) compiler.ForwardBuilder {
	return zooForwardAt(name, zoo.SmallConfig(name))
}

// zooForwardAt builds zoo model name in configuration cfg at a batch.
func zooForwardAt(name string, cfg zoo.Config) compiler.ForwardBuilder {
	return func(batch int64) (*ir.Model, error) {
		mp, err := zoo.Build(name, cfg)
		if err != nil {
			return nil, err
		}
		return compiler.FromProto(mp, "", compiler.Options{Batch: batch})
	}
}

// plainStep is the ordinary training step of the whole batch.
func plainStep(t *testing.T, build compiler.ForwardBuilder, batch int64, opts compiler.TrainOptions) (*ir.Model, *compiler.TrainingInfo) {
	t.Helper()
	m, err := build(batch)
	if err != nil {
		t.Fatal(err)
	}
	ti, err := compiler.BuildTrainingStep(m, opts)
	if err != nil {
		t.Fatal(err)
	}
	return m, ti
}

func accumulated(t *testing.T, build compiler.ForwardBuilder, sizes []int64, opts compiler.TrainOptions) (*ir.Model, *compiler.TrainingInfo) {
	t.Helper()
	m, ti, err := compiler.AccumulateSubBatches(build, sizes, opts)
	if err != nil {
		t.Fatalf("sub-batches %v: %v", sizes, err)
	}
	if err := ir.Verify(m); err != nil {
		t.Fatal(err)
	}
	return m, ti
}

// runOn runs a step on the CPU runtime with feeds.
func runOn(t *testing.T, m *ir.Model, feeds map[string][]byte) map[string][]byte {
	t.Helper()
	res, err := stepExecutor(t, m).Run(feeds)
	if err != nil {
		t.Fatal(err)
	}
	return res.Outputs
}

// relOf is max |got − want| / max |want| of two float32 tensors.
func relOf(t *testing.T, what string, got, want []byte) float64 {
	t.Helper()
	d, err := relDiff(what, got, "float32", &oracle.Tensor{Type: "float32", Data: want})
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return d.rel
}

// updated maps each parameter to the output holding its next value.
func updated(ti *compiler.TrainingInfo) map[string]string {
	out := map[string]string{}
	for _, fb := range ti.Feedback {
		out[fb[1]] = fb[0]
	}
	return out
}

func TestSubBatchSizes(t *testing.T) {
	for _, c := range []struct {
		batch, k int64
		want     string // error substring; "" = ok
	}{
		{4, 1, ""}, {4, 2, ""}, {4, 4, ""},
		{4, 3, "does not split into 3 equal sub-batches"},
		{4, 0, "at least one"},
		{4, -2, "at least one"},
		{4, 5, "cannot run as 5 sub-batches"},
		{0, 1, "must be at least 1"},
	} {
		got, err := compiler.EqualSubBatches(c.batch, c.k)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("EqualSubBatches(%d, %d): %v", c.batch, c.k, err)
		case c.want == "" && (int64(len(got)) != c.k || got[0]*c.k != c.batch):
			t.Errorf("EqualSubBatches(%d, %d) = %v", c.batch, c.k, got)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("EqualSubBatches(%d, %d): error %v, want one saying %q", c.batch, c.k, err, c.want)
		}
	}
	for _, c := range []struct {
		batch, b int64
		want     []int64
	}{{10, 4, []int64{4, 4, 2}}, {8, 4, []int64{4, 4}}, {3, 1, []int64{1, 1, 1}}, {5, 5, []int64{5}}, {5, 9, []int64{5}}} {
		if got, err := compiler.SubBatchesOf(c.batch, c.b); err != nil || !slices.Equal(got, c.want) {
			t.Errorf("SubBatchesOf(%d, %d) = %v, %v; want %v", c.batch, c.b, got, err, c.want)
		}
	}
	if _, err := compiler.SubBatchesOf(4, 0); err == nil {
		t.Error("SubBatchesOf(4, 0) gave no error")
	}
	build := zooForward("vgg16")
	for _, sizes := range [][]int64{nil, {2, 0}, {-1, 3}} {
		if _, _, err := compiler.AccumulateSubBatches(build, sizes, compiler.TrainOptions{}); err == nil {
			t.Errorf("AccumulateSubBatches(%v) gave no error", sizes)
		}
	}
	if _, _, err := compiler.AccumulateSubBatches(build, []int64{2, 2}, compiler.TrainOptions{Loss: "none"}); err == nil || !strings.Contains(err.Error(), `loss "none"`) {
		t.Errorf("loss none: %v", err)
	}
	// A model whose batch is fixed in the file cannot be split.
	fixed := func(batch int64) (*ir.Model, error) {
		cfg := zoo.SmallConfig("vgg16")
		cfg.Batch = 4
		mp, err := zoo.Build("vgg16", cfg)
		if err != nil {
			return nil, err
		}
		return compiler.FromProto(mp, "", compiler.Options{Batch: batch})
	}
	if _, _, err := compiler.AccumulateSubBatches(fixed, []int64{2, 2}, compiler.TrainOptions{}); err == nil || !strings.Contains(err.Error(), "follows the batch") {
		t.Errorf("fixed batch: %v", err)
	}
}

// Without BatchNormalization, the accumulated step is the full-batch
// step: the same loss and the same updated weights (and gradients),
// within 1e-5 relative, for equal sub-batches and a smaller last one.
func TestAccumulatedEqualsFullBatch(t *testing.T) {
	for _, c := range []struct {
		model string
		opt   string
		sizes []int64
	}{
		{"vgg16", "sgd", []int64{2, 2}},
		{"vgg16", "sgd", []int64{1, 1, 1, 1}},
		{"vgg16", "momentum", []int64{3, 1}},
		{"bert-base", "sgd", []int64{2, 2}},
		{"bert-base", "adam", []int64{2, 1, 1}},
	} {
		t.Run(fmt.Sprintf("%s/%s/%v", c.model, c.opt, c.sizes), func(t *testing.T) {
			build := zooForward(c.model)
			var batch int64
			for _, n := range c.sizes {
				batch += n
			}
			opts := compiler.TrainOptions{Optimizer: c.opt, LR: 0.05, KeepGrads: true}
			full, fti := plainStep(t, build, batch, opts)
			acc, ati := accumulated(t, build, c.sizes, opts)
			sb, err := compiler.ReadSubBatching(acc)
			if err != nil || sb == nil || sb.Batch != batch || !slices.Equal(sb.Sizes, c.sizes) {
				t.Fatalf("sub-batching metadata %+v, %v", sb, err)
			}
			if !slices.Equal(ati.Params, fti.Params) || len(ati.Feedback) != len(fti.Feedback) {
				t.Fatalf("params %v / %v, feedback %d / %d", ati.Params, fti.Params, len(ati.Feedback), len(fti.Feedback))
			}
			feeds, err := compiler.RandomInputs(full, 11)
			if err != nil {
				t.Fatal(err)
			}
			want := runOn(t, full, feeds)
			got := runOn(t, acc, feeds)
			worst, what := relOf(t, "loss", got[ati.Loss], want[fti.Loss]), "loss"
			check := func(name string, r float64) {
				if r > worst {
					worst, what = r, name
				}
				if !(r <= 1e-5) {
					t.Errorf("%s: accumulated vs full batch: relative difference %.3g > 1e-5", name, r)
				}
			}
			check("loss", worst)
			fnext, anext := updated(fti), updated(ati)
			// A gradient that is zero in exact arithmetic (attention's
			// key bias: softmax ignores a shift of its input) is float32
			// noise in both steps, different noise in each. Gradients
			// and optimizer state are therefore measured against the
			// largest tensor of their kind (every gradient, every
			// adam_m, …) times 10⁻³ where their own scale is smaller.
			kindOf := func(name string) string {
				for _, p := range fti.Params {
					if name == p {
						return "param"
					}
					if strings.HasSuffix(name, "."+p) {
						return strings.TrimSuffix(name, "."+p)
					}
				}
				return name
			}
			kindScale := map[string]float64{}
			note := func(kind string, data []byte) {
				d, err := relDiff(kind, data, "float32", &oracle.Tensor{Type: "float32", Data: data})
				if err != nil {
					t.Fatal(err)
				}
				kindScale[kind] = max(kindScale[kind], d.scale)
			}
			for _, p := range fti.Params {
				note("gradient", want[fti.Grads[p]])
			}
			for in, out := range fnext {
				if !slices.Contains(fti.Params, in) {
					note(kindOf(in), want[out])
				}
			}
			relFloor := func(kind, name string, got, want []byte) float64 {
				d, err := relDiff(name, got, "float32", &oracle.Tensor{Type: "float32", Data: want})
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				maxDiff := d.rel
				if d.scale > 0 {
					maxDiff = d.rel * d.scale
				}
				if s := max(d.scale, 1e-3*kindScale[kind]); s > 0 {
					return maxDiff / s
				}
				return maxDiff
			}
			for _, p := range fti.Params {
				// Adam's first update is about lr·g/(|g|+ε): where a
				// gradient is within rounding of zero, float32
				// reassociation moves the weight by up to lr. Its
				// gradient and moments are checked instead.
				if c.opt != "adam" {
					check("updated "+p, relOf(t, p, got[anext[p]], want[fnext[p]]))
				}
				check("gradient "+p, relFloor("gradient", p, got[ati.Grads[p]], want[fti.Grads[p]]))
			}
			for in, out := range fnext { // optimizer state
				if !slices.Contains(fti.Params, in) {
					check("state "+in, relFloor(kindOf(in), in, got[anext[in]], want[out]))
				}
			}
			t.Logf("%d sub-batches %v: loss %.7g vs %.7g; worst relative difference %.3g (%s) over %d parameters",
				len(c.sizes), c.sizes, float32At(got[ati.Loss], 0), float32At(want[fti.Loss], 0), worst, what, len(fti.Params))
		})
	}
}

// rows returns rows [from, to) of a tensor whose leading dimension is
// n.
func rows(b []byte, n, from, to int64) []byte {
	per := int64(len(b)) / n
	return b[from*per : to*per]
}

// With BatchNormalization, each sub-batch is normalized with its own
// statistics and updates the running statistics in turn: the
// accumulated step's loss and updated weights are the weighted mean of
// what the plain step at the sub-batch size computes on each sub-batch,
// and its running statistics are those of running that plain step on
// the sub-batches one after another, each fed the running statistics the
// previous one wrote.
func TestAccumulatedBatchNorm(t *testing.T) {
	build := zooForward("resnet18")
	const lr = 0.05
	for _, sizes := range [][]int64{{2, 2}, {3, 1}} {
		t.Run(fmt.Sprint(sizes), func(t *testing.T) {
			var batch int64
			for _, n := range sizes {
				batch += n
			}
			opts := compiler.TrainOptions{Optimizer: "sgd", LR: lr}
			acc, ati := accumulated(t, build, sizes, opts)
			full, fti := plainStep(t, build, batch, opts)
			feeds, err := compiler.RandomInputs(full, 5)
			if err != nil {
				t.Fatal(err)
			}
			got := runOn(t, acc, feeds)
			want := runOn(t, full, feeds)
			loss := float64(float32At(got[ati.Loss], 0))
			if math.IsNaN(loss) || math.IsInf(loss, 0) {
				t.Fatalf("loss %v", loss)
			}

			// By hand: the plain sub-batch step (optimizer none) on each
			// sub-batch in turn.
			var parts []map[string][]byte
			var tis []*compiler.TrainingInfo // names differ between sizes
			var offset int64
			for j, n := range sizes {
				sub, sti := plainStep(t, build, n, compiler.TrainOptions{Optimizer: "none"})
				tis = append(tis, sti)
				f := map[string][]byte{}
				for name, data := range feeds {
					f[name] = rows(data, batch, offset, offset+n)
				}
				if j > 0 {
					for k, fb := range sti.Feedback {
						f[fb[1]] = parts[j-1][tis[j-1].Feedback[k][0]]
					}
				}
				parts = append(parts, runOn(t, sub, f))
				offset += n
			}
			// mean is Σ_j (n_j/B)·x_j of the output name(ti_j) of each part.
			mean := func(name func(ti *compiler.TrainingInfo) string) []byte {
				var out []float32
				for j, p := range parts {
					w := float32(float64(sizes[j]) / float64(batch))
					x := p[name(tis[j])]
					for i := 0; i < len(x)/4; i++ {
						if j == 0 {
							out = append(out, 0)
						}
						out[i] += w * float32At(x, i)
					}
				}
				b := make([]byte, 4*len(out))
				for i, x := range out {
					binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
				}
				return b
			}
			sti := tis[len(tis)-1]
			if r := relOf(t, "loss", got[ati.Loss], mean(func(ti *compiler.TrainingInfo) string { return ti.Loss })); r > 1e-5 {
				t.Errorf("loss %v, weighted mean of the sub-batch losses differs by %.3g", loss, r)
			}
			anext := updated(ati)
			for _, p := range sti.Params {
				g := mean(func(ti *compiler.TrainingInfo) string { return ti.Grads[p] })
				w, _ := acc.Graph.Lookup(p).Data()
				exp := make([]byte, len(w.Raw))
				for i := 0; i < len(w.Raw)/4; i++ {
					binary.LittleEndian.PutUint32(exp[4*i:], math.Float32bits(float32At(w.Raw, i)-float32(lr)*float32At(g, i)))
				}
				if r := relOf(t, p, got[anext[p]], exp); r > 1e-5 {
					t.Errorf("%s: updated weight vs w − lr·mean(sub-batch gradients): %.3g", p, r)
				}
			}
			stats := len(sti.Feedback)
			for _, fb := range sti.Feedback {
				if r := relOf(t, fb[1], got[anext[fb[1]]], parts[len(parts)-1][fb[0]]); r > 1e-5 {
					t.Errorf("running statistic %s vs the sub-batches' updates in turn: %.3g", fb[1], r)
				}
			}
			if stats == 0 || len(ati.Feedback) != len(sti.Params)+stats {
				t.Fatalf("%d running statistics, %d feedback pairs for %d parameters", stats, len(ati.Feedback), len(sti.Params))
			}
			fnext := updated(fti)
			t.Logf("loss %.6g (whole-batch statistics: %.6g); %d running statistics, the first running mean %.4g after %d updates (whole batch: %.4g after one)",
				loss, float32At(want[fti.Loss], 0), stats, float32At(got[anext[sti.Feedback[0][1]]], 0), len(sizes),
				float32At(want[fnext[sti.Feedback[0][1]]], 0))
		})
	}
}

// The accumulated step holds one sub-batch's feature maps at a time: its
// peak, as built and in the depth-first schedule, is below the full
// batch's and within the sub-batch step's peak plus the accumulators
// and the rest of the batch's inputs.
func TestAccumulatedPeak(t *testing.T) {
	for _, c := range []struct {
		model    string
		batch, k int64
	}{{"vgg16", 32, 4}, {"vgg16", 32, 8}, {"resnet18", 32, 4}, {"bert-base", 32, 4}} {
		t.Run(fmt.Sprintf("%s/%d/%d", c.model, c.batch, c.k), func(t *testing.T) {
			build := zooForward(c.model)
			opts := compiler.TrainOptions{Optimizer: "sgd"}
			sizes, err := compiler.EqualSubBatches(c.batch, c.k)
			if err != nil {
				t.Fatal(err)
			}
			b := sizes[0]
			full, _ := plainStep(t, build, c.batch, opts)
			sub, _ := plainStep(t, build, b, opts)
			acc, ati := accumulated(t, build, sizes, opts)
			// One gradient-sized running sum per parameter, and while a
			// gradient is added, the new sum next to the old one.
			var accum, largest int64
			for _, p := range ati.Params {
				n := memory.Align(acc.Graph.Lookup(p).Bytes())
				accum += n
				largest = max(largest, n)
			}
			accum += largest
			var inputs int64 // the other sub-batches' rows of the inputs
			for _, v := range acc.Graph.Inputs {
				if v.Kind == ir.KindInput && !v.Param {
					inputs += memory.Align(v.Bytes() - v.Bytes()/c.k)
				}
			}
			for _, sched := range []bool{false, true} {
				peak := func(m *ir.Model) int64 {
					t.Helper()
					if sched {
						order, err := passes.DFSOrder(m.Graph)
						if err != nil {
							t.Fatal(err)
						}
						if err := m.Graph.SetOrder(order); err != nil {
							t.Fatal(err)
						}
					}
					mem, err := memory.Analyze(m.Graph, memory.Options{})
					if err != nil {
						t.Fatal(err)
					}
					return mem.Peak
				}
				pf, ps, pa := peak(full), peak(sub), peak(acc)
				bound := ps + accum + inputs
				t.Logf("schedule %v: peak full batch %d %s, sub-batch %d %s, accumulated %s (bound: + accumulators %s + inputs %s = %s)",
					map[bool]string{false: "as built", true: "depth-first"}[sched], c.batch, units.Bytes(pf), b, units.Bytes(ps),
					units.Bytes(pa), units.Bytes(accum), units.Bytes(inputs), units.Bytes(bound))
				if pa >= pf {
					t.Errorf("accumulated peak %d is not below the full batch's %d", pa, pf)
				}
				if pa > bound {
					t.Errorf("accumulated peak %d is over the sub-batch peak %d + accumulators %d + inputs %d = %d", pa, ps, accum, inputs, bound)
				}
			}
		})
	}
}

// The accumulated step is plain ONNX: written to a file, ONNX Runtime
// runs it and computes what tsplit's runtime computes; read back, it is
// still an accumulated training step. The BN model is resnet18 on 64×64
// images with sub-batches of 4 (at 32×32 its last BatchNormalizations
// normalize 2 values per channel, and any two float32 implementations
// disagree there).
func TestAccumulatedRunsInORT(t *testing.T) {
	cfg := zoo.SmallConfig("resnet18")
	cfg.ImageSize = 64
	for _, c := range []struct {
		name  string
		build compiler.ForwardBuilder
		sizes []int64
	}{
		{"vgg16", zooForward("vgg16"), []int64{2, 1}},
		{"resnet18", zooForwardAt("resnet18", cfg), []int64{4, 4}},
	} {
		t.Run(c.name, func(t *testing.T) {
			m, ti := accumulated(t, c.build, c.sizes, compiler.TrainOptions{Optimizer: "momentum"})
			path := filepath.Join(t.TempDir(), "acc.onnx")
			if err := backend.WriteFile(m, path); err != nil {
				t.Fatal(err)
			}
			back, err := compiler.Import(path, compiler.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if sb, err := compiler.ReadSubBatching(back); err != nil || sb == nil || !slices.Equal(sb.Sizes, c.sizes) {
				t.Fatalf("read back: sub-batching %+v, %v", sb, err)
			}
			feeds, err := compiler.RandomInputs(m, 3)
			if err != nil {
				t.Fatal(err)
			}
			in := map[string]*oracle.Tensor{}
			for _, v := range m.Graph.Inputs {
				if data, ok := feeds[v.Name]; ok {
					in[v.Name] = &oracle.Tensor{Type: tensorTypes[v.DType], Dims: v.Shape, Data: data}
				}
			}
			want := oracle.ORTRun(t, path, in, true)
			got := runOn(t, m, feeds)
			tol := ortTrainRelTol
			if blasBuild() == "gonum" {
				tol = ortTrainRelTolGonum
			}
			var diffs []diff
			for _, v := range m.Graph.Outputs {
				w, ok := want[v.Name]
				if !ok {
					t.Fatalf("ONNX Runtime gave no %q", v.Name)
				}
				d, err := relDiff(v.Name, got[v.Name], tensorTypes[v.DType], w)
				if err != nil {
					t.Fatal(err)
				}
				diffs = append(diffs, d)
				if d.rel > tol {
					t.Errorf("%s: tsplit vs ORT %v", v.Name, d)
				}
			}
			w := worstOf(t, c.name, diffs, 3)
			t.Logf("%s: %d outputs; loss %.6g; worst relative difference from ONNX Runtime %.3g (%s), tolerance %g",
				c.name, len(m.Graph.Outputs), float32At(got[ti.Loss], 0), w.rel, w.name, tol)
		})
	}
}

// The modnn policy plans the accumulated step when Eq. 3's sub-batch is
// below the batch, and the plan runs on the CPU device with a pool of
// exactly the budget, at the planned static layout, within the budget,
// computing what the unplanned accumulated step computes.
func TestModnnRunsSubBatched(t *testing.T) {
	for _, c := range []struct {
		model string
		batch int64
		frac  float64 // budget as a fraction of the plain step's depth-first peak
	}{{"vgg16", 32, 0.6}, {"resnet18", 32, 0.8}} {
		t.Run(c.model, func(t *testing.T) {
			build := zooForward(c.model)
			opts := compiler.TrainOptions{Optimizer: "sgd"}
			step, _ := plainStep(t, build, c.batch, opts)
			dfs, _ := plainStep(t, build, c.batch, opts)
			order, err := passes.DFSOrder(dfs.Graph)
			if err != nil {
				t.Fatal(err)
			}
			if err := dfs.Graph.SetOrder(order); err != nil {
				t.Fatal(err)
			}
			mem, err := memory.Analyze(dfs.Graph, memory.Options{})
			if err != nil {
				t.Fatal(err)
			}
			prof, err := profile.Lookup("titan-rtx")
			if err != nil {
				t.Fatal(err)
			}
			budget := int64(c.frac * float64(mem.Peak))
			popts := policy.Options{Budget: budget, Profile: prof}
			// The plain step does not plan there.
			plain, _ := plainStep(t, build, c.batch, opts)
			_, perr := policy.Plan(context.Background(), plain, policy.Modnn, popts)
			if perr == nil {
				t.Fatalf("the plain step plans at %s: choose a smaller budget", units.Bytes(budget))
			}
			g, res, err := policy.SubBatchedStep(step, policy.SubBatchBuild{Forward: build, Train: opts}, popts)
			if err != nil {
				t.Fatal(err)
			}
			if res.SubBatch >= c.batch || len(res.SubBatches) < 2 {
				t.Fatalf("budget %s: Eq. 3 gives sub-batch %d of %d (%v)", units.Bytes(budget), res.SubBatch, c.batch, res.SubBatches)
			}
			checked := popts
			checked.Check = true
			planned, err := policy.Plan(context.Background(), g, policy.Modnn, checked)
			if err != nil {
				t.Fatalf("sub-batches %v at %s: %v", res.SubBatches, units.Bytes(budget), err)
			}
			if r, ok := planned.Detail.(*policy.ModnnResult); !ok || !slices.Equal(r.SubBatches, res.SubBatches) {
				t.Errorf("the policy reports %#v, the step has sub-batches %v", planned.Detail, res.SubBatches)
			}
			xopts, pool, err := executor.PlannedOptions(g)
			if err != nil {
				t.Fatal(err)
			}
			if pool > budget {
				t.Fatalf("pool %d over the budget %d", pool, budget)
			}
			dev, err := cpu.New(budget)
			if err != nil {
				t.Fatal(err)
			}
			x, err := executor.New(g, dev, xopts)
			if err != nil {
				t.Fatal(err)
			}
			feeds, err := compiler.RandomInputs(g, 1)
			if err != nil {
				t.Fatal(err)
			}
			out, err := x.Run(feeds)
			if err != nil {
				t.Fatal(err)
			}
			if out.HighWater > budget {
				t.Errorf("measured high-water %d over the budget %d", out.HighWater, budget)
			}
			// The same step unplanned (rebuilt: planning rewrote g).
			ref, _ := accumulated(t, build, res.SubBatches, opts)
			want := runOn(t, ref, feeds)
			for _, v := range ref.Graph.Outputs {
				if v.DType == ir.Float && !slices.Equal(out.Outputs[v.Name], want[v.Name]) {
					if r := relOf(t, v.Name, out.Outputs[v.Name], want[v.Name]); r > 1e-6 {
						t.Errorf("%s: planned vs unplanned %.3g", v.Name, r)
					}
				}
			}
			t.Logf("budget %s (%.2f of the plain peak %s): Eq. 3 sub-batch %d, sub-batches %v; %d swapped; planned peak %s, measured high-water %s (the plain step: %v)",
				units.Bytes(budget), c.frac, units.Bytes(mem.Peak), res.SubBatch, res.SubBatches, planned.Report.Swapped,
				units.Bytes(planned.Report.Peak), units.Bytes(out.HighWater), perr)
		})
	}
}
