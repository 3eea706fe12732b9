package autodiff

import "github.com/tsplit/tsplit/ir"

// Ops of the registry that have no gradient rule, each opted out of the
// gradient slot with the reason. A loss that depends on a parameter
// through one of them fails with ErrNoRule rather than train with a
// wrong gradient. Writing a rule for one means deleting its line here
// (the registry panics on a rule for an opted-out op).

func init() {
	for _, g := range []struct {
		why   string
		types []string
	}{
		{"not written: no model tsplit trains uses Lp pooling", []string{"LpPool", "GlobalLpPool"}},
		{"not written: no supported model trains through it yet", []string{"InstanceNormalization"}},
		// Smooth, but no model tsplit trains uses them; they would join
		// rules_elementwise.go.
		{"not written: unused", []string{"Sin", "Cos", "Tan", "Asin", "Acos", "Atan",
			"Sinh", "Cosh", "Asinh", "Acosh", "Atanh"}},
		{"not written", []string{"Elu", "Selu", "Celu", "ThresholdedRelu", "Mish", "Softsign"}},
		{"not written (needs the slope's broadcast gradient)", []string{"PRelu"}},
		// Their derivative is 0 almost everywhere. They have no rule so
		// that a loss depending on a parameter only through them is
		// reported instead of silently getting no update.
		{"zero almost everywhere", []string{"Floor", "Ceil", "Round", "Sign"}},
		{"zero almost everywhere (one-hot output)", []string{"Hardmax"}},
		{"not written (x: 1; y: −trunc or −floor of x/y)", []string{"Mod"}},
		{"indices have none; the values input's gradient is not written", []string{"OneHot"}},
		{"not written (data: dy masked at the written positions; updates: GatherElements of dy)", []string{"ScatterElements"}},
		{"not written (data: dy masked at the written slices; updates: GatherND of dy)", []string{"ScatterND"}},
		{"not written (sign(x)·dy)", []string{"ReduceL1"}},
		{"not written (dy / Σx)", []string{"ReduceLogSum"}},
		{"not written (dy · exp(x − y))", []string{"ReduceLogSumExp"}},
	} {
		for _, t := range g.types {
			rules.OptOut("", t, g.why)
		}
	}
	// The planner inserts transfers after the backward graph exists.
	for _, t := range []string{"SwapOut", "SwapIn"} {
		rules.OptOut(ir.Domain, t, "a planner op, inserted after differentiation")
	}
}
