package bench

import (
	"os"
	"runtime/debug"
	"testing"
)

// TestMain runs the tests with the garbage collector at 400% unless GOGC
// is set: planning allocates heavily, and at the default 100% the
// benchmark tests spent a fifth of their CPU time collecting; 400%
// costs about twice the heap (a few hundred MB).
func TestMain(m *testing.M) {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
	os.Exit(m.Run())
}
