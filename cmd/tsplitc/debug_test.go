package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// -d time prints every pass's time, planning's rounds nested under plan,
// to stderr; -d dump-after reaches a round's insertion; an unknown -d is
// a usage error naming both.
func TestDebugFlags(t *testing.T) {
	t.Parallel()
	model := filepath.Join("..", "..", "testdata", "onnx", "resnet18-small.onnx")
	out := filepath.Join(t.TempDir(), "planned.onnx")
	args := []string{model, "--batch", "16", "--memory", "1300KiB", "-o", out}
	_, errs, code := tsplitc(t, append(args, "-d", "time")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"plan/order-dfs/round-1/decide", "plan/order-as-built/round-1/insert", "control-edges", "layout", "total"} {
		if !strings.Contains(errs, want) {
			t.Errorf("-d time lacks %q:\n%s", want, errs)
		}
	}
	_, errs, code = tsplitc(t, append(args, "-d", "dump-after=plan/order-dfs/round-1/insert")...)
	if code != 0 || strings.Count(errs, "# after ") != 1 || !strings.Contains(errs, "# after plan/order-dfs/round-1/insert\n") {
		t.Errorf("exit %d; -d dump-after=plan/order-dfs/round-1/insert wrote:\n%.500s", code, errs)
	}
	_, errs, code = tsplitc(t, append(args, "-d", "trace")...)
	if code != 2 || !strings.Contains(errs, "dump-after=PASS") || !strings.Contains(errs, "time") {
		t.Errorf("-d trace: exit %d, %s", code, errs)
	}
}
