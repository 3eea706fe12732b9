package oracle

import (
	"os/exec"
	"testing"
)

// MILPSolver returns the path of CBC (Debian's coinor-cbc, which `make
// deps` installs), the open MILP solver package bound hands its exact
// model to; it skips the test if there is none (fails it under
// TSPLIT_REQUIRE_ORACLES).
func MILPSolver(t testing.TB) string {
	t.Helper()
	Oracles(t, "CBC")
	p, err := exec.LookPath("cbc")
	if err != nil {
		skipf(t, "no cbc on PATH (%v); it needs Debian's coinor-cbc", err)
	}
	return p
}
