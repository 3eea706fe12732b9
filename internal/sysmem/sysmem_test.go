package sysmem

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

func TestMemAvailable(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "meminfo")
	os.WriteFile(path, []byte("MemTotal:       24683620 kB\nMemFree:        18619996 kB\nMemAvailable:   2048 kB\n"), 0o644)
	if n, ok := memAvailable(path); !ok || n != 2048<<10 {
		t.Fatalf("memAvailable = %d, %v; want %d", n, ok, 2048<<10)
	}
	os.WriteFile(path, []byte("MemTotal: 1 kB\n"), 0o644)
	if _, ok := memAvailable(path); ok {
		t.Fatal("a meminfo without MemAvailable was read")
	}
}

func TestCgroupLeft(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "memory.max"), []byte("max\n"), 0o644)
	if _, limited := cgroupLeft(dir); limited {
		t.Fatal(`memory.max "max" read as a limit`)
	}
	os.WriteFile(filepath.Join(dir, "memory.max"), []byte("1000\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "memory.current"), []byte("300\n"), 0o644)
	if n, limited := cgroupLeft(dir); !limited || n != 700 {
		t.Fatalf("cgroupLeft = %d, %v; want 700", n, limited)
	}
}

// On Linux the machine's answer is there and plausible.
func TestAvailable(t *testing.T) {
	n, ok := Available()
	if runtime.GOOS != "linux" {
		t.Skip("only Linux is known to answer")
	}
	if !ok || n <= 0 {
		t.Fatalf("Available = %d, %v", n, ok)
	}
}
