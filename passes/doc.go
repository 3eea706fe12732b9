// Package passes holds tsplit's compiler passes and analyses, one per
// file with its test beside it, and the pipeline that runs them.
//
// A pass is a value (Pass) with a name, a doc string, the analyses it
// requires and a Run function. Analyses return typed results that the
// driver caches until a transforming pass invalidates them. The whole
// compiler is the Pipeline table in layout.go; Order lists the
// "a before b" constraints with their reasons, and a test checks them.
// With State.Check set, ir.Verify runs after every pass, so a broken
// pass fails where it broke.
//
// Planning ("plan", planpass.go) runs in rounds, and each round's steps
// are passes too — plan/round-N/decide, insert, liveness, simulate,
// fit — so the manager times them (State.Timings, WriteTimings: tsplitc
// -d time), checks them and dumps after them (State.DumpAfter: tsplitc
// -d dump-after=plan/round-2/insert, or =insert for every round).
//
// This package is the mechanism: it realizes a plan (Plan: evict a
// tensor by swap or recompute, split an op) the same way whatever chose
// it. What to evict is a memory policy's choice; package policy holds
// them, and this package sees them only as Policy values, so it never
// imports that package.
package passes
