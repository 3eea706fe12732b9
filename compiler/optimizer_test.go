package compiler_test

import (
	"math"
	"testing"

	"github.com/tsplit/tsplit/compiler"
	"github.com/tsplit/tsplit/executor"
	"github.com/tsplit/tsplit/executor/cpu"
	"github.com/tsplit/tsplit/ir"
	. "github.com/tsplit/tsplit/ir/irtest"
	"github.com/tsplit/tsplit/kernels"
	"github.com/tsplit/tsplit/memory"
)

// linear: logits = x·W + b, x [4,8], W [8,3], b [3].
func linear(t *testing.T) *ir.Model {
	b := New(t)
	x := b.Input("x", ir.Float, 4, 8)
	wv := make([]float64, 24)
	for i := range wv {
		wv[i] = float64(i%7)/7 - 0.4
	}
	w := b.Init("W", ir.TensorFromFloat64s(ir.Float, ir.Shape{8, 3}, wv))
	bias := b.Init("b", ir.TensorFromFloat64s(ir.Float, ir.Shape{3}, []float64{0.1, -0.2, 0.3}))
	return b.Return(b.Op("Add", V(b.Op("MatMul", V(x, w)), bias)))
}

func feeds(t *testing.T, m *ir.Model) map[string]*kernels.Tensor {
	raw, err := compiler.RandomInputs(m, 3)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*kernels.Tensor{}
	for name, data := range raw {
		v := m.Graph.Lookup(name)
		out[name] = &kernels.Tensor{DType: v.DType, Shape: v.Shape, Data: data}
	}
	return out
}

// One step of each optimizer updates the weights exactly as its formula
// says, from the gradients the optimizer-"none" step outputs; optimizer
// state is fed back and counted as resident memory.
func TestOptimizerUpdates(t *testing.T) {
	ref := linear(t)
	rti, err := compiler.BuildTrainingStep(ref, compiler.TrainOptions{Optimizer: "none"})
	if err != nil {
		t.Fatal(err)
	}
	in := feeds(t, ref)
	vals, err := kernels.Interpret(ref, in, 0)
	if err != nil {
		t.Fatal(err)
	}
	grad := func(p string) []float32 { return vals[ref.Graph.Lookup(rti.Grads[p]).ID].F32() }
	weight := func(m *ir.Model, p string) []float32 {
		d, _ := m.Graph.Lookup(p).Data()
		return d.Float32s()
	}
	const lr = 0.1
	for _, opt := range []string{"sgd", "momentum", "adam"} {
		t.Run(opt, func(t *testing.T) {
			m := linear(t)
			ti, err := compiler.BuildTrainingStep(m, compiler.TrainOptions{Optimizer: opt, LR: lr})
			if err != nil {
				t.Fatal(err)
			}
			out, err := kernels.Interpret(m, in, 0)
			if err != nil {
				t.Fatal(err)
			}
			next := map[string]string{}
			for _, fb := range ti.Feedback {
				next[fb[1]] = fb[0]
			}
			for _, p := range []string{"W", "b"} {
				g, w := grad(p), weight(m, p)
				got := out[m.Graph.Lookup(next[p]).ID].F32()
				for i := range w {
					gi := float64(g[i])
					var want float64
					switch opt {
					case "sgd", "momentum": // momentum's first step: v = g
						want = float64(w[i]) - lr*gi
					case "adam": // first step: m̂ = g, v̂ = g²
						want = float64(w[i]) - lr*gi/(math.Abs(gi)+1e-8)
					}
					if math.Abs(float64(got[i])-want) > 1e-5*math.Max(1, math.Abs(want)) {
						t.Fatalf("%s[%d]: updated to %g, formula gives %g", p, i, got[i], want)
					}
				}
			}
			states := map[string]int{"sgd": 0, "momentum": 2, "adam": 5}[opt] // per-param state + Adam's step
			if len(ti.Feedback) != 2+states {
				t.Fatalf("%d feedback pairs, want %d", len(ti.Feedback), 2+states)
			}
			mem, err := memory.Analyze(m.Graph, memory.Options{})
			if err != nil {
				t.Fatal(err)
			}
			var resident int64
			for _, iv := range mem.Intervals {
				if iv.Kind == memory.Weight {
					resident += iv.Bytes
				}
			}
			if want := int64(2+states) * memory.Alignment; resident < want {
				t.Fatalf("%d bytes of weights and state counted, want at least %d", resident, want)
			}
		})
	}
}

// Ten steps of each optimizer on the runtime, feeding state back, lower
// the loss.
func TestOptimizersTrain(t *testing.T) {
	for _, opt := range []string{"sgd", "momentum", "adam"} {
		t.Run(opt, func(t *testing.T) {
			m := linear(t)
			ti, err := compiler.BuildTrainingStep(m, compiler.TrainOptions{Optimizer: opt, LR: 0.05})
			if err != nil {
				t.Fatal(err)
			}
			xopts, pool, err := executor.PlannedOptions(m)
			if err != nil {
				t.Fatal(err)
			}
			dev, err := cpu.New(pool)
			if err != nil {
				t.Fatal(err)
			}
			x, err := executor.New(m, dev, xopts)
			if err != nil {
				t.Fatal(err)
			}
			in, err := compiler.RandomInputs(m, 5)
			if err != nil {
				t.Fatal(err)
			}
			var losses []float32
			for step := 0; step < 10; step++ {
				r, err := x.Run(in)
				if err != nil {
					t.Fatal(err)
				}
				l := &kernels.Tensor{DType: ir.Float, Shape: ir.Shape{}, Data: r.Outputs[ti.Loss]}
				losses = append(losses, l.F32()[0])
				for _, fb := range ti.Feedback {
					in[fb[1]] = r.Outputs[fb[0]]
				}
			}
			if !(losses[9] < losses[0]) {
				t.Fatalf("loss did not fall: %v", losses)
			}
		})
	}
}
