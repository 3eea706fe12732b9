package native

import (
	"bytes"
	"context"
	"testing"

	"github.com/tsplit/tsplit/compiler"
	"github.com/tsplit/tsplit/executor"
	"github.com/tsplit/tsplit/executor/cpu"
	"github.com/tsplit/tsplit/internal/plantest"
	"github.com/tsplit/tsplit/ir"
	"github.com/tsplit/tsplit/memory"
	"github.com/tsplit/tsplit/policy"
)

// roundTrip lowers m, writes and reads the plan back, runs it on a CPU
// device of exactly its pool and compares every output with the
// executor's run of m (bit-exact: the same kernels on the same inputs
// in the same order). It returns the run and the loaded plan.
func roundTrip(t *testing.T, m *ir.Model, in map[string][]byte) (*executor.ProgramResult, *Loaded) {
	t.Helper()
	p, err := Lower(m)
	if err != nil {
		t.Fatal(err)
	}
	data, err := Encode(p)
	if err != nil {
		t.Fatal(err)
	}
	again, err := Lower(m)
	if err != nil {
		t.Fatal(err)
	}
	if data2, _ := Encode(again); !bytes.Equal(data, data2) {
		t.Fatal("lowering the same model twice gives different bytes")
	}
	l, err := Load(data, "test.tsplan")
	if err != nil {
		t.Fatal(err)
	}
	dev, err := cpu.New(l.Program.Pool)
	if err != nil {
		t.Fatal(err)
	}
	got, err := l.Program.Run(context.Background(), dev, executor.ProgramRun{Inputs: in})
	if err != nil {
		t.Fatal(err)
	}
	var want *executor.Result
	if _, planned := m.Meta[memory.LayoutKey]; planned {
		want, _ = plantest.RunPlanned(t, m, p.Pool, in)
	} else {
		want = plantest.RunUnplanned(t, m, in)
	}
	for _, v := range m.Graph.Outputs {
		if !bytes.Equal(got.Outputs[v.Name], want.Outputs[v.Name]) {
			t.Errorf("output %q differs between the native plan and the executor", v.Name)
		}
	}
	if got.Reach != p.Pool {
		t.Errorf("the run reached pool byte %d, the plan's pool is %d", got.Reach, p.Pool)
	}
	return got, l
}

func TestRoundTripPlanned(t *testing.T) {
	for _, fam := range []string{"resnet18", "vgg16", "gpt"} {
		t.Run(fam, func(t *testing.T) {
			m := plantest.Step(t, fam, 4, compiler.TrainOptions{Optimizer: "sgd"})
			in := plantest.Inputs(t, m)
			peak := plantest.Peak(t, m)
			if _, err := policy.Plan(context.Background(), m, policy.Tsplit, policy.Options{Budget: peak * 6 / 10}); err != nil {
				t.Fatal(err)
			}
			res, l := roundTrip(t, m, in)
			var cmds int
			for _, s := range l.Plan.Streams {
				cmds += len(s.Commands)
			}
			t.Logf("%s: %d ops, %d commands, %d events, pool %d, reach %d, %v", fam, len(l.Plan.Ops), cmds, l.Plan.Events, l.Plan.Pool, res.Reach, res.Duration)
		})
	}
}
