package main

import (
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The measured path end to end on a small model: profile measures the
// CPU device with an emulated titan-rtx link, plan prices the step with
// that profile, and run paces the plan's copies to the link and reports
// the prediction next to what it measured, within the budget and with
// the losses of the unplanned step.
func TestMeasuredProfilePlanRun(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	prof := filepath.Join(dir, "cpu-emulated.json")
	out, errs, code := tsplitc(t, "profile", resnet18, "--batch", "2", "--runs", "1", "--warmup", "0", "--emulate", "titan-rtx", "-o", prof)
	if code != 0 || !strings.Contains(out, "emulates") || !strings.Contains(out, "titan-rtx") {
		t.Fatalf("profile MODEL: exit %d\n%s\n%s", code, out, errs)
	}
	p := jsonObject(t, "profile", prof, "--json")
	hasFields(t, "measured profile", p, "op_times_s", "op_type_scale", "emulation", "measured", "link_latency_s")
	if p["name"] != "cpu-emulated" || len(p["op_times_s"].(map[string]any)) == 0 {
		t.Errorf("measured profile: name %v, %d op times", p["name"], len(p["op_times_s"].(map[string]any)))
	}

	whole := jsonObject(t, "plan", resnet18, "--batch", "2", "--device", prof, "-o", filepath.Join(dir, "whole.onnx"), "--json")
	budget := int64(0.7 * whole["base_peak_bytes"].(float64))
	planned := filepath.Join(dir, "planned.onnx")
	plan := jsonObject(t, "plan", resnet18, "--batch", "2", "--device", prof, "--memory", strconv.FormatInt(budget, 10), "-o", planned, "--json")
	if plan["device"] != "cpu-emulated" || plan["peak_bytes"].(float64) > float64(budget) {
		t.Fatalf("plan: device %v, peak %v for a budget of %d", plan["device"], plan["peak_bytes"], budget)
	}

	run := jsonObject(t, "run", planned, "--iters", "2", "--json")
	hasFields(t, "run", run, "measured_step_s", "predicted_step_s", "measured_peak_bytes", "planned_peak_bytes", "stall_s",
		"streams", "steps_s", "emulated_link", "plan")
	if run["measured_peak_bytes"] != run["planned_peak_bytes"] || run["planned_peak_bytes"] != plan["peak_bytes"] {
		t.Errorf("measured peak %v, planned %v, plan says %v", run["measured_peak_bytes"], run["planned_peak_bytes"], plan["peak_bytes"])
	}
	if run["predicted_step_s"] != plan["step_s"] || run["measured_step_s"].(float64) <= 0 || run["stall_s"].(float64) < 0 {
		t.Errorf("predicted %v (plan %v), measured %v, stall %v", run["predicted_step_s"], plan["step_s"], run["measured_step_s"], run["stall_s"])
	}
	if link, _ := run["emulated_link"].(map[string]any); link == nil || link["of"] != "titan-rtx" {
		t.Errorf("run: emulated link %v", run["emulated_link"])
	}
	if p, _ := run["plan"].(map[string]any); p == nil || p["measured_profile"] != true || p["policy"] != "tsplit" {
		t.Errorf("run: plan %v", run["plan"])
	}
	unplanned := jsonObject(t, "run", resnet18, "--train", "--batch", "2", "--iters", "2", "--json")
	if unplanned["predicted_step_s"] != nil || unplanned["emulated_link"] != nil {
		t.Errorf("an unplanned run reports a prediction %v or a link %v", unplanned["predicted_step_s"], unplanned["emulated_link"])
	}
	got, want := run["losses"].([]any), unplanned["losses"].([]any)
	for i := range want {
		if a, b := got[i].(float64), want[i].(float64); math.Abs(a-b) > 1e-5*math.Abs(b) {
			t.Errorf("loss %d: %v planned, %v unplanned", i, a, b)
		}
	}
	text, _, code := tsplitc(t, "run", planned, "--quiet")
	for _, line := range []string{"step ", "predicted ", "streams ", "link ", "planned "} {
		if code != 0 || !strings.Contains(text, line) {
			t.Errorf("run's summary lacks %q:\n%s", line, text)
		}
	}
}

// Measuring refuses bad command lines with status 2 and bad models with
// status 1, and writes nothing then.
func TestProfileMeasureErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	out := filepath.Join(dir, "p.json")
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"profile", resnet18, "--batch", "2"}, 2, "-o"},
		{[]string{"profile", "titan-rtx", "-o", out}, 2, "--output"},
		{[]string{"profile", "titan-rtx", "--emulate", "titan-rtx"}, 2, "--emulate"},
		{[]string{"profile", resnet18, "--runs", "0", "-o", out}, 2, "--runs"},
		{[]string{"profile", resnet18, "--emulate", "no-such-gpu", "-o", out}, 2, "no-such-gpu"},
		{[]string{"profile", resnet18, "--device", "no-such-gpu", "-o", out}, 2, "no-such-gpu"},
		{[]string{"profile", filepath.Join(dir, "missing.onnx"), "-o", out}, 1, "missing.onnx"},
		{[]string{"profile", resnet18, "-o", resnet18}, 2, "resnet18-small.onnx"},
	} {
		_, errs, code := tsplitc(t, c.args...)
		if code != c.code || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d, want %d with %q:\n%s", c.args, code, c.code, c.want, errs)
		}
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("a failed profile wrote %s", out)
	}
}
