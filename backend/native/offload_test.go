package native

import (
	"context"
	"testing"

	"github.com/tsplit/tsplit/compiler"
	"github.com/tsplit/tsplit/internal/plantest"
	"github.com/tsplit/tsplit/memory"
	"github.com/tsplit/tsplit/policy"
)

// A plan that keeps parameters and Adam's state on the host (budget a
// quarter of that state) lowers to a native plan whose host buffers hold
// them, and runs as the executor runs it.
func TestRoundTripOffloadedState(t *testing.T) {
	m := plantest.Step(t, "resnet18", 2, compiler.TrainOptions{Optimizer: "adam"})
	in := plantest.Inputs(t, m)
	var state int64
	for _, v := range m.Graph.Inits {
		if v.Next != nil {
			state += memory.Align(v.Bytes())
		}
	}
	res, err := policy.Plan(context.Background(), m, policy.Tsplit, policy.Options{Budget: state / 2, Offload: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Report.Offloaded == 0 {
		t.Fatalf("the plan keeps the state on the device (budget %d, state %d)", state/2, state)
	}
	got, l := roundTrip(t, m, in)
	t.Logf("resnet18 b2 adam, budget %d (state %d): %d weights on the host, %d host buffers, pool %d, reach %d",
		state/2, state, res.Report.Offloaded, len(l.Plan.HostBuffers), l.Plan.Pool, got.Reach)
}
