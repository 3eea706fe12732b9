package sysmem

import "syscall"

// sysinfoFree is free plus buffer memory from sysinfo(2), for a Linux
// without /proc mounted.
func sysinfoFree() (int64, bool) {
	var si syscall.Sysinfo_t
	if err := syscall.Sysinfo(&si); err != nil {
		return 0, false
	}
	unit := max(int64(si.Unit), 1)
	return (int64(si.Freeram) + int64(si.Bufferram)) * unit, true
}
