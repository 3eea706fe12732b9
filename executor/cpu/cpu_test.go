package cpu

import (
	"strings"
	"testing"

	"github.com/tsplit/tsplit/internal/sysmem"
)

// A pool larger than the machine's available memory is an error, not
// Go's fatal out-of-memory (issue 12, item 10: --run --memory 60GiB on a
// 24 GiB machine died that way).
func TestPoolBeyondMachine(t *testing.T) {
	defer func(f func() (int64, bool)) { available = f }(available)
	available = func() (int64, bool) { return 1 << 20, true }
	if _, err := New(2 << 20); err == nil || !strings.Contains(err.Error(), "more than the 1.0 MiB this machine has available") {
		t.Fatalf("a 2 MiB pool on a 1 MiB machine: %v", err)
	}
	if _, err := New(1 << 19); err != nil {
		t.Fatalf("a 512 KiB pool on a 1 MiB machine: %v", err)
	}
	// A run checks its pool with its host memory the same way.
	if err := CheckMemory(3<<19, "the pool with the run's host memory"); err == nil || !strings.Contains(err.Error(), "the pool with the run's host memory of 1.5 MiB") {
		t.Fatalf("1.5 MiB on a 1 MiB machine: %v", err)
	}
	available = func() (int64, bool) { return 0, false }
	if _, err := New(1 << 19); err != nil {
		t.Fatalf("no answer from the machine: the pool is not checked, got %v", err)
	}
	// The real machine: a pool past what it has is refused before any
	// allocation.
	available = sysmem.Available
	if avail, ok := available(); ok && avail+1<<30 <= MaxPool {
		if _, err := New(avail + 1<<30); err == nil {
			t.Fatalf("a pool of %d bytes with %d available was allocated", avail+1<<30, avail)
		}
	}
}
