// Package sysmem tells how much memory the machine can still give this
// process, so that a pool larger than that is refused with an error
// instead of ending in Go's fatal out-of-memory (which no recover
// catches, and which reads like a crash).
package sysmem
