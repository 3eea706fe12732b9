package policy

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/tsplit/tsplit/compiler"
	"github.com/tsplit/tsplit/executor"
	"github.com/tsplit/tsplit/executor/cpu"
	"github.com/tsplit/tsplit/ir"
	"github.com/tsplit/tsplit/memory"
	"github.com/tsplit/tsplit/passes"
	"github.com/tsplit/tsplit/profile"
	"github.com/tsplit/tsplit/zoo"
)

// baselines are the policies of this file's tests.
var baselines = []string{"vdnn-conv", "vdnn-all", "checkpoint", "superneurons", "capuchin", "modnn", "tflms"}

// zooStep builds the training step of a small zoo model at batch.
func zooStep(t testing.TB, name string, batch int64) *ir.Model {
	t.Helper()
	mp, err := zoo.Build(name, zoo.SmallConfig(name))
	if err != nil {
		t.Fatal(err)
	}
	m, err := compiler.FromProto(mp, "", compiler.Options{Batch: batch})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := compiler.BuildTrainingStep(m, compiler.TrainOptions{}); err != nil {
		t.Fatal(err)
	}
	return m
}

// policyCtx schedules m and returns round 0's context at budget (0:
// just below the base peak).
func policyCtx(t testing.TB, m *ir.Model, opts *passes.Options, budget int64) *Context {
	t.Helper()
	if opts == nil {
		opts = &passes.Options{}
	}
	s := passes.NewState(m, opts)
	if err := s.Run(passes.Schedule); err != nil {
		t.Fatal(err)
	}
	mem, err := memory.Analyze(m.Graph, memory.Options{})
	if err != nil {
		t.Fatal(err)
	}
	p := opts.Profile
	if p == nil {
		if p, err = profile.Lookup("titan-rtx"); err != nil {
			t.Fatal(err)
		}
	}
	if budget == 0 {
		budget = mem.Peak - 1
	}
	return &Context{Model: m, G: m.Graph, Mem: mem, TL: passes.Simulate(m.Graph, mem, p), Prof: p, Budget: budget, Opts: opts}
}

// lookup is Lookup in a test.
func lookup(t testing.TB, name string) Policy {
	t.Helper()
	p, err := Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// planWith runs a policy's round 0.
func planWith(t testing.TB, name string, c *Context) *passes.Plan {
	t.Helper()
	pol, err := Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := pol.Plan(c)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return plan
}

// stepInputs makes seeded inputs for a training step.
func stepInputs(m *ir.Model) map[string][]byte {
	in, err := compiler.RandomInputs(m, 11)
	if err != nil {
		panic(err)
	}
	return in
}

// runStep runs a step on a CPU device with a pool of pool bytes, at the
// model's planned layout when it has one (as tsplitc --run does).
func runStep(t testing.TB, m *ir.Model, pool int64, in map[string][]byte) *executor.Result {
	t.Helper()
	xopts, _, err := executor.PlannedOptions(m)
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
	r, err := x.Run(in)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// zooBudgets are budgets (fractions of the base peak of resnet50 small
// at batch 32) each policy reaches.
var zooBudgets = map[string]float64{
	"vdnn-conv": 0.8, "vdnn-all": 0.6, "checkpoint": 0.65, "superneurons": 0.65,
	"capuchin": 0.6, "modnn": 0.6, "tflms": 0.6,
}

// Every baseline's plan on resnet50 (small) verifies, fits the memory
// model, and runs on the CPU device capped at the budget with a measured
// high-water mark within it and the same results as the unplanned step.
func TestBaselinesOnZoo(t *testing.T) {
	if testing.Short() {
		t.Skip("plans and runs resnet50 seven times")
	}
	const batch = 32
	base := zooStep(t, "resnet50", batch)
	bc := policyCtx(t, base, nil, 0)
	in := stepInputs(base)
	want := runStep(t, base, bc.Mem.Need(), in)
	for _, name := range baselines {
		t.Run(name, func(t *testing.T) {
			m := zooStep(t, "resnet50", batch)
			budget := int64(zooBudgets[name] * float64(bc.Mem.Peak))
			s, err := Plan(context.Background(), m, lookup(t, name), Options{Budget: budget})
			if err != nil {
				t.Fatal(err)
			}
			if err := ir.Verify(m); err != nil {
				t.Fatal(err)
			}
			mem, err := memory.Analyze(m.Graph, memory.Options{})
			if err != nil {
				t.Fatal(err)
			}
			r := s.Report
			if mem.Peak > budget || r.Pool > budget {
				t.Fatalf("peak %d, pool %d over the budget %d", mem.Peak, r.Pool, budget)
			}
			for _, d := range r.Decisions {
				if v := base.Graph.Lookup(d.Tensor); v == nil || v.Kind == ir.KindInit || v.Param {
					t.Errorf("%s evicted %q, a weight", name, d.Tensor)
				}
			}
			got := runStep(t, m, budget, in)
			if got.HighWater > budget {
				t.Fatalf("measured high-water %d over the budget %d", got.HighWater, budget)
			}
			for k, w := range want.Outputs {
				if !bytes.Equal(got.Outputs[k], w) {
					t.Errorf("output %q differs from the unplanned step", k)
				}
			}
			t.Logf("budget %d (%.0f%% of %d): peak %d, pool %d, measured %d; %d swapped, %d recomputed, %d rounds; step %.2f ms (base %.2f)",
				budget, 100*zooBudgets[name], bc.Mem.Peak, mem.Peak, r.Pool, got.HighWater, r.Swapped, r.Recomputed, r.Rounds, r.Time*1e3, r.BaseTime*1e3)
		})
	}
}

// Every baseline fails with an error, not a panic, when the budget is out
// of its reach.
func TestBaselinesFailClearly(t *testing.T) {
	for _, name := range baselines {
		m := zooStep(t, "resnet18", 4)
		_, err := Plan(context.Background(), m, lookup(t, name), Options{Budget: 256 << 10})
		if err == nil {
			t.Fatalf("%s fits 256 KiB", name)
		}
		var ie *passes.InfeasibleError
		if !strings.Contains(err.Error(), name) && !errors.As(err, &ie) {
			t.Errorf("%s: the error does not name the policy: %v", name, err)
		}
		t.Logf("%s: %v", name, err)
	}
}
