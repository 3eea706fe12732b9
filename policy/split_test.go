package policy

import (
	"context"
	"encoding/binary"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tsplit/tsplit/backend"
	"github.com/tsplit/tsplit/compiler"
	"github.com/tsplit/tsplit/internal/oracle"
	"github.com/tsplit/tsplit/internal/plantest"
	"github.com/tsplit/tsplit/ir"
	. "github.com/tsplit/tsplit/ir/irtest"
	"github.com/tsplit/tsplit/passes"
)

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
	want, plainMem := plantest.Run(t, plain, 16<<20, in)

	noSplit := build()
	if _, err := Plan(context.Background(), noSplit, TsplitNoSplit, Options{Budget: budget}); err == nil {
		t.Fatalf("a swap/recompute plan fit %d bytes; the case does not need split", budget)
	}

	m := build()
	s, err := Plan(context.Background(), m, Tsplit, Options{Budget: budget, Check: true})
	if err != nil {
		t.Fatal(err)
	}
	r := s.Report
	t.Logf("base peak %d, planned peak %d, pool %d, %d splits, %d swaps", plainMem.Peak, r.Peak, r.Pool, r.Split, r.Swapped)
	if r.Split == 0 || r.Peak > budget || r.Pool > budget {
		t.Fatalf("plan: %d splits, peak %d, pool %d, budget %d", r.Split, r.Peak, r.Pool, budget)
	}
	got, _ := plantest.RunPlanned(t, m, budget, in)
	if got.HighWater > budget || got.HighWater != r.Peak {
		t.Fatalf("measured high-water %d, planned peak %d, budget %d", got.HighWater, r.Peak, budget)
	}
	for name, w := range want.Outputs {
		g := got.Outputs[name]
		if len(g) != len(w) {
			t.Fatalf("output %q missing", name)
		}
		a, b := plantest.Float32s(w), plantest.Float32s(g)
		for i := range a {
			if d := math.Abs(float64(a[i] - b[i])); d > 1e-5*math.Max(1, math.Abs(float64(a[i]))) {
				t.Fatalf("output %q[%d]: %g planned, %g unplanned", name, i, b[i], a[i])
			}
		}
	}
}

// planSplitCase plans m under budget with policy and, when it plans, runs
// the planned step on a device of exactly the budget at the planned
// layout, checking the measured high-water mark against the plan and the
// outputs against the unplanned step's.
func planSplitCase(t *testing.T, build func() *ir.Model, budget int64, in map[string][]byte, tol float64) *passes.Report {
	t.Helper()
	plain := build()
	want := plantest.RunUnplanned(t, plain, in)
	m := build()
	s, err := Plan(context.Background(), m, Tsplit, Options{Budget: budget, Check: true})
	if err != nil {
		if s != nil && s.Report != nil {
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
	got, _ := plantest.RunPlanned(t, m, budget, in)
	if got.HighWater != r.Peak {
		t.Fatalf("measured high-water %d, planned peak %d", got.HighWater, r.Peak)
	}
	for name, w := range want.Outputs {
		if err := plantest.SameOutput(m.Graph, name, got.Outputs[name], w, tol); err != nil {
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
			if err := plantest.SameOutput(m.Graph, name, x.Data, w, tol); err != nil {
				t.Errorf("ONNX Runtime: %v", err)
			}
		}
		t.Logf("ONNX Runtime ran planned.onnx: %d outputs agree", len(want.Outputs))
	}
	return r
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
	in := map[string][]byte{"x": plantest.Ramp(C*H*W, 29)}
	const act = C * H * W * 4 // 2 MiB
	budget := int64(act * 3 / 2)
	if _, err := Plan(context.Background(), build(), TsplitNoSplit, Options{Budget: budget}); err == nil {
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
	in := map[string][]byte{"xs": plantest.Ramp(M*K/16, 31), "ys": plantest.Ramp(K*N/16, 37)}
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
