package passes

import (
	"encoding/json"
	"fmt"

	"github.com/tsplit/tsplit/memory"
)

// PlanKey is the model metadata key of the plan summary (a Report).
const PlanKey = "tsplit.plan"

// Layout gives every tensor and workspace of the final graph a static
// offset in one pool and records it (memory.LayoutKey), with the plan
// summary (PlanKey), in the model's metadata. The pool must fit the
// budget: fragmentation is settled here, before run time.
var Layout = &Pass{
	Name:     "layout",
	Doc:      "static offset of every tensor in one pool no larger than the budget",
	Requires: []*Pass{PlanMemory},
	Run: func(s *State) (any, error) {
		m := s.Model
		if s.Report == nil {
			return nil, fmt.Errorf("layout needs the plan")
		}
		mem, err := memory.Analyze(m.Graph, memory.Options{})
		if err != nil {
			return nil, err
		}
		l := s.layout
		if l == nil {
			l = mem.MakeLayout()
		}
		r := s.Report
		if r != nil && l.Pool > r.Budget {
			return nil, fmt.Errorf("the layout needs a pool of %d bytes for a peak of %d: fragmentation takes it past the budget of %d", l.Pool, mem.Peak, r.Budget)
		}
		if _, err := mem.Placement(l); err != nil {
			return nil, err
		}
		if m.Meta == nil {
			m.Meta = map[string]string{}
		}
		m.Meta[memory.LayoutKey] = l.Encode()
		if r != nil {
			r.Pool = l.Pool
			summary := *r
			summary.Base, summary.Planned = nil, nil // the timelines stay out of the file
			js, _ := json.Marshal(summary)
			m.Meta[PlanKey] = string(js)
		}
		m.Specialized = true
		return l, nil
	},
}

// Pipeline is the whole planning compiler, in order. Order lists the
// constraints between its passes; TestPipelineOrder checks them.
var Pipeline = []*Pass{Schedule, PlanMemory, ControlEdges, Layout}

// Order holds "a must run before b" pairs with the reason.
var Order = []struct {
	Before, After *Pass
	Why           string
}{
	{Schedule, PlanMemory, "the planner's positions, M_i and the cost model are of the final op order"},
	{PlanMemory, ControlEdges, "triggers are placed for the swap-ins the plan inserted"},
	{ControlEdges, Layout, "offsets depend on every tensor's final lifetime, which triggers change"},
}
