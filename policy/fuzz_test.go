package policy

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/tsplit/tsplit/compiler"
	"github.com/tsplit/tsplit/internal/plantest"
	"github.com/tsplit/tsplit/ir"
	"github.com/tsplit/tsplit/ir/irtest"
)

// FuzzPlan plans random training steps at random budgets with every
// policy (issue 12): a small random DAG of convolutions, activations,
// pools, residual adds, channel concats and per-channel scales over an
// image batch, ending in a classifier and cross-entropy. Each plan must
// either fail with an error (never a panic, never an empty message) or
// fit: planned peak and static pool within the budget, the rewritten
// graph verifying after every pass (Check), and the step run on a CPU
// device of exactly the budget giving the unplanned step's outputs —
// bit for bit, or within accRelTol where the plan splits (a split op
// sums in another order).
//
// `make fuzz` runs it for FUZZTIME; `go test` runs the seed corpus.
func FuzzPlan(f *testing.F) {
	// policy, budget (20 + 0.8·b %), batch, channels, image, layers,
	// then two bytes a layer.
	for k := range Names() {
		f.Add([]byte{byte(k), byte(55 + 9*(k%5)), 3, 2, 2, 7, 0, 5, 1, 0, 4, 0, 2, 0, 0, 2, 3, 0, 6, 3, 1, 1, 5, 1})
	}
	f.Add([]byte("tsplit splits what does not fit"))
	f.Fuzz(func(t *testing.T, data []byte) {
		r := &fuzzBytes{b: data}
		pol := Names()[r.intn(len(Names()))]
		frac := 0.2 + 0.8*float64(r.intn(101))/100 // 20 % to 100 % of the peak
		m := fuzzStep(t, r)
		if m == nil {
			return
		}
		if _, err := compiler.BuildTrainingStep(m, compiler.TrainOptions{Optimizer: "sgd"}); err != nil {
			t.Fatalf("training step of a generated model: %v\n%s", err, dumpIR(m))
		}
		in := plantest.Inputs(t, m)
		peak := plantest.Peak(t, m)
		budget := int64(frac * float64(peak))
		p, err := Lookup(pol)
		if err != nil {
			t.Fatal(err)
		}
		planned := m.Clone()
		res, err := Plan(context.Background(), planned, p, Options{Budget: budget, Check: true})
		what := fmt.Sprintf("%s at %d bytes (%.0f %% of %d)", pol, budget, 100*frac, peak)
		if err != nil {
			if err.Error() == "" {
				t.Fatalf("%s: an error without a message", what)
			}
			t.Logf("%s: %v", what, err)
			return // a clean error is an answer: the budget may be impossible
		}
		rep := res.Report
		if rep.Peak > budget || rep.Pool > budget {
			t.Fatalf("%s: planned peak %d, pool %d over the budget\n%s", what, rep.Peak, rep.Pool, dumpIR(m))
		}
		want := plantest.RunUnplanned(t, m, in)
		got, _ := plantest.RunPlanned(t, res.Model, budget, in)
		if got.HighWater > budget {
			t.Fatalf("%s: measured high-water %d over the budget", what, got.HighWater)
		}
		tol := 0.0
		if rep.Split > 0 {
			tol = accRelTol
		}
		for _, v := range m.Graph.Outputs {
			if err := plantest.SameOutput(m.Graph, v.Name, got.Outputs[v.Name], want.Outputs[v.Name], tol); err != nil {
				t.Errorf("%s (%d swapped, %d recomputed, %d split): %v", what, rep.Swapped, rep.Recomputed, rep.Split, err)
			}
		}
		t.Logf("%s: %d swapped, %d recomputed, %d split; outputs equal", what, rep.Swapped, rep.Recomputed, rep.Split)
	})
}

// fuzzStep builds a random forward model from r: an input image batch
// [N, C, H, W], 1 to 8 layers, global average pool, a Gemm classifier.
// It returns nil where the bytes give nothing to train.
func fuzzStep(t *testing.T, r *fuzzBytes) *ir.Model {
	b := irtest.New(t)
	n, c, hw := int64(1+r.intn(4)), int64(1+r.intn(4)), int64(8+4*r.intn(3))
	x := b.Input("x", ir.Float, n, c, hw, hw)
	vals := []*ir.Value{x}
	w := 0
	weight := func(dims ...int64) *ir.Value {
		w++
		return plantest.Weight(b, fmt.Sprintf("w%d", w), dims...)
	}
	layers := 1 + r.intn(8)
	for range layers {
		// A chain (every layer reads the one before, so every weight
		// reaches the loss), with adds and concats reading an earlier
		// value too.
		v := vals[len(vals)-1]
		sh := v.Shape
		var y *ir.Value
		switch r.intn(7) {
		case 0: // 3×3 convolution, same padding
			co := int64(1 + r.intn(6))
			y = b.Op("Conv", irtest.V(v, weight(co, sh[1], 3, 3), weight(co)), irtest.Ints("pads", 1, 1, 1, 1))
		case 1:
			y = b.Op([]string{"Relu", "Sigmoid", "Tanh"}[r.intn(3)], irtest.V(v))
		case 2: // 2×2 max pool, where the image is even and at least 2
			if sh[2] < 2 || sh[2]%2 != 0 {
				continue
			}
			y = b.Op("MaxPool", irtest.V(v), irtest.Ints("kernel_shape", 2, 2), irtest.Ints("strides", 2, 2))
		case 3: // residual add of an earlier value of the same shape
			k := slices.IndexFunc(vals, func(u *ir.Value) bool { return u != v && slices.Equal(u.Shape, sh) })
			if k < 0 {
				continue
			}
			y = b.Op("Add", irtest.V(v, vals[k]))
		case 4: // channel concat with an earlier value of the same image size
			k := slices.IndexFunc(vals, func(u *ir.Value) bool { return u.Shape[2] == sh[2] })
			y = b.Op("Concat", irtest.V(v, vals[k]), irtest.Int("axis", 1))
		case 5: // per-channel scale
			y = b.Op("Mul", irtest.V(v, weight(1, sh[1], 1, 1)))
		case 6: // 1×1 convolution with a stride of 2
			co := int64(1 + r.intn(6))
			y = b.Op("Conv", irtest.V(v, weight(co, sh[1], 1, 1)), irtest.Ints("strides", 2, 2))
		}
		vals = append(vals, y)
	}
	last := vals[len(vals)-1]
	if last == x {
		return nil
	}
	g := b.Op("GlobalAveragePool", irtest.V(last))
	fl := b.Op("Flatten", irtest.V(g))
	classes := int64(2 + r.intn(4))
	logits := b.Op("Gemm", irtest.V(fl, weight(classes, last.Shape[1]), weight(classes)), irtest.Int("transB", 1))
	return b.Return(logits)
}

// fuzzBytes reads small integers from fuzz input, zeros once it is
// spent.
type fuzzBytes struct {
	b []byte
	i int
}

func (r *fuzzBytes) intn(n int) int {
	if r.i >= len(r.b) {
		return 0
	}
	v := int(r.b[r.i])
	r.i++
	return v % n
}

func dumpIR(m *ir.Model) string {
	var b strings.Builder
	if err := ir.Dump(&b, m.Graph); err != nil {
		return err.Error()
	}
	return b.String()
}
