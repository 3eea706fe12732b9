package passes

import (
	"fmt"
	"sort"
	"strings"
)

// Policy parameters. A policy that has tunables (TFLMS's n_tensors, lb,
// ub, …) declares them here, next to its registration, so that every
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

// policyParamSet is what a policy declared: its parameters and a check
// of a whole parameter map (values and how they combine, e.g. lb ≤ ub).
type policyParamSet struct {
	specs []ParamSpec
	check func(map[string]string) error
}

var policyParams = map[string]policyParamSet{}

// RegisterPolicyParams declares the parameters a policy accepts. check
// validates a map whose names are all declared ones (nil: any value is
// accepted); it should be the policy's own parser, so that what the
// front end accepts is exactly what the policy will run with.
// Declaring a policy twice or a name twice panics (a programming error,
// like RegisterPolicy's duplicates).
func RegisterPolicyParams(policy string, check func(map[string]string) error, specs ...ParamSpec) {
	if _, dup := policyParams[policy]; dup {
		panic("passes: duplicate parameter declaration for policy " + policy)
	}
	seen := map[string]bool{}
	for _, s := range specs {
		if s.Name == "" || seen[s.Name] || strings.ContainsAny(s.Name, "=, ") {
			panic(fmt.Sprintf("passes: policy %s: bad or duplicate parameter name %q", policy, s.Name))
		}
		seen[s.Name] = true
	}
	policyParams[policy] = policyParamSet{specs: specs, check: check}
}

// PolicyParamSpecs returns the parameters the named policy declares, in
// declaration order ("" is tsplit; nil: the policy takes none).
func PolicyParamSpecs(policy string) []ParamSpec {
	return policyParams[policyName(policy)].specs
}

// policyParamNames is the comma-separated list of a policy's parameter
// names, for error messages.
func policyParamNames(policy string) string {
	var names []string
	for _, s := range PolicyParamSpecs(policy) {
		names = append(names, s.Name)
	}
	return strings.Join(names, ", ")
}

// unknownParamError is the error for a name the policy does not declare.
func unknownParamError(policy, name string) error {
	policy = policyName(policy)
	if len(PolicyParamSpecs(policy)) == 0 {
		return fmt.Errorf("policy %s takes no parameters, got %q", policy, name)
	}
	return fmt.Errorf("policy %s: unknown parameter %q (accepted: %s)", policy, name, policyParamNames(policy))
}

// CheckPolicyParams validates parameters for the named policy: every
// name must be one the policy declares, and the policy's own check must
// accept the values. Names are checked in sorted order, so the error for
// several bad names is always the same one. The policy itself must be
// registered (LookupPolicy).
func CheckPolicyParams(policy string, params map[string]string) error {
	if _, err := LookupPolicy(policy); err != nil {
		return err
	}
	if len(params) == 0 {
		return nil
	}
	set := policyParams[policyName(policy)]
	names := make([]string, 0, len(params))
	for k := range params {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		known := false
		for _, s := range set.specs {
			known = known || s.Name == k
		}
		if !known {
			return unknownParamError(policy, k)
		}
	}
	if set.check != nil {
		return set.check(params)
	}
	return nil
}

// ParsePolicyParams reads NAME=VALUE items as given on a command line:
// each item may hold several, comma-separated ("lb=2,ub=8"). Names and
// values are trimmed; an empty name, an item without '=' or a name given
// twice is an error (a repeated name is more likely a mistake than an
// override). It does not check the names against a policy
// (CheckPolicyParams does).
func ParsePolicyParams(items []string) (map[string]string, error) {
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
