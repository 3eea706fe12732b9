package passes

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/tsplit/tsplit/compiler"
	"github.com/tsplit/tsplit/internal/plantest"
	"github.com/tsplit/tsplit/ir"
	. "github.com/tsplit/tsplit/ir/irtest"
	"github.com/tsplit/tsplit/kernels"
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
	before, memBefore := plantest.Run(t, m, 8<<20, in)
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
	after, memAfter := plantest.Run(t, m, 8<<20, in)
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
		m := plantest.Step(t, fam, 2, compiler.TrainOptions{Optimizer: "sgd"})
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
			// In a pool of exactly what the op needs: clearing a fixed
			// 64 MiB pool per run cost more than the runs.
			want := plantest.RunUnplanned(t, plain, feed)
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
					res := plantest.RunUnplanned(t, sm, feed)
					for name, w := range want.Outputs {
						if err := plantest.SameOutput(sm.Graph, name, res.Outputs[name], w, 1e-5); err != nil {
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

// A split op that reads one restored value twice (Mul(x, x)): the
// swap-in that only fed it goes once, not twice.
func TestInsertSplitSameInputTwice(t *testing.T) {
	b := New(t)
	x := b.Input("x", ir.Float, 8, 16)
	h := b.OpDomain(ir.Domain, "SwapOut", 1, V(b.Op("Relu", V(x))))[0]
	r := b.OpDomain(ir.Domain, "SwapIn", 1, V(h))[0]
	sq := b.Op("Mul", V(r, r))
	m := b.Return(sq)
	in := map[string][]byte{"x": plantest.Ramp(8*16, 7)}
	want, _ := plantest.Run(t, m, 1<<20, in)
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
	got, _ := plantest.Run(t, m, 1<<20, in)
	for name, w := range want.Outputs {
		if !bytes.Equal(got.Outputs[name], w) {
			t.Fatalf("output %q changed by the split", name)
		}
	}
}
