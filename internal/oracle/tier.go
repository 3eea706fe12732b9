package oracle

import (
	"os"
	"testing"
)

// IntegrationEnv turns on the integration tier (any non-empty value).
const IntegrationEnv = "TSPLIT_INTEGRATION"

// Integration skips t unless the integration tier is on. The tier holds
// the end-to-end cases that take minutes of CPU: the CI-sized benchmark
// and the runs of its plans, training steps of the full-size PyTorch
// exports, the 550 MB vgg16. `make test` turns it on (CI runs make
// test); a plain `go test ./...` skips it, and -short always does.
func Integration(t testing.TB, what string) {
	t.Helper()
	if testing.Short() {
		t.Skipf("%s: the integration tier is skipped under -short", what)
	}
	if os.Getenv(IntegrationEnv) == "" {
		t.Skipf("%s: integration tier, run by make test; set %s=1 to run it here", what, IntegrationEnv)
	}
}

// IntegrationOn reports whether the integration tier is on: for a test
// that runs a smaller case in the default tier and the full one in the
// integration tier.
func IntegrationOn() bool {
	return !testing.Short() && os.Getenv(IntegrationEnv) != ""
}

// LongEnv turns on the long tier (any non-empty value): `make
// test-long`.
const LongEnv = "TSPLIT_LONG"

// Long skips t unless the long tier is on. The tier holds the checks
// that take minutes of CPU on their own and would push `make test` past
// its few minutes: the budget sweep of the largest zoo family, the
// exact (MILP) model of the largest case and the runs of the largest
// benchmark plans. They check the same claims
// as their smaller cases in the integration tier, at more sizes.
func Long(t testing.TB, what string) {
	t.Helper()
	if os.Getenv(LongEnv) == "" {
		t.Skipf("%s: long tier, run by make test-long; set %s=1 to run it here", what, LongEnv)
	}
}

// LongOn reports whether the long tier is on.
func LongOn() bool { return os.Getenv(LongEnv) != "" }

// OraclesEnv turns the outside oracles on outside the integration tier
// (any non-empty value): `TSPLIT_ORACLES=1 go test ./pkg` runs a
// package's oracle checks without its integration cases.
const OraclesEnv = "TSPLIT_ORACLES"

// RequireEnv makes a missing oracle an error instead of a skip, and
// turns the oracles on (make test and make test-long set it).
const RequireEnv = "TSPLIT_REQUIRE_ORACLES"

// OraclesOn reports whether tests may use the outside oracles:
// PyTorch and the PyTorch exports, the python onnx package, ONNX
// Runtime, CBC and Chromium. They are on in the integration tier and
// under OraclesEnv or RequireEnv. A plain `go test ./...` leaves them
// off, so the default tier runs the same Go-only checks on every
// machine, whatever is installed, and stays near a minute on two cores
// (issue 10); make test, and so CI, runs every oracle check.
func OraclesOn() bool {
	if testing.Short() {
		return false
	}
	return os.Getenv(IntegrationEnv) != "" || os.Getenv(OraclesEnv) != "" || os.Getenv(RequireEnv) != ""
}

// Oracles skips t unless OraclesOn; what names the oracle the test
// needs. Every helper of this package that reaches an oracle calls it
// first, and so do tests that run one on their own (Chromium).
func Oracles(t testing.TB, what string) {
	t.Helper()
	if !OraclesOn() {
		t.Skipf("%s: an outside oracle, off in a plain go test; make test runs it, or set %s=1", what, OraclesEnv)
	}
}
