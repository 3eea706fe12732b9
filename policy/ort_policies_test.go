package policy

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/tsplit/tsplit/backend"
	"github.com/tsplit/tsplit/compiler"
	"github.com/tsplit/tsplit/internal/onnxtest"
	"github.com/tsplit/tsplit/internal/oracle"
	"github.com/tsplit/tsplit/internal/plantest"
	"github.com/tsplit/tsplit/ir"
)

// ONNX Runtime runs the plan of every policy: the planned file must mean
// what the unplanned training step means in any runtime, every output
// included (the loss, every gradient, the BatchNormalization running
// statistics). A recomputed training-mode BatchNormalization used to
// update the running statistics a second time in ONNX Runtime (issue 12
// item 2).

// ortSplitRelTol bounds the difference between the planned and the
// unplanned step where the plan splits: micro-ops sum in another order
// (float32 reassociation, a few ulps of an output's largest value).
const ortSplitRelTol = 1e-5

// ortFallback are the budgets, as fractions of the unplanned peak, a
// policy that cannot fit the case's own budget (0) is planned at
// instead, in turn.
var ortFallback = []float64{0, 0.65, 0.8}

// ortCase is a model whose training step (optimizer "none") every
// policy plans into half its unplanned peak.
type ortCase struct {
	name  string
	batch int64
	// step builds the training step.
	step func(t *testing.T) *ir.Model
	// integration cases take minutes (oracle.Integration).
	integration bool
	// longFallback: the fallback budgets (ortFallback) only in the
	// long tier.
	longFallback bool
	// also plans with a policy at another fraction of the peak, where
	// half of it does not fit but the plan recomputes what matters.
	also []alsoPlan
}

type alsoPlan struct {
	policy string
	frac   float64
}

// zooORTCase is a CI-sized zoo family.
func zooORTCase(family string, batch int64) ortCase {
	return ortCase{name: "zoo-" + family, batch: batch, step: func(t *testing.T) *ir.Model {
		return plantest.Step(t, family, batch, accGrads)
	}}
}

// torchORTCase is a PyTorch export (testdata/torch), its Dropout
// ratios set to 0: ONNX Runtime draws other masks at every run.
func torchORTCase(name string, batch int64, also ...alsoPlan) ortCase {
	return ortCase{name: "torch-" + name, batch: batch, integration: true, also: also, step: func(t *testing.T) *ir.Model {
		path := oracle.TorchModel(t, name)
		mp, err := compiler.ReadModelProto(path)
		if err != nil {
			t.Fatal(err)
		}
		onnxtest.ZeroDropoutRatios(t, mp)
		m, err := compiler.FromProto(mp, filepath.Dir(path), compiler.Options{Batch: batch})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := compiler.BuildTrainingStep(m, accGrads); err != nil {
			t.Fatal(err)
		}
		return m
	}}
}

// TestORTRunsEveryPolicysPlan plans each case with every policy at 50 %
// of its unplanned peak, has ONNX Runtime (optimisations off) run the
// planned file and the unplanned step on the same inputs, and compares
// every output: bit-exact, or within ortSplitRelTol where the plan splits.
// A policy that cannot fit the budget is logged; tsplit must fit every
// case. densenet121 is also planned by checkpoint at 75 %, where its √n
// recomputation (121 training-mode BatchNormalization clones at batch 2)
// fits. The CI-sized resnet18 (batch normalization) runs in the default
// tier; bert-base and the PyTorch exports in the integration tier.
func TestORTRunsEveryPolicysPlan(t *testing.T) {
	// Batches where activations, not the weights and their gradients,
	// make most of the peak, so that half of it can be fitted.
	cases := []ortCase{
		zooORTCase("resnet18", 64),
		zooORTCase("vgg16", 64),
		zooORTCase("resnet50", 64),
		zooORTCase("inception", 32),
		zooORTCase("bert-base", 32),
		torchORTCase("mobilenet_v2", 2),
		torchORTCase("densenet121", 2, alsoPlan{"checkpoint", 0.75}),
		torchORTCase("resnet18", 8),
		torchORTCase("transformer_nodrop", 16),
	}
	for i := 1; i <= 4; i++ {
		cases[i].integration = true
	}
	cases[6].longFallback, cases[7].longFallback = true, true // densenet121, resnet18
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.integration {
				oracle.Integration(t, c.name+" planned by every policy in ONNX Runtime")
			}
			ortEveryPolicy(t, c)
		})
	}
}

func ortEveryPolicy(t *testing.T, c ortCase) {
	base := c.step(t)
	dir := t.TempDir()
	basePath := filepath.Join(dir, "train.onnx")
	if err := backend.WriteFile(base, basePath); err != nil {
		t.Fatal(err)
	}
	in := plantest.Inputs(t, base)
	feeds := map[string]*oracle.Tensor{}
	for _, v := range base.Graph.Inputs {
		if data, ok := in[v.Name]; ok {
			feeds[v.Name] = &oracle.Tensor{Type: accTensorTypes[v.DType], Dims: v.Shape.Clone(), Data: data}
		}
	}
	want := oracle.ORTRun(t, basePath, feeds, true)
	wb := map[string][]byte{}
	for n, x := range want {
		wb[n] = x.Data
	}
	peak := plantest.Peak(t, base)
	budget := peak / 2
	type run struct {
		policy string
		budget int64
	}
	var runs []run
	for _, name := range Names() {
		runs = append(runs, run{name, budget})
	}
	for _, e := range c.also {
		runs = append(runs, run{e.policy, int64(float64(peak) * e.frac)})
	}
	planned := map[string]bool{}
	for _, ru := range runs {
		name, budget := ru.policy, ru.budget
		t.Run(fmt.Sprintf("%s/%d", name, budget), func(t *testing.T) {
			pol, err := Lookup(name)
			if err != nil {
				t.Fatal(err)
			}
			// A policy that cannot fit half the peak is planned at the
			// next larger fraction it fits, so that ONNX Runtime runs a
			// plan of every policy that evicts anything (base, which
			// never does, fits only the whole peak).
			var m *ir.Model
			var res *Result
			fallback := ortFallback
			if c.longFallback && !oracle.LongOn() {
				// Minutes of ONNX Runtime (resnet18 b8: ~20 s a plan).
				fallback = fallback[:1]
			}
			for _, frac := range fallback {
				b := budget
				if frac > 0 {
					b = int64(float64(peak) * frac)
				}
				m = c.step(t)
				res, err = Plan(context.Background(), m, pol, Options{Budget: b})
				if err == nil {
					if b != budget {
						t.Logf("%s fits %s into %.0f %% of its peak (%d bytes), not half", name, c.name, 100*frac, b)
					}
					break
				}
				if !budgetFailure(err, res) {
					t.Fatal(err)
				}
				t.Logf("%s does not fit %s into %d bytes: %v", name, c.name, b, err)
				if name == "base" {
					return
				}
			}
			if err != nil {
				return
			}
			planned[name] = true
			path := filepath.Join(dir, fmt.Sprintf("%s-%d.onnx", name, budget))
			if err := backend.WriteFile(m, path); err != nil {
				t.Fatal(err)
			}
			got := oracle.ORTRun(t, path, feeds, true)
			gb := map[string][]byte{}
			for n, x := range got {
				gb[n] = x.Data
			}
			r := res.Report
			rel := 0.0
			if r.Split > 0 {
				rel = ortSplitRelTol
			}
			same, worst := accCompare(t, base, wb, gb, rel)
			t.Logf("%s: %d of %d outputs bit-exact (largest relative difference %.3g; %d swapped, %d recomputed, %d split)",
				name, same, len(got), worst, r.Swapped, r.Recomputed, r.Split)
		})
	}
	if !planned["tsplit"] {
		t.Errorf("tsplit did not fit %s into half its peak (%d bytes): the case checks too little", c.name, budget)
	}
	for _, e := range c.also {
		if !planned[e.policy] {
			t.Errorf("%s did not fit %s into %.0f%% of its peak", e.policy, c.name, 100*e.frac)
		}
	}
}
