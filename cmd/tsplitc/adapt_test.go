package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// --run --adapt on a plan made with a profile that emulates a link:
// one entry per iteration, each within the budget at the memory
// model's peak of the order it ran, one text line per iteration, and
// -o writes the adapted plan, which runs again within the budget. An
// unplanned model is refused with status 2.
func TestRunAdapt(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	prof := filepath.Join("..", "..", "docs", "benchmarks", "measured-tsplit", "measured_profile_resnet18.json")
	planned := filepath.Join(dir, "planned.onnx")
	plan := jsonObject(t, "plan", resnet18, "--batch", "16", "--device", prof, "--policy", "tflms", "--memory", "2MiB", "-o", planned, "--json")
	budget := plan["budget_bytes"].(float64)
	adapted := filepath.Join(dir, "adapted.onnx")
	run := jsonObject(t, "--run", planned, "--iters", "3", "--adapt", "-o", adapted, "--json", "--quiet")
	its, _ := run["adapted"].([]any)
	if len(its) != 3 {
		t.Fatalf("adapted: %v", run["adapted"])
	}
	for _, x := range its {
		it := x.(map[string]any)
		if it["measured_peak_bytes"] != it["model_peak_bytes"] || it["measured_peak_bytes"].(float64) > budget || it["budget_bytes"] != budget {
			t.Errorf("iteration %v: %v", it["iter"], it)
		}
	}
	again := jsonObject(t, "run", adapted, "--json", "--quiet")
	if again["measured_peak_bytes"] != again["planned_peak_bytes"] || again["measured_peak_bytes"].(float64) > budget {
		t.Errorf("the adapted plan: measured peak %v, planned %v, budget %v", again["measured_peak_bytes"], again["planned_peak_bytes"], budget)
	}
	text, errs, code := tsplitc(t, "run", planned, "--iters", "2", "--adapt", "--quiet")
	if code != 0 || strings.Count(text, "\nadapt ") != 2 {
		t.Errorf("run --adapt: exit %d\n%s\n%s", code, text, errs)
	}
	_, errs, code = tsplitc(t, "run", resnet18, "--train", "--batch", "2", "--adapt")
	if code != 2 || !strings.Contains(errs, "not a planned model") {
		t.Errorf("--adapt on an unplanned model: exit %d\n%s", code, errs)
	}
}

// run --report draws the measured memory timeline over the predicted
// one: the HTML has both curves (along time with --device, the profile
// the plan was made with), the JSON both series, the measured one
// peaking at the run's measured peak; an unplanned model is refused.
func TestRunReport(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	prof := filepath.Join("..", "..", "docs", "benchmarks", "measured-tsplit", "measured_profile_resnet18.json")
	planned := filepath.Join(dir, "planned.onnx")
	jsonObject(t, "plan", resnet18, "--batch", "16", "--device", prof, "--policy", "tflms", "--memory", "2MiB", "-o", planned, "--json")
	html := filepath.Join(dir, "run.html")
	if _, errs, code := tsplitc(t, "--run", planned, "--report", html, "--device", prof, "--quiet"); code != 0 {
		t.Fatalf("--run --report: exit %d\n%s", code, errs)
	}
	page, err := os.ReadFile(html)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`class="curve measured"`, `class="curve planned"`, `data-axis="time"`, `data-axis="index"`} {
		if strings.Count(string(page), want) == 0 {
			t.Errorf("the run's report lacks %s", want)
		}
	}
	data := filepath.Join(dir, "run.json")
	run := jsonObject(t, "run", planned, "--report", data, "--json", "--quiet")
	raw, err := os.ReadFile(data)
	if err != nil {
		t.Fatal(err)
	}
	var rep map[string]any
	if err := json.Unmarshal(raw, &rep); err != nil {
		t.Fatal(err)
	}
	measured, _ := rep["measured_timeline"].([]any)
	predicted, _ := rep["planned_timeline"].([]any)
	if len(measured) == 0 || len(measured) != len(predicted) {
		t.Fatalf("report: %d measured and %d predicted points", len(measured), len(predicted))
	}
	peak := 0.0
	for _, p := range measured {
		peak = max(peak, p.(map[string]any)["live_bytes"].(float64))
	}
	if peak != run["measured_peak_bytes"].(float64) {
		t.Errorf("the measured timeline peaks at %v, the run measured %v", peak, run["measured_peak_bytes"])
	}
	_, errs, code := tsplitc(t, "run", resnet18, "--train", "--batch", "2", "--report", filepath.Join(dir, "r.html"))
	if code != 2 || !strings.Contains(errs, "not a planned model") {
		t.Errorf("--report on an unplanned model: exit %d\n%s", code, errs)
	}
}
