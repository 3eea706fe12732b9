package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	ot "github.com/tsplit/tsplit/internal/onnxtest"
)

// TestMain lets tests run the real command in a child process: the
// child sees TSPLITC_MAIN=1 and runs main with the given arguments, so
// exit statuses and stderr are the ones a user gets.
func TestMain(m *testing.M) {
	if os.Getenv("TSPLITC_MAIN") == "1" {
		main()
		os.Exit(0)
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
