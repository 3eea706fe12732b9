// Package opcoverage holds the op registry's coverage test: it imports
// every package that fills a slot of the registry (kernels, autodiff,
// passes, profile) and checks, for every op of ir's registry, that each
// slot is filled, derived from the op's traits, or deliberately opted
// out with a reason, and that the traits agree with what the slot
// fillers do (a view's kernel moves no byte, an in-place kernel gives
// the same result in place, a random kernel reproduces its draws).
//
// `go test ./internal/opcoverage -v` prints the table, one row per op.
//
// Adding an op is then one checklist that this test enforces: the
// schema with its traits (ir/shapes_*.go), the CPU kernel (kernels/),
// the gradient rule (autodiff/), the split rule (passes/ftcompat_rules.go)
// and the cost (profile/costs.go), each either written or opted out.
package opcoverage
