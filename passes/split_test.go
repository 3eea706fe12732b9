package passes

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tsplit/tsplit/backend"
	"github.com/tsplit/tsplit/compiler"
	"github.com/tsplit/tsplit/executor"
	"github.com/tsplit/tsplit/executor/cpu"
	"github.com/tsplit/tsplit/internal/oracle"
	"github.com/tsplit/tsplit/ir"
	. "github.com/tsplit/tsplit/ir/irtest"
	"github.com/tsplit/tsplit/kernels"
	"github.com/tsplit/tsplit/memory"
)

func splitGraph(t *testing.T) (*ir.Model, *ir.Op) {
	b := New(t)
	x := b.Input("x", ir.Float, 64, 1024)
	w := b.Init("w", ir.TensorFromFloat64s(ir.Float, ir.Shape{1024}, func() []float64 {
		v := make([]float64, 1024)
		for i := range v {
			v[i] = float64(i%7) - 3
		}
		return v
	}()))
	h := b.Op("Mul", V(x, w))
	y := b.Op("Sum", V(b.Op("ReduceSum", V(h), Int("keepdims", 0))))
	return b.Return(y), h.Def
}

func runModel(t testing.TB, m *ir.Model, pool int64, in map[string][]byte) (*executor.Result, *memory.Model) {
	t.Helper()
	dev, err := cpu.New(pool)
	if err != nil {
		t.Fatal(err)
	}
	x, err := executor.New(m, dev, executor.Options{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := x.Run(in)
	if err != nil {
		t.Fatal(err)
	}
	return r, x.Mem
}

// Splitting the Mul 4 ways along the batch stages x and the product in
// host memory piece by piece: the device holds about 2/4 of them at a
// time, and the result is the same.
func TestInsertSplit(t *testing.T) {
	raw := make([]byte, 64*1024*4)
	for i := 0; i < 64*1024; i++ {
		binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(float32(i%13)/13-0.5))
	}
	in := map[string][]byte{"x": raw}
	m, op := splitGraph(t)
	before, memBefore := runModel(t, m, 8<<20, in)
	dm, ok := AnalyzeFT(m).Along(op, 0)
	if !ok {
		t.Fatal("Mul does not split along the batch")
	}
	if err := InsertSplit(m, &SplitDecision{Op: op, PNum: 4, Map: dm}); err != nil {
		t.Fatal(err)
	}
	if err := ir.Verify(m); err != nil {
		t.Fatal(err)
	}
	after, memAfter := runModel(t, m, 8<<20, in)
	for name, want := range before.Outputs {
		if !bytes.Equal(after.Outputs[name], want) {
			t.Fatalf("output %q changed by the split", name)
		}
	}
	// x's pieces are rows: contiguous, so the host slices are views.
	views := 0
	for _, o := range m.Graph.Order() {
		if _, ok := ir.ViewOf(o); ok && o.Host {
			views++
		}
	}
	if views != 4 {
		t.Errorf("%d host slices are views, want 4", views)
	}
	// The product's rows are merged in place: each piece's swap-out
	// writes into the merged buffer.
	merges := 0
	for _, o := range m.Graph.Order() {
		if ir.InPlaceConcat(o) {
			merges++
		}
	}
	if merges != 1 {
		t.Errorf("%d in-place merges, want 1", merges)
	}
	t.Logf("peak %d → %d bytes; host peak %d bytes", memBefore.Peak, memAfter.Peak, memAfter.HostPeak)
	if memAfter.Peak >= memBefore.Peak {
		t.Fatalf("split did not lower the peak: %d → %d", memBefore.Peak, memAfter.Peak)
	}
}

// Split earns its place: every big op of this training step reads and
// writes more than the budget, so no swap/recompute plan exists; with
// splits the step runs under the budget on the capped device and
// computes the same loss and updates.
func TestSplitEarnsItsPlace(t *testing.T) {
	build := func() *ir.Model {
		b := New(t)
		x := b.Input("x", ir.Float, 64, 2048)
		vals := make([]float64, 2048)
		for i := range vals {
			vals[i] = float64(i%5)/5 - 0.3
		}
		w := b.Init("w", ir.TensorFromFloat64s(ir.Float, ir.Shape{2048}, vals))
		h := b.Op("Mul", V(x, w))
		y := b.Op("Relu", V(h))
		loss := b.Op("ReduceMean", V(y), Int("keepdims", 0))
		m := b.Return(loss)
		if _, err := compiler.BuildTrainingStep(m, compiler.TrainOptions{Loss: "none"}); err != nil {
			t.Fatal(err)
		}
		return m
	}
	raw := make([]byte, 64*2048*4)
	for i := 0; i < 64*2048; i++ {
		binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(float32(i%17)/17-0.4))
	}
	in := map[string][]byte{"x": raw}
	const budget = 1 << 20 // x alone is 512 KiB; Mul's inputs and output 1 MiB
	plain := build()
	want, plainMem := runModel(t, plain, 16<<20, in)

	noSplit := build()
	s := NewState(noSplit, &Options{Budget: budget, Policy: "tsplit-nosplit"})
	if err := s.Run(Pipeline...); err == nil {
		t.Fatalf("a swap/recompute plan fit %d bytes; the case does not need split", budget)
	}

	m := build()
	s = NewState(m, &Options{Budget: budget})
	s.Check = true
	if err := s.Run(Pipeline...); err != nil {
		t.Fatal(err)
	}
	r := s.Report
	t.Logf("base peak %d, planned peak %d, pool %d, %d splits, %d swaps", plainMem.Peak, r.Peak, r.Pool, r.Split, r.Swapped)
	if r.Split == 0 || r.Peak > budget || r.Pool > budget {
		t.Fatalf("plan: %d splits, peak %d, pool %d, budget %d", r.Split, r.Peak, r.Pool, budget)
	}
	got, _ := accRunPlanned(t, m, budget, in)
	if got.HighWater > budget || got.HighWater != r.Peak {
		t.Fatalf("measured high-water %d, planned peak %d, budget %d", got.HighWater, r.Peak, budget)
	}
	for name, w := range want.Outputs {
		g := got.Outputs[name]
		if len(g) != len(w) {
			t.Fatalf("output %q missing", name)
		}
		a, b := floatsOf(w), floatsOf(g)
		for i := range a {
			if d := math.Abs(float64(a[i] - b[i])); d > 1e-5*math.Max(1, math.Abs(float64(a[i]))) {
				t.Fatalf("output %q[%d]: %g planned, %g unplanned", name, i, b[i], a[i])
			}
		}
	}
}

func floatsOf(b []byte) []float32 {
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

// isolate returns a model of op alone: its inputs become graph inputs
// (initializers keep their data), its outputs the graph outputs.
func isolate(t *testing.T, m *ir.Model, op *ir.Op) (*ir.Model, *ir.Op) {
	t.Helper()
	b := New(t)
	b.M.Opsets = m.Opsets
	ins := make([]*ir.Value, len(op.Inputs()))
	for j, x := range op.Inputs() {
		if x == nil {
			continue
		}
		name := fmt.Sprintf("in%d", j)
		if x.Kind == ir.KindInit {
			d, err := x.Data()
			if err != nil {
				t.Fatal(err)
			}
			ins[j] = b.Init(name, d)
			continue
		}
		ins[j] = b.Input(name, x.DType, x.Shape...)
		ins[j].Param = x.Param
	}
	names := make([]string, len(op.Outputs()))
	for i, y := range op.Outputs() {
		if y != nil {
			names[i] = fmt.Sprintf("out%d", i)
		}
	}
	iso, err := b.G.NewOp(op.Type, op.Domain, op.Name, ins, names, append([]ir.Attr(nil), op.Attrs...))
	if err != nil {
		t.Fatal(err)
	}
	if err := ir.InferAndSet(iso, b.M.Opset(op.Domain)); err != nil {
		t.Fatal(err)
	}
	var outs []*ir.Value
	for _, y := range iso.Outputs() {
		if y != nil {
			outs = append(outs, y)
		}
	}
	return b.Return(outs...), iso
}

// Every split FTCompat claims for the ops of real training steps, with
// halos, rewritten pads and groups, sum merges, index rebasing and
// shape rewrites, is realized by InsertSplit: the op alone, split 3 ways
// and run on the CPU device, gives the outputs of the op unsplit (floats
// within 1e-5 of the output's largest magnitude: a sum merge
// reassociates long float32 sums, so an element that cancels to near
// zero can differ by more than 1e-5 of itself).
func TestInsertSplitEveryMap(t *testing.T) {
	checked := map[string]int{}
	for _, fam := range []string{"resnet50", "inception", "bert-base"} {
		m := accStep(t, fam, 2, accSGD)
		in, err := compiler.RandomInputs(m, 1)
		if err != nil {
			t.Fatal(err)
		}
		feeds := map[string]*kernels.Tensor{}
		for _, v := range m.Graph.Inputs {
			if raw, ok := in[v.Name]; ok {
				feeds[v.Name] = &kernels.Tensor{DType: v.DType, Shape: v.Shape, Data: raw}
			}
		}
		vals, err := kernels.Interpret(m, feeds, 0)
		if err != nil {
			t.Fatal(err)
		}
		ft := AnalyzeFT(m)
		seen := map[string]bool{}
		for _, op := range m.Graph.Order() {
			maps := ft.Of(op)
			if len(maps) == 0 {
				continue
			}
			// One check per kind of op: same type, attributes and input
			// shapes — for plain maps (σ = 1, no halo, no rewrite) only
			// which dimensions are 1 matters.
			plainMaps := true
			for _, dm := range maps {
				plainMaps = plainMaps && dm.Simple()
			}
			var sig strings.Builder
			fmt.Fprintf(&sig, "%s %v", op.Type, op.Attrs)
			for _, x := range op.Inputs() {
				if x == nil {
					continue
				}
				shape := x.Shape.Clone()
				for d := range shape {
					if plainMaps && shape[d] != 1 {
						shape[d] = -1
					}
				}
				fmt.Fprintf(&sig, " %v%v", shape, x.Kind == ir.KindInit)
			}
			if seen[sig.String()] {
				continue
			}
			seen[sig.String()] = true
			feed := map[string][]byte{}
			for j, x := range op.Inputs() {
				if x != nil && x.Kind != ir.KindInit {
					feed[fmt.Sprintf("in%d", j)] = vals[x.ID].Data
				}
			}
			plain, _ := isolate(t, m, op)
			want, _ := runModel(t, plain, 64<<20, feed)
			for _, dm := range maps {
				if dm.Random {
					continue
				}
				// Three uneven parts where there is room (a middle part has
				// halos on both sides), else two.
				for _, p := range []int{int(min(dm.Extent, 3))} {
					sm, sop := isolate(t, m, op)
					smaps := AnalyzeFT(sm).Of(sop)
					var got *DimMap
					for k := range smaps {
						if smaps[k].OutDim == dm.OutDim && smaps[k].Merge == dm.Merge && fmt.Sprint(smaps[k].InputDims()) == fmt.Sprint(dm.InputDims()) {
							got = &smaps[k]
						}
					}
					if got == nil {
						t.Fatalf("%s: split %v not found on the isolated op", op.Describe(), dm)
					}
					if err := InsertSplit(sm, &SplitDecision{Op: sop, PNum: p, Map: *got}); err != nil {
						t.Errorf("%s split %v p=%d: %v", op.Describe(), dm, p, err)
						continue
					}
					if err := ir.Verify(sm); err != nil {
						t.Fatalf("%s split %v p=%d: %v", op.Describe(), dm, p, err)
					}
					res, _ := runModel(t, sm, 64<<20, feed)
					for name, w := range want.Outputs {
						if err := sameBytes(sm.Graph, name, res.Outputs[name], w, 1e-5); err != nil {
							t.Errorf("%s split %v p=%d: %v", op.Describe(), dm, p, err)
						}
					}
					checked[op.Type+"/"+string(dm.Merge)+"/"+string(dm.Rewrite)]++
				}
			}
		}
	}
	t.Logf("checked: %v", checked)
	for _, want := range []string{"Conv/concat/pads", "Conv/sum/", "AveragePool/concat/pads", "ConvTranspose/sum/", "Gemm/sum/", "MatMul/sum/", "ReduceSum/sum/", "Reshape/concat/shape"} {
		if checked[want] == 0 {
			t.Errorf("no %s split was checked", want)
		}
	}
}

// sameBytes compares one output: bit-exact for integers; floats within
// tol of the output's largest magnitude (a sum merge reassociates).
func sameBytes(g *ir.Graph, name string, got, want []byte, tol float64) error {
	if len(got) != len(want) {
		return fmt.Errorf("output %q: %d bytes, want %d", name, len(got), len(want))
	}
	var dt ir.DType
	for _, v := range g.Outputs {
		if v.Name == name {
			dt = v.DType
		}
	}
	if dt != ir.Float {
		if !bytes.Equal(got, want) {
			return fmt.Errorf("output %q differs", name)
		}
		return nil
	}
	a, b := floatsOf(want), floatsOf(got)
	var scale, worst float64
	at := 0
	for i := range a {
		scale = max(scale, math.Abs(float64(a[i])))
		if d := math.Abs(float64(a[i] - b[i])); d > worst {
			worst, at = d, i
		}
	}
	if worst > tol*max(1, scale) {
		return fmt.Errorf("output %q[%d]: %g split, %g whole (largest |value| %g, normwise error %.2g)", name, at, b[at], a[at], scale, worst/max(1, scale))
	}
	return nil
}

// planSplitCase plans m under budget with policy and, when it plans, runs
// the planned step on a device of exactly the budget at the planned
// layout, checking the measured high-water mark against the plan and the
// outputs against the unplanned step's.
func planSplitCase(t *testing.T, build func() *ir.Model, budget int64, in map[string][]byte, tol float64) *Report {
	t.Helper()
	plain := build()
	want, _ := runModel(t, plain, 1<<30, in)
	m := build()
	s := NewState(m, &Options{Budget: budget})
	s.Check = true
	if err := s.Run(Pipeline...); err != nil {
		if s.Report != nil {
			for _, d := range s.Report.Decisions {
				t.Logf("%s %s p_num %d %s at %s", d.Option, d.Tensor, d.PNum, d.Split, d.At)
			}
		}
		t.Fatal(err)
	}
	r := s.Report
	if r.Pool > budget || r.Peak > budget {
		t.Fatalf("pool %d, planned peak %d over the budget %d", r.Pool, r.Peak, budget)
	}
	got, _ := accRunPlanned(t, m, budget, in)
	if got.HighWater != r.Peak {
		t.Fatalf("measured high-water %d, planned peak %d", got.HighWater, r.Peak)
	}
	for name, w := range want.Outputs {
		if err := sameBytes(m.Graph, name, got.Outputs[name], w, tol); err != nil {
			t.Error(err)
		}
	}
	// ONNX Runtime runs planned.onnx (host Slice, Concat, Sum and Add
	// are standard ops; SwapIn/SwapOut have function bodies) and gets
	// the unplanned result.
	path := filepath.Join(t.TempDir(), "planned.onnx")
	if err := backend.WriteFile(m, path); err != nil {
		t.Fatal(err)
	}
	feeds := map[string]*oracle.Tensor{}
	for _, v := range m.Graph.Inputs {
		if data, ok := in[v.Name]; ok {
			feeds[v.Name] = &oracle.Tensor{Type: accTensorTypes[v.DType], Dims: v.Shape.Clone(), Data: data}
		}
	}
	if ort := oracle.ORTRun(t, path, feeds, true); ort != nil {
		for name, w := range want.Outputs {
			x := ort[name]
			if x == nil {
				t.Errorf("ONNX Runtime gave no output %q", name)
				continue
			}
			if err := sameBytes(m.Graph, name, x.Data, w, tol); err != nil {
				t.Errorf("ONNX Runtime: %v", err)
			}
		}
		t.Logf("ONNX Runtime ran planned.onnx: %d outputs agree", len(want.Outputs))
	}
	return r
}

func rampBytes(n int, period int) []byte {
	raw := make([]byte, 4*n)
	for i := 0; i < n; i++ {
		binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(float32(i%period)/float32(period)-0.45))
	}
	return raw
}

// A huge spatial activation with batch 1 (SFT's case): each
// convolution's input and output together exceed the budget, the batch
// cannot be split and a channel split would still read the whole input,
// so the planner must split along height or width with halos (the
// micro-convolutions get their own pads). The forward pass runs under
// the budget and gives the unplanned result. (Its training step does
// not fit this budget: the weight gradient, a convolution of the input
// by the output gradient, contracts over height and width and needs both
// whole — FTCompat does not claim a split of a kernel's spatial
// dimensions.)
func TestSpatialSplit(t *testing.T) {
	const C, H, W = 8, 256, 256
	build := func() *ir.Model {
		b := New(t)
		x := b.Input("x", ir.Float, 1, C, H, W)
		w := func(name string, k int64) *ir.Value {
			vals := make([]float64, C*C*k*k)
			for i := range vals {
				vals[i] = float64(i%11)/11 - 0.4
			}
			return b.Init(name, ir.TensorFromFloat64s(ir.Float, ir.Shape{C, C, k, k}, vals))
		}
		y := b.Op("Conv", V(x, w("w1", 3)), Ints("kernel_shape", 3, 3), Ints("pads", 1, 1, 1, 1))
		y = b.Op("Relu", V(y))
		y = b.Op("Conv", V(y, w("w2", 5)), Ints("kernel_shape", 5, 5), Ints("pads", 2, 2, 2, 2), Ints("strides", 2, 2))
		return b.Return(b.Op("ReduceMean", V(y), Int("keepdims", 0)))
	}
	in := map[string][]byte{"x": rampBytes(C*H*W, 29)}
	const act = C * H * W * 4 // 2 MiB
	budget := int64(act * 3 / 2)
	if s := NewState(build(), &Options{Budget: budget, Policy: "tsplit-nosplit"}); s.Run(Pipeline...) == nil {
		t.Fatalf("a swap/recompute plan fit %d bytes; the case does not need split", budget)
	}
	r := planSplitCase(t, build, budget, in, 1e-5)
	spatial := 0
	for _, d := range r.Decisions {
		if d.Option == "split+swap" {
			t.Logf("split %s p_num %d: %s", d.At, d.PNum, d.Split)
			if d.Dim >= 2 && strings.Contains(d.Split, "pads") {
				spatial++
			}
		}
	}
	t.Logf("base peak %d, planned peak %d, budget %d, %d splits (%d spatial)", r.BasePeak, r.Peak, budget, r.Split, spatial)
	if spatial == 0 {
		t.Fatal("no spatial (halo) split was planned")
	}
}

// A contraction too long for the budget: X·Y with a huge inner
// dimension K and a small output, X and Y made on the device from small
// inputs. Splitting the rows of X still reads all of Y and splitting the
// columns of Y all of X; splitting K reads 1/p of both and adds the
// partial products on the host (sum merge).
func TestSumSplit(t *testing.T) {
	const M, K, N = 8, 65536, 8
	build := func() *ir.Model {
		b := New(t)
		x := b.Op("Tile", V(b.Input("xs", ir.Float, M, K/16), b.Ints("xr", 1, 16)))
		y := b.Op("Tile", V(b.Input("ys", ir.Float, K/16, N), b.Ints("yr", 16, 1)))
		return b.Return(b.Op("MatMul", V(x, y)))
	}
	in := map[string][]byte{"xs": rampBytes(M*K/16, 31), "ys": rampBytes(K*N/16, 37)}
	budget := int64(M*K*4) * 9 / 8 // X and Y are 2 MiB each
	// The K split reassociates 65536-term float32 sums: measured normwise
	// difference 1.9e-5.
	r := planSplitCase(t, build, budget, in, 1e-4)
	sum := 0
	for _, d := range r.Decisions {
		if d.Option == "split+swap" {
			t.Logf("split %s p_num %d: %s", d.At, d.PNum, d.Split)
			if strings.HasPrefix(d.Split, "k/") {
				sum++
			}
		}
	}
	if sum == 0 {
		t.Fatal("no sum split was planned")
	}
}

// A split op that reads one restored value twice (Mul(x, x)): the
// swap-in that only fed it goes once, not twice.
func TestInsertSplitSameInputTwice(t *testing.T) {
	b := New(t)
	x := b.Input("x", ir.Float, 8, 16)
	h := b.OpDomain(ir.Domain, "SwapOut", 1, V(b.Op("Relu", V(x))))[0]
	r := b.OpDomain(ir.Domain, "SwapIn", 1, V(h))[0]
	sq := b.Op("Mul", V(r, r))
	m := b.Return(sq)
	in := map[string][]byte{"x": rampBytes(8*16, 7)}
	want, _ := runModel(t, m, 1<<20, in)
	dm, ok := AnalyzeFT(m).Along(sq.Def, 0)
	if !ok {
		t.Fatal("Mul does not split along dimension 0")
	}
	if err := InsertSplit(m, &SplitDecision{Op: sq.Def, PNum: 2, Map: dm}); err != nil {
		t.Fatal(err)
	}
	if err := ir.Verify(m); err != nil {
		t.Fatal(err)
	}
	ins := 0
	for _, o := range m.Graph.Order() {
		if ir.CopyOf(o) == ir.ToDevice {
			ins++
		}
	}
	if ins != 2+1 { // one piece in per micro-op, and the result back
		t.Errorf("%d swap-ins, want 3", ins)
	}
	got, _ := runModel(t, m, 1<<20, in)
	for name, w := range want.Outputs {
		if !bytes.Equal(got.Outputs[name], w) {
			t.Fatalf("output %q changed by the split", name)
		}
	}
}
