// Package passes holds tsplit's compiler passes and analyses, one per
// file with its test beside it, and the pipeline that runs them.
//
// A pass is a value (Pass) with a name, a doc string, the analyses it
// requires and a Run function. Analyses return typed results that the
// driver caches until a transforming pass invalidates them. The whole
// compiler is the Pipeline table in pipeline.go; Order lists the
// "a before b" constraints with their reasons, and a test checks them.
// With State.Check set, ir.Verify runs after every pass, so a broken
// pass fails where it broke.
package passes
