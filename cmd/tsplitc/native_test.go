package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tsplit/tsplit/internal/oracle"
)

// runJSON is the part of `run --json` these tests read.
type runJSON struct {
	Format    string    `json:"format"`
	Pool      int64     `json:"pool_bytes"`
	Need      int64     `json:"need_bytes"`
	Peak      int64     `json:"peak_bytes"`
	ModelPeak int64     `json:"model_peak_bytes"`
	Losses    []float64 `json:"losses"`
	Step      float64   `json:"measured_step_s"`
	Predicted *float64  `json:"predicted_step_s"`
	Streams   map[string]struct {
		Tasks int     `json:"tasks"`
		Busy  float64 `json:"busy_s"`
		Wait  float64 `json:"wait_s"`
	} `json:"streams"`
}

func runJSONOf(t *testing.T, args ...string) runJSON {
	t.Helper()
	out, errs, code := tsplitc(t, append(args, "--json", "--quiet")...)
	if code != 0 {
		t.Fatalf("tsplitc %s: exit %d: %s", strings.Join(args, " "), code, errs)
	}
	var r runJSON
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	return r
}

// TestNativeTarget plans the README's model with --target native, runs
// the plan and the planned ONNX model with --run: the same losses over
// three steps, the plan's device high-water its pool, the same
// prediction beside the measured step, every stream running the ops
// the planned model's run does. The same plan written twice is the
// same bytes.
func TestNativeTarget(t *testing.T) {
	t.Parallel()
	root, err := oracle.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	model := filepath.Join(root, "testdata", "onnx", "resnet18-small.onnx")
	dir := t.TempDir()
	plan, onnx := filepath.Join(dir, "p.tsplan"), filepath.Join(dir, "p.onnx")
	// --order dfs: one Alg. 2 walk, not tsplit's search (about 3x the
	// planning); the native target is the subject here.
	common := []string{model, "--batch", "4", "--memory", "1MiB", "--order", "dfs", "--quiet"}
	out, errs, code := tsplitc(t, append(common, "--target", "native", "-o", plan)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if !strings.Contains(out, "(native plan)") {
		t.Errorf("the summary does not say it wrote a native plan:\n%s", out)
	}
	first, err := os.ReadFile(plan)
	if err != nil {
		t.Fatal(err)
	}
	if _, errs, code := tsplitc(t, append(common, "--target", "native", "-o", plan)...); code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if again, _ := os.ReadFile(plan); !bytes.Equal(first, again) {
		t.Error("planning the same model twice gives different native plans")
	}
	if _, errs, code := tsplitc(t, append(common, "-o", onnx)...); code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}

	nat := runJSONOf(t, "--run", plan, "--iters", "3")
	ref := runJSONOf(t, "--run", onnx, "--iters", "3")
	if nat.Format != "tsplan" || ref.Format != "onnx" {
		t.Errorf("formats %q and %q, want tsplan and onnx", nat.Format, ref.Format)
	}
	if len(nat.Losses) != 3 || len(ref.Losses) != 3 {
		t.Fatalf("losses %v and %v, want 3 each", nat.Losses, ref.Losses)
	}
	for i := range nat.Losses {
		if nat.Losses[i] != ref.Losses[i] {
			t.Errorf("step %d: loss %v from the native plan, %v from the planned model", i, nat.Losses[i], ref.Losses[i])
		}
	}
	if nat.Pool != ref.Pool || nat.Need != nat.Pool || nat.Peak != nat.Pool {
		t.Errorf("native plan: pool %d (planned model's %d), need %d, high-water %d: all should be equal", nat.Pool, ref.Pool, nat.Need, nat.Peak)
	}
	if nat.ModelPeak != ref.Peak {
		t.Errorf("the plan's live peak %d, the planned model's measured peak %d", nat.ModelPeak, ref.Peak)
	}
	if nat.Step <= 0 || nat.Predicted == nil || ref.Predicted == nil || *nat.Predicted != *ref.Predicted {
		t.Errorf("measured step %g s, predicted %v (the planned model's %v): a measured step and the plan's prediction expected", nat.Step, nat.Predicted, ref.Predicted)
	}
	// The host stream of the planned model's run also counts the views
	// and in-place merges, which run no command in a native plan.
	for _, name := range []string{"compute", "d2h", "h2d", "host"} {
		s, r := nat.Streams[name], ref.Streams[name]
		if s.Tasks == 0 || s.Tasks > r.Tasks || name != "host" && s.Tasks != r.Tasks || s.Busy <= 0 || s.Wait < 0 {
			t.Errorf("stream %s: %d commands (the planned model's run: %d ops), busy %g s, waiting %g s", name, s.Tasks, r.Tasks, s.Busy, s.Wait)
		}
	}

	// The text summary says what the JSON does.
	out, errs, code = tsplitc(t, "--run", plan, "--quiet")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"the native plan needs", "the highest pool byte the commands used", "predicted", "streams      compute", "h2d", "loss"} {
		if !strings.Contains(out, want) {
			t.Errorf("the summary lacks %q:\n%s", want, out)
		}
	}
}

// TestNativeRunErrors: a plan refuses the flags that would change the
// step it holds, a pool smaller than its layout, and a damaged file.
func TestNativeRunErrors(t *testing.T) {
	t.Parallel()
	root, err := oracle.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	model := filepath.Join(root, "testdata", "onnx", "gpt-small.onnx")
	dir := t.TempDir()
	plan := filepath.Join(dir, "p.tsplan")
	if _, errs, code := tsplitc(t, model, "--batch", "2", "--target", "native", "-o", plan, "--quiet"); code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--run", plan, "--batch", "8"}, 2, "--batch"},
		{[]string{"--run", plan, "--train"}, 2, "--train"},
		{[]string{"--run", plan, "-o", filepath.Join(dir, "t.onnx")}, 2, "native plan"},
		{[]string{"--run", plan, "--pool", "1KiB"}, 2, "lays its tensors out in"},
		{[]string{"plan", model, "--target", "cuda", "-o", plan}, 2, "--target"},
		// A plan given where an ONNX model is read says what it is (it
		// used to fail as a corrupt protobuf).
		{[]string{"inspect", plan}, 1, "a native execution plan (.tsplan), not an ONNX model"},
		{[]string{"plan", plan, "-o", filepath.Join(dir, "q.onnx")}, 1, "a native execution plan"},
	} {
		_, errs, code := tsplitc(t, append(tc.args, "--quiet")...)
		if code != tc.code || !strings.Contains(errs, tc.want) {
			t.Errorf("tsplitc %s: exit %d, want %d with %q: %s", strings.Join(tc.args, " "), code, tc.code, tc.want, errs)
		}
	}
	if _, errs, code := tsplitc(t, "dump", plan); code != 1 || !strings.Contains(errs, "a native execution plan") {
		t.Errorf("tsplitc dump PLAN: exit %d: %s", code, errs)
	}
	data, err := os.ReadFile(plan)
	if err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.tsplan")
	if err := os.WriteFile(bad, data[:len(data)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	_, errs, code := tsplitc(t, "--run", bad, "--quiet")
	if code != 1 || !strings.Contains(errs, bad) || !strings.Contains(errs, "corrupt plan") {
		t.Errorf("a truncated plan: exit %d, want 1 naming the file: %s", code, errs)
	}
}
