package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/tsplit/tsplit/backend"
	"github.com/tsplit/tsplit/internal/plantest"
)

// tsplitc plans fused tiles where nothing else fits and says so in the
// summary beside the predicted step time (the 80×80 VGG-like stack at
// 160 KiB, below its 200 KiB largest activation); --no-fused-tiles
// turns them off, and the budget then fails.
func TestPlanFusedTilesCLI(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	model := filepath.Join(dir, "wide.onnx")
	if err := backend.WriteFile(plantest.WideVGG(t, 80), model); err != nil {
		t.Fatal(err)
	}
	planned := filepath.Join(dir, "planned.onnx")
	out, errs, code := tsplitc(t, "plan", model, "--memory", "160KiB", "--loss", "mse", "--optimizer", "sgd", "-o", planned)
	if code != 0 || !strings.Contains(out, "fused tiles   conv1 … pool2 on 10×10 tiles") || !strings.Contains(out, "ms predicted") {
		t.Fatalf("exit %d:\n%s\n%s", code, out, errs)
	}
	obj := jsonObject(t, "plan", model, "--memory", "160KiB", "--loss", "mse", "--optimizer", "sgd", "-o", planned, "--json")
	if obj["fused_tiles"] != "conv1 … pool2 on 10×10 tiles" {
		t.Errorf("--json fused_tiles %v", obj["fused_tiles"])
	}
	_, errs, code = tsplitc(t, "plan", model, "--memory", "160KiB", "--loss", "mse", "--optimizer", "sgd", "-o", planned, "--no-fused-tiles")
	if code == 0 || !strings.Contains(errs, "no plan fits a budget of 160.00 KiB") {
		t.Errorf("--no-fused-tiles: exit %d: %s", code, errs)
	}
}
