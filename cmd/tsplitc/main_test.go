package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/tsplit/tsplit/compiler"
	"github.com/tsplit/tsplit/internal/exit"
	ot "github.com/tsplit/tsplit/internal/onnxtest"
	"github.com/tsplit/tsplit/policy"
)

// TestMain lets tests run the real command in a child process: the
// child sees TSPLITC_MAIN=1 and runs main with the given arguments, so
// exit statuses and stderr are the ones a user gets.
// Every test here runs in parallel with the others: most of their time
// is child processes, and this package is the longest of go test
// ./..., so run one test at a time it would be the last one running,
// alone on one core.
func TestMain(m *testing.M) {
	switch os.Getenv("TSPLITC_MAIN") {
	case "1":
		main()
		os.Exit(0)
	case "test-commands":
		// main's own code path, with the commands hardening_test.go
		// needs to reach the ends a user should never see.
		root := newRootCmd()
		root.AddCommand(testCommands()...)
		os.Exit(exit.Guard(os.Stderr, os.Args, func() int { return execute(root, os.Args, os.Stderr) }))
	}
	os.Exit(m.Run())
}

func tsplitc(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "TSPLITC_MAIN=1")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	if strings.Contains(errb.String(), "panic") || strings.Contains(errb.String(), "goroutine ") {
		t.Fatalf("tsplitc panicked:\n%s", errb.String())
	}
	return out.String(), errb.String(), code
}

func TestInspect(t *testing.T) {
	t.Parallel()
	path := ot.Write(t, t.TempDir(), "m.onnx", ot.ReluChain())
	out, errs, code := tsplitc(t, "inspect", path, "--batch", "8")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"parameters   4 (16 B)", "bound dims   batch=8", "shapes       all static", "Relu", "largest tensors"} {
		if !strings.Contains(out, want) {
			t.Errorf("inspect output lacks %q:\n%s", want, out)
		}
	}
}

func TestBadInputExitStatus(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bad := ot.WriteBytes(t, dir, "bad.onnx", []byte("garbage"))
	_, errs, code := tsplitc(t, "inspect", bad)
	if code != 1 || !strings.Contains(errs, bad) {
		t.Fatalf("bad model: exit %d, stderr %q", code, errs)
	}
	_, errs, code = tsplitc(t, "inspect", filepath.Join(dir, "missing.onnx"))
	if code != 1 || !strings.Contains(errs, "missing.onnx") {
		t.Fatalf("missing model: exit %d, stderr %q", code, errs)
	}
	_, _, code = tsplitc(t, "inspect")
	if code != 2 {
		t.Fatalf("no argument: exit %d, want 2", code)
	}
	_, _, code = tsplitc(t, "inspect", bad, "--batch", "-3")
	if code != 2 {
		t.Fatalf("negative batch: exit %d, want 2", code)
	}
	_, _, code = tsplitc(t, "inspect", bad, "--no-such-flag")
	if code != 2 {
		t.Fatalf("unknown flag: exit %d, want 2", code)
	}
}

// --run at exactly the model's need runs and reports a measured peak
// equal to the memory model's; one byte below, it fails with exit 1 and
// an error naming the op, the tensor and the bytes.
func TestRunCapacity(t *testing.T) {
	t.Parallel()
	path := ot.Write(t, t.TempDir(), "m.onnx", ot.ReluChain())
	out, errs, code := tsplitc(t, "--run", path, "--batch", "4", "--quiet")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var measured, model int64
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "peak device") {
			i := strings.Index(line, "(")
			fmt.Sscanf(line[i:], "(%d bytes; memory model %d bytes)", &measured, &model)
		}
	}
	if measured == 0 || measured != model {
		t.Fatalf("measured peak %d, memory model %d:\n%s", measured, model, out)
	}
	_, errs, code = tsplitc(t, "--run", path, "--batch", "4", "--quiet", "--memory", fmt.Sprint(measured-1))
	if code != 1 {
		t.Fatalf("below the need: exit %d, want 1 (%s)", code, errs)
	}
	for _, want := range []string{path, "out of device memory", "bytes asked", "bytes free", "largest free block"} {
		if !strings.Contains(errs, want) {
			t.Errorf("stderr lacks %q: %s", want, errs)
		}
	}
	_, errs, code = tsplitc(t, "--run", path, "--memory", "lots")
	if code != 2 {
		t.Fatalf("bad --memory: exit %d (%s)", code, errs)
	}
}

// swapInSlack is, for each SwapIn of a planned model, how many ordinary
// ops (not tsplit's swap ops) run between it and its first consumer: the
// distance TFLMS's lb and ub bound under direct_order.
func swapInSlack(t *testing.T, path string) []int {
	t.Helper()
	mp, err := compiler.ReadModelProto(path)
	if err != nil {
		t.Fatal(err)
	}
	nodes := mp.GetGraph().GetNode()
	var out []int
	for i, n := range nodes {
		if n.GetOpType() != "SwapIn" {
			continue
		}
		ops := 0
		for _, m := range nodes[i+1:] {
			if slices.ContainsFunc(m.GetInput(), func(in string) bool { return slices.Contains(n.GetOutput(), in) }) {
				out = append(out, ops)
				break
			}
			if m.GetDomain() != "ai.tsplit" {
				ops++
			}
		}
	}
	return out
}

// summaryInt reads the integer before word on the summary line that
// starts with prefix ("tensors", "swapped").
func summaryInt(t *testing.T, out, prefix, word string) int {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] == prefix {
			for i := 1; i+1 < len(f); i++ {
				if strings.TrimSuffix(f[i+1], ",") == word {
					n, err := strconv.Atoi(f[i])
					if err != nil {
						t.Fatalf("%q: %v", line, err)
					}
					return n
				}
			}
		}
	}
	t.Fatalf("no %q … %q in the summary:\n%s", prefix, word, out)
	return 0
}

// TFLMS parameters given on the command line reach the policy: with
// direct_order, lb=3 and ub=20 every swap-in starts 3 to 20 ops before
// its consumer (2 to 19 ops between them), which the default lb=1 does not
// do, and the plan swaps a different number of tensors.
func TestPolicyParamChangesPlan(t *testing.T) {
	t.Parallel()
	model := filepath.Join("..", "..", "testdata", "onnx", "resnet18-small.onnx")
	dir := t.TempDir()
	compile := func(name string, params ...string) (string, []int) {
		out := filepath.Join(dir, name)
		args := []string{model, "--batch", "8", "--memory", "1500KiB", "--policy", "tflms", "-o", out}
		for _, p := range params {
			args = append(args, "--policy-param", p)
		}
		stdout, errs, code := tsplitc(t, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", params, code, errs)
		}
		return stdout, swapInSlack(t, out)
	}
	defOut, defSlack := compile("default.onnx", "ctrld_strategy=direct_order")
	out, slack := compile("bounded.onnx", "ctrld_strategy=direct_order", "lb=3,ub=20")
	if !strings.Contains(out, "policy tflms (ctrld_strategy=direct_order, lb=3, ub=20)") {
		t.Errorf("the summary does not name the parameters:\n%s", out)
	}
	if len(slack) == 0 || len(defSlack) == 0 {
		t.Fatalf("no swap-ins: %d with lb=3,ub=20, %d by default", len(slack), len(defSlack))
	}
	for _, s := range slack {
		if s < 2 || s > 19 {
			t.Errorf("lb=3, ub=20: a swap-in runs %d ops before its consumer, want 2 to 19 (all: %v)", s, slack)
			break
		}
	}
	if slices.Min(defSlack) >= 2 {
		t.Errorf("default lb=1: every swap-in is at least 2 ops early (%v); the test cannot tell lb apart", defSlack)
	}
	a, b := summaryInt(t, defOut, "tensors", "swapped"), summaryInt(t, out, "tensors", "swapped")
	t.Logf("default: %d swapped, ops before the consumer %d..%d; lb=3,ub=20: %d swapped, %d..%d",
		a, slices.Min(defSlack), slices.Max(defSlack), b, slices.Min(slack), slices.Max(slack))
	if a == b {
		t.Errorf("swapped: %d by default and with lb=3,ub=20", a)
	}
}

// A parameter the policy does not declare, a parameter for a policy that
// takes none and a value the policy rejects are command-line errors
// (exit 2) that name the policy and what it accepts, before anything is
// planned or written.
func TestPolicyParamErrors(t *testing.T) {
	t.Parallel()
	model := filepath.Join("..", "..", "testdata", "onnx", "resnet18-small.onnx")
	dir := t.TempDir()
	for _, c := range []struct {
		policy string
		params []string
		want   []string
	}{
		{"tflms", []string{"lb=2", "bogus=1"}, []string{"policy tflms", `unknown parameter "bogus"`, "accepted: n_tensors, lb, ub, ctrld_strategy, fuse_swapins"}},
		{"base", []string{"lb=2"}, []string{"policy base takes no parameters", `"lb"`}},
		{"tsplit", []string{"n_tensors=3"}, []string{"policy tsplit takes no parameters"}},
		{"tflms", []string{"lb=5,ub=4"}, []string{"policy tflms", "lb=5 ub=4"}},
		{"tflms", []string{"ctrld_strategy=random"}, []string{"policy tflms", "chain_rule or direct_order"}},
		{"tflms", []string{"lb"}, []string{"NAME=VALUE"}},
		{"tflms", []string{"lb=2", "lb=3"}, []string{"lb given twice"}},
	} {
		out := filepath.Join(dir, c.policy+".onnx")
		args := []string{model, "--batch", "8", "--memory", "1500KiB", "--policy", c.policy, "-o", out}
		for _, p := range c.params {
			args = append(args, "--policy-param", p)
		}
		_, errs, code := tsplitc(t, args...)
		if code != 2 {
			t.Errorf("%s %v: exit %d, want 2 (%s)", c.policy, c.params, code, errs)
		}
		for _, w := range c.want {
			if !strings.Contains(errs, w) {
				t.Errorf("%s %v: stderr lacks %q: %s", c.policy, c.params, w, errs)
			}
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("%s %v: %s was written", c.policy, c.params, out)
		}
	}
}

// --help lists every policy with the parameters it declares.
func TestHelpListsPolicyParams(t *testing.T) {
	t.Parallel()
	out, errs, code := tsplitc(t, "--help")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, p := range policy.Names() {
		if !strings.Contains(out, "  "+p+"\n") && !strings.Contains(out, "  "+p+" (no parameters)") {
			t.Errorf("--help does not list policy %s:\n%s", p, out)
		}
		pol, err := policy.Lookup(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range pol.Params() {
			if !strings.Contains(out, s.Name) || !strings.Contains(out, s.Doc) {
				t.Errorf("--help lacks %s's parameter %s", p, s.Name)
			}
		}
	}
	if !strings.Contains(out, "--policy-param") {
		t.Errorf("--help does not show --policy-param")
	}
}
