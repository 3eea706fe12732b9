//go:build !linux

package sysmem

// sysinfoFree has no portable equivalent elsewhere: no check.
func sysinfoFree() (int64, bool) { return 0, false }
