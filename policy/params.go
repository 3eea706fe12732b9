package policy

import (
	"fmt"
	"sort"
	"strings"
)

// Policy parameters. A policy that has tunables (TFLMS's n_tensors, lb,
// ub, …) declares them (Policy.Params), so that every
// front end — the CLI's --policy-param, its help text, the benchmark —
// checks names and values the same way, before any planning, and can
// list what each policy accepts. A policy that declares nothing takes no
// parameters: passing it one is a mistake (a parameter meant for another
// policy, or a typo) that would otherwise be silently ignored.

// ParamSpec is one declared policy parameter.
type ParamSpec struct {
	Name string
	// Doc is one line: what the parameter does, its values and default.
	Doc string
}

// paramNames is the comma-separated list of a policy's parameter
// names, for error messages.
func paramNames(specs []ParamSpec) string {
	var names []string
	for _, s := range specs {
		names = append(names, s.Name)
	}
	return strings.Join(names, ", ")
}

// CheckParams validates parameters for a policy: every name must be one
// the policy declares, and the policy's own check must accept the
// values. Names are checked in sorted order, so the error for several
// bad names is always the same one.
func CheckParams(p Policy, params map[string]string) error {
	if len(params) == 0 {
		return nil
	}
	names := make([]string, 0, len(params))
	for k := range params {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		known := false
		for _, s := range p.Params() {
			known = known || s.Name == k
		}
		if !known {
			if len(p.Params()) == 0 {
				return fmt.Errorf("policy %s takes no parameters, got %q", p.Name(), k)
			}
			return fmt.Errorf("policy %s: unknown parameter %q (accepted: %s)", p.Name(), k, paramNames(p.Params()))
		}
	}
	return p.CheckParams(params)
}

// checkSpecs panics on a badly declared parameter list (a programming
// error, like a duplicate policy name): an empty name, one that could
// not be written NAME=VALUE on a command line, or a name twice.
func checkSpecs(policy string, specs []ParamSpec) {
	seen := map[string]bool{}
	for _, s := range specs {
		if s.Name == "" || seen[s.Name] || strings.ContainsAny(s.Name, "=, ") {
			panic(fmt.Sprintf("policy %s: bad or duplicate parameter name %q", policy, s.Name))
		}
		seen[s.Name] = true
	}
}

// ParseParams reads NAME=VALUE items as given on a command line:
// each item may hold several, comma-separated ("lb=2,ub=8"). Names and
// values are trimmed; an empty name, an item without '=' or a name given
// twice is an error (a repeated name is more likely a mistake than an
// override). It does not check the names against a policy
// (CheckParams does).
func ParseParams(items []string) (map[string]string, error) {
	out := map[string]string{}
	for _, item := range items {
		for _, kv := range strings.Split(item, ",") {
			if strings.TrimSpace(kv) == "" {
				continue
			}
			k, v, ok := strings.Cut(kv, "=")
			k, v = strings.TrimSpace(k), strings.TrimSpace(v)
			if !ok || k == "" {
				return nil, fmt.Errorf("policy parameter %q: want NAME=VALUE", kv)
			}
			if old, dup := out[k]; dup {
				return nil, fmt.Errorf("policy parameter %s given twice (%q and %q)", k, old, v)
			}
			out[k] = v
		}
	}
	return out, nil
}
