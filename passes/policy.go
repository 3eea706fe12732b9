package passes

import (
	"fmt"
	"sort"
	"strings"

	"github.com/tsplit/tsplit/ir"
	"github.com/tsplit/tsplit/memory"
	"github.com/tsplit/tsplit/profile"
)

// PolicyContext is what a memory policy sees in one planning round: the
// current graph in its final order, its exact memory model, its
// simulated timeline, the device and the target budget.
type PolicyContext struct {
	State  *State
	G      *ir.Graph
	Mem    *memory.Model
	TL     *Timeline
	Prof   *profile.Profile
	Budget int64
	// Round counts planning rounds (0 first). A policy that decides
	// everything at once returns an empty plan in later rounds, which
	// ends planning with an error if the budget is still exceeded.
	Round int
}

// PolicyFunc makes one round's plan. Every policy's plan goes through
// the same insertion, layout, emission and runtime (DESIGN decision 6).
type PolicyFunc func(c *PolicyContext) (*Plan, error)

var policies = map[string]PolicyFunc{}

// RegisterPolicy adds a policy. Duplicates panic.
func RegisterPolicy(name string, f PolicyFunc) {
	if _, dup := policies[name]; dup {
		panic("passes: duplicate policy " + name)
	}
	policies[name] = f
}

// ownTriggers marks the policies whose swap-in triggers are part of the
// algorithm (vDNN's layer-synchronous swap-ins, TFLMS's lb/ub control
// ops, Capuchin's in-triggers, moDNN's Eq. 4, SuperNeurons' one-ahead
// prefetch): a pass that re-places triggers (ControlEdges) should leave
// their plans alone.
var ownTriggers = map[string]bool{}

// PolicyPlacesTriggers reports whether the named policy places its own
// swap-in triggers.
func PolicyPlacesTriggers(name string) bool { return ownTriggers[policyName(name)] }

// Policies lists the registered policy names.
func Policies() []string {
	var out []string
	for n := range policies {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func policyName(n string) string {
	if n == "" {
		return "tsplit"
	}
	return n
}

// LookupPolicy returns a policy by name ("" is tsplit).
func LookupPolicy(name string) (PolicyFunc, error) {
	f, ok := policies[policyName(name)]
	if !ok {
		return nil, fmt.Errorf("unknown policy %q (known: %s)", name, strings.Join(Policies(), ", "))
	}
	return f, nil
}

func init() {
	// tsplit: Alg. 2 with swap, recompute and split.
	RegisterPolicy("tsplit", func(c *PolicyContext) (*Plan, error) {
		pl := NewPlanner(c.G, c.Mem, c.TL, c.Prof, c.Budget)
		pl.Allowed[Swap] = !c.State.Opts.NoSwap
		pl.Allowed[Recompute] = !c.State.Opts.NoRecompute
		pl.SplitChoices = c.State.splitChoices()
		return pl.Run()
	})
	// tsplit-nosplit: Alg. 2 with swap and recompute only.
	RegisterPolicy("tsplit-nosplit", func(c *PolicyContext) (*Plan, error) {
		pl := NewPlanner(c.G, c.Mem, c.TL, c.Prof, c.Budget)
		pl.Allowed[Swap] = !c.State.Opts.NoSwap
		pl.Allowed[Recompute] = !c.State.Opts.NoRecompute
		return pl.Run()
	})
	// base keeps every feature map (what TensorFlow and PyTorch do): it
	// never plans anything, so it fits only when the graph already does.
	RegisterPolicy("base", func(c *PolicyContext) (*Plan, error) {
		return nil, fmt.Errorf("policy base keeps every tensor: the graph peaks at %d bytes, over the budget of %d", c.Mem.Peak, c.Budget)
	})
}

// splitChoices tells the split planner how each op of the current graph
// may be split: the FT-compatible splits (FTCompat) that InsertSplit can
// realize — every concat or sum split of a deterministic op. A random op
// (Dropout in training) is never split: its micro-ops would draw other
// masks and the planned step would differ from the unplanned one.
func (s *State) splitChoices() func(op *ir.Op) []DimMap {
	if s.splitFn != nil {
		return s.splitFn
	}
	var ft *FTResult // computed on first use: most rounds never split
	return func(op *ir.Op) []DimMap {
		if ft == nil {
			ft = AnalyzeFT(s.Model)
		}
		var out []DimMap
		for _, d := range ft.Of(op) {
			if !d.Random {
				out = append(out, d)
			}
		}
		return out
	}
}
