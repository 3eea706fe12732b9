package autodiff

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/tsplit/tsplit/ir"
	"github.com/tsplit/tsplit/ir/irtest"
)

// scalar64 is a float64 scalar initializer.
func scalar64(b *irtest.B, name string, v float64) *ir.Value {
	return b.Init(name, constF64(ir.Shape{}, []float64{v}))
}

// geluForms builds, from h, the erf-form GELU in each association
// exporters write (PyTorch's nn.GELU, Hugging Face's gelu, the Mul by
// 1/√2 variant).
var geluForms = []struct {
	name  string
	build func(b *irtest.B, x *ir.Value) *ir.Value
}{
	{"torch: Mul(Mul(x, 1+erf(x/√2)), ½)", func(b *irtest.B, x *ir.Value) *ir.Value {
		e := b.Op("Erf", irtest.V(b.Op("Div", irtest.V(x, scalar64(b, "sqrt2", math.Sqrt2)))))
		c := b.Op("Add", irtest.V(e, scalar64(b, "one", 1)))
		return b.Op("Mul", irtest.V(b.Op("Mul", irtest.V(x, c)), scalar64(b, "half", 0.5)))
	}},
	{"hf: Mul(Mul(x, ½), 1+erf(x/√2))", func(b *irtest.B, x *ir.Value) *ir.Value {
		p := b.Op("Mul", irtest.V(x, scalar64(b, "half", 0.5)))
		e := b.Op("Erf", irtest.V(b.Op("Div", irtest.V(x, scalar64(b, "sqrt2", math.Sqrt2)))))
		c := b.Op("Add", irtest.V(scalar64(b, "one", 1), e))
		return b.Op("Mul", irtest.V(p, c))
	}},
	{"Mul(x, Mul(1+erf(x·1/√2), ½))", func(b *irtest.B, x *ir.Value) *ir.Value {
		e := b.Op("Erf", irtest.V(b.Op("Mul", irtest.V(scalar64(b, "rsqrt2", 1/math.Sqrt2), x))))
		c := b.Op("Add", irtest.V(e, scalar64(b, "one", 1)))
		return b.Op("Mul", irtest.V(x, b.Op("Mul", irtest.V(c, scalar64(b, "half", 0.5)))))
	}},
}

// TestGeluUnitSavesOnlyItsInput differentiates each erf-form GELU inside
// a small MLP (h = x·W1, y = gelu(h), out = y·W2): the gradient is
// right (finite differences), and the backward pass keeps h and, inside
// the GELU, nothing else, as PyTorch's GeluBackward does (y is kept for
// W2's gradient, as in PyTorch).
func TestGeluUnitSavesOnlyItsInput(t *testing.T) {
	for _, f := range geluForms {
		t.Run(f.name, func(t *testing.T) {
			var h, y *ir.Value // the GELU's input and output
			build := func(b *irtest.B) ([]*ir.Value, []*ir.Value) {
				x := b.Input("x", ir.Double, 3, 4)
				w1 := b.Input("w1", ir.Double, 4, 5)
				w2 := b.Input("w2", ir.Double, 5, 2)
				h = b.Op("MatMul", irtest.V(x, w1))
				y = f.build(b, h)
				return irtest.V(w1, w2), irtest.V(b.Op("MatMul", irtest.V(y, w2)))
			}
			runGradCheck(t, gradCase{name: "gelu unit " + f.name, build: build, lo: -2, hi: 2})

			b := irtest.New(t)
			wrt, outs := build(b)
			loss := b.Op("ReduceSum", irtest.V(outs[0]), irtest.Int("keepdims", 0))
			m := b.Return(loss)
			n := len(m.Graph.Order())
			if _, err := Grad(m, loss, wrt); err != nil {
				t.Fatal(err)
			}
			var inGelu []string
			for _, v := range SavedForBackward(m.Graph) {
				if v.Kind != ir.KindOp || v.Def.Phase != ir.Forward || v == y {
					continue // y is the next MatMul's input, kept for its weight gradient
				}
				switch v.Def.Type {
				case "Div", "Erf", "Add", "Mul":
					inGelu = append(inGelu, v.Def.Type+" "+v.Name)
				}
			}
			if len(inGelu) > 0 {
				t.Errorf("the backward pass keeps values inside the GELU: %v", inGelu)
			}
			if !slices.Contains(SavedForBackward(m.Graph), h) {
				t.Errorf("the backward pass does not keep the GELU's input")
			}
			for _, op := range m.Graph.Order()[n:] {
				if op.Type == "Erf" && op.Phase != ir.Backward {
					t.Errorf("%s is not a backward op", op.Describe())
				}
			}
		})
	}
}

// TestGeluUnitNeedsPrivateInterior: a GELU whose erf is also read
// outside it is differentiated op by op (the outside reader needs the
// interior gradients), and the gradient is still right.
func TestGeluUnitNeedsPrivateInterior(t *testing.T) {
	build := func(b *irtest.B) ([]*ir.Value, []*ir.Value) {
		x := b.Input("x", ir.Double, 3, 4)
		e := b.Op("Erf", irtest.V(b.Op("Div", irtest.V(x, scalar64(b, "sqrt2", math.Sqrt2)))))
		c := b.Op("Add", irtest.V(e, scalar64(b, "one", 1)))
		y := b.Op("Mul", irtest.V(b.Op("Mul", irtest.V(x, c)), scalar64(b, "half", 0.5)))
		return irtest.V(x), irtest.V(y, e)
	}
	b := irtest.New(t)
	_, outs := build(b)
	b.Return(outs...)
	if u := geluUnits(b.G); len(u) != 0 {
		t.Errorf("a GELU whose Erf is a graph output was taken as a unit")
	}
	runGradCheck(t, gradCase{name: "gelu shared erf", build: build, lo: -2, hi: 2})
}

// TestIdentityDropoutKeepsNoCopy: the backward pass of ReLU → Dropout
// (ratio 0, training) → MatMul reads the ReLU output for both the ReLU
// and the MatMul gradients, not the Dropout's copy of it (PyTorch's
// dropout(p=0) returns its input: one saved tensor). A Dropout with a
// real ratio keeps its boolean mask for its own gradient; its output is
// kept for the MatMul's weight gradient, as PyTorch's Linear keeps its
// input.
func TestIdentityDropoutKeepsNoCopy(t *testing.T) {
	for _, c := range []struct {
		name     string
		ratio    float64
		training bool
		want     []string // forward outputs backward keeps: op type and output index
	}{
		{"ratio 0, training", 0, true, []string{"Relu:0"}},
		{"ratio 0.5, not training", 0.5, false, []string{"Relu:0"}},
		{"ratio 0.5, training", 0.5, true, []string{"Dropout:0", "Dropout:1", "Relu:0"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := irtest.New(t)
			b.M.Opsets[""] = 13
			x := b.Input("x", ir.Float, 4, 8)
			w1 := b.Input("w1", ir.Float, 8, 8)
			w2 := b.Input("w2", ir.Float, 8, 3)
			r := b.Op("Relu", irtest.V(b.Op("MatMul", irtest.V(x, w1))))
			ratio := b.Init("ratio", ir.TensorFromFloat64s(ir.Float, ir.Shape{}, []float64{c.ratio}))
			train := b.Init("training", &ir.Tensor{DType: ir.Bool, Shape: ir.Shape{}, Raw: []byte{boolByte(c.training)}})
			d := b.OpN("Dropout", 2, irtest.V(r, ratio, train))
			y := b.Op("MatMul", irtest.V(d[0], w2))
			loss := b.Op("ReduceSum", irtest.V(y), irtest.Int("keepdims", 0))
			m := b.Return(loss)
			if _, err := Grad(m, loss, irtest.V(w1, w2)); err != nil {
				t.Fatal(err)
			}
			if err := ir.Verify(m); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, v := range SavedForBackward(m.Graph) {
				if v.Kind == ir.KindOp && v.Def.Phase == ir.Forward && v.Def.Type != "MatMul" {
					got = append(got, fmt.Sprintf("%s:%d", v.Def.Type, v.DefIndex))
					if v == d[1] && v.DType != ir.Bool {
						t.Errorf("the Dropout's mask is %v, want bool", v.DType)
					}
				}
			}
			slices.Sort(got)
			if !slices.Equal(got, c.want) {
				t.Errorf("backward keeps outputs of %v, want %v", got, c.want)
			}
		})
	}
}

func boolByte(v bool) byte {
	if v {
		return 1
	}
	return 0
}
