package policy

import (
	"fmt"

	"github.com/tsplit/tsplit/ir"
	"github.com/tsplit/tsplit/passes"
)

// vDNN (Rhu et al., MICRO'16) as TSPLIT §VI evaluates it: every feature
// map of the chosen layers is swapped out after its forward use and
// swapped back in right before its backward use, layer-synchronously
// (Trigger == Before: no prefetch), whatever the budget. vdnn-conv swaps
// the inputs of the convolutions, vdnn-all every feature map the
// backward pass reads. Decided once, in round 0; if the rewritten step
// still exceeds the budget the policy fails, as vDNN does.

// vdnnTargets lists the crossing values vDNN swaps: with convOnly, those
// derived from a forward convolution's data input (its feature map; a
// graph input counts), otherwise every crossing feature map.
func vdnnTargets(f *fmaps, convOnly bool) []*ir.Value {
	convIn := map[ir.ValueID]bool{}
	for _, op := range f.order {
		if op.Phase == ir.Forward && op.Domain == "" && op.Type == "Conv" && op.Input(0) != nil {
			convIn[op.Input(0).ID] = true
		}
	}
	var out []*ir.Value
	for _, v := range f.crossing() {
		if !convOnly {
			out = append(out, v)
			continue
		}
		for _, o := range f.origins(v) {
			if convIn[o.ID] {
				out = append(out, v)
				break
			}
		}
	}
	return out
}

func vdnnPlan(c *Context, name string, convOnly bool) (*passes.Plan, error) {
	what := "swaps every feature map the backward pass reads"
	if convOnly {
		what = "swaps the input of every convolution"
	}
	if c.Round > 0 {
		return nil, staticRound(c, name, what)
	}
	f, err := newFmaps(c)
	if err != nil {
		return nil, fmt.Errorf("policy %s: %w", name, err)
	}
	vs := vdnnTargets(f, convOnly)
	if len(vs) == 0 {
		if convOnly {
			return nil, fmt.Errorf("policy %s: the model has no convolution whose input the backward pass reads: nothing to swap", name)
		}
		return nil, fmt.Errorf("policy %s: no feature map crosses from the forward to the backward pass: nothing to swap", name)
	}
	ts := make([]evictTarget, len(vs))
	for i, v := range vs {
		ts[i] = evictTarget{v, passes.Swap}
	}
	e := &evictor{f: f, at: max(c.Mem.PeakAt, 0)}
	return &passes.Plan{Budget: c.Budget, Decisions: e.plan(ts)}, nil
}
