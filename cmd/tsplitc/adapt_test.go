package main

import (
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
