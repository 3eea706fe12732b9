// Package units formats byte counts the way every tsplit message, report
// and golden file writes them: "512 B", "1.22 MiB" (binary prefixes, two
// decimals). It is a leaf (standard library only), so the compiler
// passes, the policies and the report format sizes without importing the
// frontend. go-humanize's IBytes writes one decimal ("1.2 MiB"), which
// would change the planner's error messages that golden files pin.
package units
