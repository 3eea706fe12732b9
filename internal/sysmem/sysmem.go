package sysmem

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"strings"
)

// Available is the bytes of memory a new allocation can use without
// swapping: /proc/meminfo's MemAvailable, lowered to what the process's
// cgroup (v2) still allows when it sets a limit. ok is false where
// neither can be read (another system): callers then skip the check.
func Available() (n int64, ok bool) {
	n, ok = memAvailable("/proc/meminfo")
	if !ok {
		n, ok = sysinfoFree()
	}
	if left, limited := cgroupLeft("/sys/fs/cgroup"); limited && (!ok || left < n) {
		n, ok = left, true
	}
	return n, ok
}

// memAvailable reads the MemAvailable line (in KiB) of a meminfo file.
func memAvailable(path string) (int64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 2 && f[0] == "MemAvailable:" {
			kib, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil || kib < 0 {
				return 0, false
			}
			return kib << 10, true
		}
	}
	return 0, false
}

// cgroupLeft is memory.max − memory.current of a cgroup v2 folder, when
// memory.max sets a limit.
func cgroupLeft(dir string) (int64, bool) {
	read := func(name string) (int64, bool) {
		b, err := os.ReadFile(dir + "/" + name)
		if err != nil {
			return 0, false
		}
		n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		return n, err == nil && n >= 0
	}
	limit, ok := read("memory.max") // "max" (no limit) does not parse
	if !ok {
		return 0, false
	}
	used, _ := read("memory.current")
	return max(limit-used, 0), true
}
