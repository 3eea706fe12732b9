package autodiff

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tsplit/tsplit/ir"
	"github.com/tsplit/tsplit/ir/irtest"
	"github.com/tsplit/tsplit/kernels"
)

// gradCase is one gradient check: build makes a float64 graph from
// graph inputs and returns the inputs to differentiate and the outputs.
// The check forms loss = Σ_k ReduceSum(out_k · r_k) with fixed random
// r_k, differentiates it, and compares every analytic gradient element
// (or up to maxElems of them) with a central finite difference.
type gradCase struct {
	name  string
	build func(b *irtest.B) (wrt, outs []*ir.Value)
	// feeds gives non-differentiable inputs (indices, masks).
	feeds map[string]*kernels.Tensor
	// lo, hi bound the random input values (default -1, 1).
	lo, hi float64
	tol    float64 // default 1e-6
}

const maxElems = 48

func f64Tensor(shape ir.Shape, vals []float64) *kernels.Tensor {
	t, _ := kernels.NewTensor(ir.Double, shape)
	copy(t.F64(), vals)
	return t
}

func i64Tensor(shape ir.Shape, vals []int64) *kernels.Tensor {
	t, _ := kernels.NewTensor(ir.Int64, shape)
	copy(t.I64(), vals)
	return t
}

func randVals(rng *rand.Rand, n int, lo, hi float64) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = lo + (hi-lo)*rng.Float64()
	}
	return out
}

func constF64(shape ir.Shape, vals []float64) *ir.Tensor {
	raw := make([]byte, 8*len(vals))
	for i, v := range vals {
		binary.LittleEndian.PutUint64(raw[8*i:], math.Float64bits(v))
	}
	return &ir.Tensor{DType: ir.Double, Shape: shape, Raw: raw}
}

func runGradCheck(t *testing.T, c gradCase) {
	t.Helper()
	rng := rand.New(rand.NewPCG(7, uint64(len(c.name))))
	lo, hi := c.lo, c.hi
	if lo == 0 && hi == 0 {
		lo, hi = -1, 1
	}
	tol := c.tol
	if tol == 0 {
		tol = 1e-6
	}
	b := irtest.New(t)
	wrt, outs := c.build(b)
	var loss *ir.Value
	for k, y := range outs {
		n, _ := y.Shape.NumElements()
		r := b.Init(fmt.Sprintf("r%d", k), constF64(y.Shape, randVals(rng, int(n), -1, 1)))
		term := b.Op("ReduceSum", irtest.V(b.Op("Mul", irtest.V(y, r))), irtest.Int("keepdims", 0))
		if loss == nil {
			loss = term
		} else {
			loss = b.Op("Add", irtest.V(loss, term))
		}
	}
	m := b.Return(loss)
	grads, err := Grad(m, loss, wrt)
	if err != nil {
		t.Fatal(err)
	}
	if err := ir.Verify(m); err != nil {
		t.Fatalf("graph with gradients does not verify: %v", err)
	}
	feeds := map[string]*kernels.Tensor{}
	for k, v := range c.feeds {
		feeds[k] = v
	}
	for _, v := range m.Graph.Inputs {
		if _, ok := feeds[v.Name]; ok || v.Kind == ir.KindInit {
			continue
		}
		if v.DType != ir.Double {
			t.Fatalf("input %q (%v) needs a feed", v.Name, v.DType)
		}
		n, _ := v.Shape.NumElements()
		feeds[v.Name] = f64Tensor(v.Shape, randVals(rng, int(n), lo, hi))
	}
	vals, err := kernels.Interpret(m, feeds, 0)
	if err != nil {
		t.Fatal(err)
	}
	lossAt := func() float64 {
		vs, err := kernels.Interpret(m, feeds, 0)
		if err != nil {
			t.Fatal(err)
		}
		return vs[loss.ID].F64()[0]
	}
	for i, x := range wrt {
		if grads[i] == nil {
			t.Fatalf("no gradient for %q", x.Name)
		}
		ana := vals[grads[i].ID].F64()
		data := feeds[x.Name].F64()
		idx := rng.Perm(len(data))
		if len(idx) > maxElems {
			idx = idx[:maxElems]
		}
		for _, e := range idx {
			orig := data[e]
			h := 1e-6 * math.Max(1, math.Abs(orig))
			data[e] = orig + h
			fp := lossAt()
			data[e] = orig - h
			fm := lossAt()
			data[e] = orig
			num := (fp - fm) / (2 * h)
			if d := math.Abs(num - ana[e]); d > tol*math.Max(1, math.Abs(num)) {
				t.Errorf("d loss / d %s[%d]: analytic %.9g, numeric %.9g (diff %.3g)", x.Name, e, ana[e], num, d)
			}
		}
	}
}

func runGradChecks(t *testing.T, cases []gradCase) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { runGradCheck(t, c) })
	}
}
