package policy

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/tsplit/tsplit/ir"
	"github.com/tsplit/tsplit/passes"
)

// TFLMS (Le et al., "TFLMS: Large Model Support in TensorFlow by Graph
// Rewriting", §4–5): every tensor a forward op produces and a backward op
// consumes is swapped — the first n_tensors of them in breadth-first
// order from the graph inputs — with one fused swap-out per tensor and a
// swap-in per backward consumer (one per tensor with fuse_swapins). The
// swap-in's start is a control edge from an op chosen between lb and ub
// ops before the consumer (direct_order, Alg. 1) or, going lb..ub levels
// down the forward ops from the producer, from the backward consumer of
// such a forward op (chain_rule, Alg. 2); the op must reach the consumer.
// The swaps do not depend on the budget: if the rewritten step does not
// fit, the policy fails.
//
// Parameters (Options.PolicyParams): n_tensors (-1: all, the default),
// lb (1), ub (10000), ctrld_strategy ("chain_rule" or "direct_order",
// default chain_rule), fuse_swapins (false).
//
// Mapping to this IR: TF's topological levels are positions of the
// schedule; a control edge g → swap-in is a SwapIn placed right after g
// (Trigger = position of g + 1), so lb = 1 (g just before the consumer)
// is the latest swap-in, as in TFLMS. A control op must also come after
// the swap-out and in the backward pass; when none qualifies TFLMS adds
// no control edge and its swap-in runs right after the swap-out, which
// saves nothing, so the tensor is left resident here. A crossing value
// that a hoisted backward op derives from a forward tensor (see fmaps)
// stands for that tensor and counts as one of the n_tensors.

// tflmsParamSpecs are the parameters the tflms policy declares.
var tflmsParamSpecs = []ParamSpec{
	{"n_tensors", "how many tensors to swap, in breadth-first order from the inputs (-1: all, the default)"},
	{"lb", "lower bound of the control-op distance before the consumer (default 1: the latest swap-in)"},
	{"ub", "upper bound of the control-op distance (default 10000)"},
	{"ctrld_strategy", "how the control op is found: chain_rule (default) or direct_order"},
	{"fuse_swapins", "one swap-in per tensor for all its backward consumers (true/false, default false)"},
}

// tflmsParams are the TFLMS parameters of Table 2 this policy honours.
type tflmsParams struct {
	NTensors    int    // -1: every reachable tensor
	LB, UB      int    // lower and upper bound of the control-op distance
	Strategy    string // "chain_rule" or "direct_order"
	FuseSwapins bool
}

// parseTFLMSParams reads the tflms policy parameters.
func parseTFLMSParams(m map[string]string) (tflmsParams, error) {
	p := tflmsParams{NTensors: -1, LB: 1, UB: 10000, Strategy: "chain_rule"}
	for k, v := range m {
		var err error
		switch k {
		case "n_tensors":
			p.NTensors, err = strconv.Atoi(v)
		case "lb":
			p.LB, err = strconv.Atoi(v)
		case "ub":
			p.UB, err = strconv.Atoi(v)
		case "ctrld_strategy":
			p.Strategy = strings.ReplaceAll(v, "-", "_")
			if p.Strategy != "chain_rule" && p.Strategy != "direct_order" {
				err = fmt.Errorf("want chain_rule or direct_order")
			}
		case "fuse_swapins":
			p.FuseSwapins, err = strconv.ParseBool(v)
		default:
			return p, fmt.Errorf("policy tflms: unknown parameter %q (accepted: %s)", k, paramNames(tflmsParamSpecs))
		}
		if err != nil {
			return p, fmt.Errorf("policy tflms: parameter %s=%q: %v", k, v, err)
		}
	}
	switch {
	case p.NTensors == 0:
		return p, fmt.Errorf("policy tflms: n_tensors=0 turns swapping off")
	case p.NTensors < -1:
		return p, fmt.Errorf("policy tflms: n_tensors must be -1 (all) or positive, got %d", p.NTensors)
	case p.LB < 1 || p.UB < p.LB:
		return p, fmt.Errorf("policy tflms: want 1 ≤ lb ≤ ub, got lb=%d ub=%d", p.LB, p.UB)
	}
	return p, nil
}

// tflms is one round of the TFLMS rewrite.
type tflms struct {
	f *fmaps
	p tflmsParams
	// derived maps a forward value to the crossing values derived from it.
	derived map[ir.ValueID][]*ir.Value
}

// tensors lists the crossing values in breadth-first order of their
// forward producers from the graph inputs, each with its source op f1
// (the forward op whose output it is or derives from).
func (t *tflms) tensors() (vs []*ir.Value, src []*ir.Op) {
	f := t.f
	byOrigin := t.derived
	done := map[ir.ValueID]bool{}
	take := func(o *ir.Value, f1 *ir.Op) {
		for _, c := range byOrigin[o.ID] {
			if !done[c.ID] {
				done[c.ID] = true
				vs = append(vs, c)
				src = append(src, f1)
			}
		}
	}
	fwd := func(op *ir.Op) bool { return op.Phase == ir.Forward && ir.CopyOf(op) == ir.NoCopy }
	var queue []*ir.Op
	inQueue := map[ir.OpID]bool{}
	push := func(op *ir.Op) {
		if fwd(op) && !inQueue[op.ID] {
			inQueue[op.ID] = true
			queue = append(queue, op)
		}
	}
	// Seeds: the forward readers of the graph inputs, in schedule order.
	for _, op := range f.order {
		for _, v := range op.Inputs() {
			if v != nil && v.Kind == ir.KindInput && fwd(op) {
				take(v, op)
				push(op)
				break
			}
		}
	}
	for len(queue) > 0 {
		op := queue[0]
		queue = queue[1:]
		var next []*ir.Op
		for _, v := range op.Outputs() {
			if v == nil {
				continue
			}
			take(v, op)
			for _, u := range v.Uses() {
				next = append(next, u.Op)
			}
		}
		sort.SliceStable(next, func(i, j int) bool { return f.pos[next[i].ID] < f.pos[next[j].ID] })
		for _, n := range next {
			push(n)
		}
	}
	return vs, src
}

// ancestors marks the ops after position lo from which the op at
// position q is reachable (q included).
func (t *tflms) ancestors(q, lo int) map[ir.OpID]bool {
	f := t.f
	out := map[ir.OpID]bool{}
	stack := []*ir.Op{f.order[q]}
	out[f.order[q].ID] = true
	for len(stack) > 0 {
		op := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, v := range op.Inputs() {
			if v == nil || v.Def == nil || out[v.Def.ID] || f.pos[v.Def.ID] <= lo {
				continue
			}
			out[v.Def.ID] = true
			stack = append(stack, v.Def)
		}
	}
	return out
}

// directOrder is TFLMS Alg. 1: the first op lb..ub positions before f2
// that reaches f2. a is the swap-out point: the control op must follow it.
func (t *tflms) directOrder(f1 *ir.Op, f2, a int) int {
	f := t.f
	l := max(f2-t.p.UB+1, f.pos[f1.ID], a, f.turn)
	reach := t.ancestors(f2, l)
	for i := t.p.LB; i <= t.p.UB; i++ {
		k := f2 - i
		if k <= l {
			return -1
		}
		if reach[f.order[k].ID] {
			return k
		}
	}
	return -1
}

// chainRule is TFLMS Alg. 2: breadth-first down the forward ops from f1;
// at levels lb..ub, a backward consumer g of a level's op with
// f1 < g < f2 that reaches f2 (the earliest such g here, where TFLMS
// takes any). A backward consumer of op s reads one of s's outputs or a
// crossing value derived from one (after the turn, past the swap-out).
func (t *tflms) chainRule(f1 *ir.Op, f2, a int) int {
	f := t.f
	lb, ub := t.p.LB, t.p.UB
	lo := max(f.pos[f1.ID], a, f.turn)
	reach := t.ancestors(f2, lo)
	s1 := []*ir.Op{f1}
	var s2 []*ir.Op
	inS2 := map[ir.OpID]bool{}
	closed := map[ir.OpID]bool{}
	for len(s1) > 0 {
		if ub == 0 || lb > ub {
			return -1
		}
		s := s1[0]
		s1 = s1[1:]
		var outs, bwd []*ir.Op
		for _, v := range s.Outputs() {
			if v == nil {
				continue
			}
			for _, u := range v.Uses() {
				outs = append(outs, u.Op)
				bwd = append(bwd, u.Op)
			}
			// The backward ops of s read what hoisted ops derived from
			// its outputs (see fmaps): they are s's backward consumers.
			for _, d := range t.derived[v.ID] {
				for _, u := range d.Uses() {
					bwd = append(bwd, u.Op)
				}
			}
		}
		if lb <= 0 {
			best := -1
			for _, g := range bwd {
				p := f.pos[g.ID]
				if g.Phase == ir.Backward && p > lo && p < f2 && reach[g.ID] && (best < 0 || p < best) {
					best = p
				}
			}
			if best >= 0 {
				return best
			}
		}
		sort.SliceStable(outs, func(i, j int) bool { return f.pos[outs[i].ID] < f.pos[outs[j].ID] })
		for _, g := range outs {
			if g.Phase == ir.Forward && ir.CopyOf(g) == ir.NoCopy && !closed[g.ID] && !inS2[g.ID] {
				inS2[g.ID] = true
				s2 = append(s2, g)
			}
		}
		closed[s.ID] = true
		if len(s1) == 0 {
			lb--
			ub--
			s1, s2 = s2, nil
			inS2 = map[ir.OpID]bool{}
		}
	}
	return -1
}

// control returns the control op position for the swap-in of a value
// evicted after a and consumed at f2 (-1: none).
func (t *tflms) control(f1 *ir.Op, f2, a int) int {
	if t.p.Strategy == "direct_order" {
		return t.directOrder(f1, f2, a)
	}
	return t.chainRule(f1, f2, a)
}

func tflmsPolicy(c *Context) (*passes.Plan, error) {
	p, err := parseTFLMSParams(c.Opts.PolicyParams)
	if err != nil {
		return nil, err
	}
	if c.Round > 0 {
		return nil, staticRound(c, "tflms", fmt.Sprintf("swaps its tensors (n_tensors=%d, lb=%d, ub=%d, %s)", p.NTensors, p.LB, p.UB, p.Strategy))
	}
	f, err := newFmaps(c)
	if err != nil {
		return nil, fmt.Errorf("policy tflms: %w", err)
	}
	t := &tflms{f: f, p: p, derived: map[ir.ValueID][]*ir.Value{}}
	for _, v := range f.crossing() {
		for _, o := range f.origins(v) {
			t.derived[o.ID] = append(t.derived[o.ID], v)
		}
	}
	e := &evictor{f: f}
	vs, src := t.tensors()
	if p.NTensors > 0 && len(vs) > p.NTensors {
		vs, src = vs[:p.NTensors], src[:p.NTensors]
	}
	plan := &passes.Plan{Budget: c.Budget}
	at := max(c.Mem.PeakAt, 0)
	for k, v := range vs {
		a, _ := f.gap(v)
		var consumers []int
		for _, u := range f.uses[v.ID] {
			if u > f.turn && (len(consumers) == 0 || consumers[len(consumers)-1] != u) {
				consumers = append(consumers, u)
			}
		}
		if p.FuseSwapins {
			consumers = consumers[:1]
		}
		// Later consumers first: each decision's swap-in then serves only
		// the consumers from its own up to the next one's.
		for j := len(consumers) - 1; j >= 0; j-- {
			f2 := consumers[j]
			g := t.control(src[k], f2, a)
			if g < 0 || g+1 < a+2 {
				continue
			}
			d := &passes.Decision{Value: v, Option: passes.Swap, After: a, Before: f2, Trigger: min(g+1, f2), At: at, DeltaM: f.bytes(v)}
			d.DeltaT = e.swapCost(v, a, d.Trigger, f2)
			plan.Decisions = append(plan.Decisions, d)
		}
	}
	if len(plan.Decisions) == 0 {
		return nil, fmt.Errorf("policy tflms: no tensor can be swapped with lb=%d, ub=%d and %s: no control op qualifies", p.LB, p.UB, p.Strategy)
	}
	return plan, nil
}
