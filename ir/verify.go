package ir

import (
	"errors"
	"fmt"
	"slices"
)

// Verify checks every invariant of the model's graph:
//   - IDs are dense and consistent, names unique;
//   - every value is defined exactly once (input, initializer, or one
//     op output) and its Def/DefIndex agree with the op;
//   - values are defined before use in the op order;
//   - use lists equal a recount of op inputs;
//   - every op with a schema has the arity and attribute types of the
//     op table, and its outputs have the dtypes and shapes its inference
//     rule gives; ops without a schema have typed, shaped outputs;
//   - every value has a valid dtype and a shape whose byte size is
//     representable.
//
// It returns all problems found, joined, so one run shows everything.
func Verify(m *Model) error {
	g := m.Graph
	var errs []error
	bad := func(format string, args ...any) {
		if len(errs) < 50 {
			errs = append(errs, fmt.Errorf(format, args...))
		}
	}

	defined := make([]bool, len(g.values))
	// define marks v defined as what (of op, if not nil: described only
	// in a message, as describing every op is a tenth of planning time).
	define := func(v *Value, what string, op *Op) {
		if v == nil {
			return
		}
		if op != nil && (int(v.ID) >= len(g.values) || g.values[v.ID] != v || defined[v.ID]) {
			what += " " + op.Describe()
		}
		if int(v.ID) >= len(g.values) || g.values[v.ID] != v {
			bad("ir: %s %q has ID %d that the graph does not own", what, v.Name, v.ID)
			return
		}
		if defined[v.ID] {
			bad("ir: value %q is defined more than once (again as %s)", v.Name, what)
		}
		defined[v.ID] = true
	}
	for _, v := range g.Inputs {
		if v.Kind == KindOp {
			bad("ir: graph input %q is an op result", v.Name)
		}
		define(v, "graph input", nil)
	}
	for _, v := range g.Inits {
		if v.Kind != KindInit {
			bad("ir: initializer %q has kind %v", v.Name, v.Kind)
		}
		if v.Const == nil && v.Load == nil {
			bad("ir: initializer %q has no data", v.Name)
		}
		if slices.Contains(g.Inputs, v) {
			defined[v.ID] = false // listed as input too: one definition
		}
		define(v, "initializer", nil)
	}

	uses := make([][]Use, len(g.values))
	seenOp := make([]bool, len(g.ops))
	for pos, op := range g.order {
		if int(op.ID) >= len(g.ops) || g.ops[op.ID] != op || op.g != g {
			bad("ir: op at position %d (%s) is not owned by the graph", pos, op.Describe())
			continue
		}
		if seenOp[op.ID] {
			bad("ir: %s appears twice in the order", op.Describe())
		}
		seenOp[op.ID] = true
		for i, v := range op.inputs {
			if v == nil {
				continue
			}
			if int(v.ID) >= len(g.values) || g.values[v.ID] != v {
				bad("ir: %s input %d refers to a value the graph does not own", op.Describe(), i)
				continue
			}
			if !defined[v.ID] {
				bad("ir: %s uses %q before it is defined", op.Describe(), v.Name)
			}
			uses[v.ID] = append(uses[v.ID], Use{op, i})
		}
		for i, v := range op.outputs {
			if v == nil {
				continue
			}
			if v.Kind != KindOp || v.Def != op || v.DefIndex != i {
				bad("ir: output %d of %s (%q) does not point back to it", i, op.Describe(), v.Name)
			}
			define(v, "output of", op)
		}
		verifyOp(m, op, bad)
		verifyPlacement(op, bad)
	}
	for id, op := range g.ops {
		if op != nil && !seenOp[id] {
			bad("ir: %s is not in the order", op.Describe())
		}
	}
	for name, n := range g.opNames {
		if n > 1 {
			bad("ir: %d ops are named %q (node names must be unique)", n, name)
		}
	}

	for _, v := range g.values {
		if v == nil {
			continue
		}
		if !defined[v.ID] {
			bad("ir: value %q is never defined", v.Name)
		}
		if v.Name != "" && g.byName[v.Name] != v {
			bad("ir: name index is wrong for %q", v.Name)
		}
		if !sameUses(v.uses, uses[v.ID]) {
			bad("ir: use list of %q has %d entries, recount gives %d", v.Name, len(v.uses), len(uses[v.ID]))
		}
		if !v.DType.Valid() {
			bad("ir: value %q has no valid dtype (%v)", v.Name, v.DType)
		}
		if _, err := v.Shape.Bytes(v.DType); err != nil {
			bad("ir: value %q: %v", v.Name, err)
		}
	}
	for i, v := range g.Outputs {
		if v == nil || int(v.ID) >= len(g.values) || g.values[v.ID] != v {
			bad("ir: graph output %d is not a value of the graph", i)
		}
	}
	return errors.Join(errs...)
}

// verifyPlacement checks that device ops read device tensors and host
// ops (swap-ins and host-placed ops) read host tensors.
func verifyPlacement(op *Op, bad func(string, ...any)) {
	k := CopyOf(op)
	wantHost := k == ToDevice || k == OnHost
	for i, v := range op.inputs {
		if v == nil || (k == OnHost && v.Kind == KindInit) {
			continue // host ops may read constants from the model
		}
		if (k == ToDevice || k == OnHost) && (v.Kind == KindInit || (v.Def == nil && v.Param)) {
			continue // an offloaded weight, kept on the host all step
		}
		host := v.Def != nil && (CopyOf(v.Def) == ToHost || CopyOf(v.Def) == OnHost)
		if host != wantHost {
			where := "device"
			if host {
				where = "host"
			}
			bad("ir: %s input %d (%q) is a %s tensor", op.Describe(), i, v.Name, where)
		}
	}
}

func verifyOp(m *Model, op *Op, bad func(string, ...any)) {
	s := LookupSchema(op.Domain, op.Type)
	if s == nil {
		return // opaque op: its outputs' types came from value_info
	}
	dts, shapes, _, err := Infer(op, m.Opset(op.Domain))
	if err != nil {
		bad("ir: %v", err)
		return
	}
	for i, v := range op.outputs {
		if v == nil {
			continue
		}
		if v.DType != dts[i] || !v.Shape.Equal(shapes[i]) {
			bad("ir: %s output %q is %v%v, inference gives %v%v", op.Describe(), v.Name, v.DType, v.Shape, dts[i], shapes[i])
		}
	}
}

// Opset returns the operator-set version imported for a domain. The
// default domain falls back to the newest version tsplit knows.
func (m *Model) Opset(domain string) int64 {
	domain = normDomain(domain)
	if v, ok := m.Opsets[domain]; ok {
		return v
	}
	if domain == "" {
		return MaxOpset
	}
	return 1
}

// MinOpset and MaxOpset bound the default-domain opsets tsplit reads.
const (
	MinOpset = 11
	MaxOpset = 21
)

func sameUses(a, b []Use) bool {
	if len(a) != len(b) {
		return false
	}
	if len(a) <= 16 {
		// Most values have a few uses: match them pairwise instead of
		// counting in a map (Verify runs after every plan a search
		// makes).
		var matched [16]bool
	next:
		for _, u := range b {
			for i, w := range a {
				if !matched[i] && w == u {
					matched[i] = true
					continue next
				}
			}
			return false
		}
		return true
	}
	count := map[Use]int{}
	for _, u := range a {
		count[u]++
	}
	for _, u := range b {
		count[u]--
		if count[u] < 0 {
			return false
		}
	}
	return true
}
