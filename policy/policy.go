package policy

import (
	"fmt"
	"sort"
	"strings"

	"github.com/tsplit/tsplit/passes"
)

// Policy is a memory policy: what planning asks of it each round
// (passes.Policy: its name, its plan of the round, whether it places its
// own swap-in triggers), the parameters it declares, and whether it
// trains with sub-batches. Policies are values: the CLI or the API looks
// one up by name once (Lookup) and hands the value on.
type Policy interface {
	passes.Policy
	// Params declares the parameters the policy accepts, in the order
	// help text lists them (nil: none).
	Params() []ParamSpec
	// CheckParams validates parameters whose names Params declares, the
	// way the policy will read them (CheckParams, the function, checks
	// the names first).
	CheckParams(params map[string]string) error
	// SubBatches reports whether the policy trains a step that does not
	// fit as sub-batches with gradients accumulated (moDNN): its callers
	// plan through PlanSubBatched.
	SubBatches() bool
}

// Context is what a policy sees in one planning round.
type Context = passes.PolicyContext

// spec is what the policies have in common: a name, traits, parameters
// and the round's planning function.
type spec struct {
	name string
	// ownTriggers: the swap-in triggers are the algorithm's (vDNN's
	// layer-synchronous swap-ins, TFLMS's lb/ub control ops, Capuchin's
	// in-triggers, moDNN's Eq. 4, SuperNeurons' one-ahead prefetch).
	ownTriggers bool
	// subBatches: moDNN's sub-batch selection applies.
	subBatches bool
	params     []ParamSpec
	// order is the op order the policy plans under by default (empty:
	// TSPLIT's depth-first order). The baselines run in a framework,
	// which executes the step in the order it was built: they plan
	// under that order (passes.OrderAsBuilt), as their systems would.
	// TFLMS is the exception: its control edges fix the order the
	// rewritten graph runs in, and it keeps TSPLIT's.
	order passes.OpOrder
	// check validates a parameter map (nil: any value is accepted).
	check func(map[string]string) error
	plan  func(c *Context) (*passes.Plan, error)
}

func (s *spec) Name() string      { return s.name }
func (s *spec) OwnTriggers() bool { return s.ownTriggers }
func (s *spec) DefaultOrder() passes.OpOrder {
	if s.order == passes.OrderAuto {
		return passes.OrderDFS
	}
	return s.order
}
func (s *spec) SubBatches() bool                      { return s.subBatches }
func (s *spec) Params() []ParamSpec                   { return s.params }
func (s *spec) Plan(c *Context) (*passes.Plan, error) { return s.plan(c) }
func (s *spec) CheckParams(params map[string]string) error {
	if s.check == nil {
		return nil
	}
	return s.check(params)
}

// The policies. Each file of this package holds one with the paper it
// follows; the table below is the only list of them.
var (
	// Tsplit is TSPLIT's Alg. 2 with swap, recompute and split.
	Tsplit Policy = &tsplit{spec: spec{name: "tsplit"}, split: true}
	// TsplitNoSplit is Alg. 2 with swap and recompute only.
	TsplitNoSplit Policy = &tsplit{spec: spec{name: "tsplit-nosplit"}}
	// Base keeps every feature map (what TensorFlow and PyTorch do): it
	// never plans anything, so it fits only when the graph already does.
	Base Policy = &spec{name: "base", order: passes.OrderAsBuilt, plan: func(c *Context) (*passes.Plan, error) {
		return nil, fmt.Errorf("policy base keeps every tensor: the graph peaks at %d bytes, over the budget of %d", c.Mem.Peak, c.Budget)
	}}
	VDNNConv     Policy = &spec{name: "vdnn-conv", order: passes.OrderAsBuilt, ownTriggers: true, plan: func(c *Context) (*passes.Plan, error) { return vdnnPlan(c, "vdnn-conv", true) }}
	VDNNAll      Policy = &spec{name: "vdnn-all", order: passes.OrderAsBuilt, ownTriggers: true, plan: func(c *Context) (*passes.Plan, error) { return vdnnPlan(c, "vdnn-all", false) }}
	Checkpoint   Policy = &spec{name: "checkpoint", order: passes.OrderAsBuilt, plan: checkpointPolicy}
	SuperNeurons Policy = &spec{name: "superneurons", order: passes.OrderAsBuilt, ownTriggers: true, plan: superNeuronsPolicy}
	Capuchin     Policy = &spec{name: "capuchin", order: passes.OrderAsBuilt, ownTriggers: true, plan: capuchinPolicy}
	Modnn        Policy = &spec{name: "modnn", ownTriggers: true, subBatches: true, plan: modnnPolicy}
	TFLMS        Policy = &spec{name: "tflms", ownTriggers: true, plan: tflmsPolicy, params: tflmsParamSpecs,
		check: func(m map[string]string) error { _, err := parseTFLMSParams(m); return err }}
)

// table is every policy, by name.
var table = func() map[string]Policy {
	t := map[string]Policy{}
	for _, p := range []Policy{Tsplit, TsplitNoSplit, Base, VDNNConv, VDNNAll, Checkpoint, SuperNeurons, Capuchin, Modnn, TFLMS} {
		if _, dup := t[p.Name()]; dup {
			panic("policy: duplicate policy " + p.Name())
		}
		checkSpecs(p.Name(), p.Params())
		t[p.Name()] = p
	}
	return t
}()

// Names lists the policies' names, sorted.
func Names() []string {
	out := make([]string, 0, len(table))
	for n := range table {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Lookup returns a policy by name ("" is tsplit).
func Lookup(name string) (Policy, error) {
	if name == "" {
		return Tsplit, nil
	}
	p, ok := table[name]
	if !ok {
		return nil, fmt.Errorf("unknown policy %q (known: %s)", name, strings.Join(Names(), ", "))
	}
	return p, nil
}
