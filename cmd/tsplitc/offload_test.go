package main

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/tsplit/tsplit/internal/oracle"
	"github.com/tsplit/tsplit/zoo"
)

// TestPlanGPT13B is issue 14's must-show 3: on the v100 profile with
// 512 GiB of host memory (testdata/devices/v100-512g.json), the Adam
// training step of a GPT of 13.2 B parameters (the zoo's gpt at hidden
// 5120, 41 layers, sequence 1024) plans at batch 8 with its state on
// the host, and the summary states the predicted step time. --dry-run:
// the step's Adam state (105 GB of zeros) is made only when written.
// How long planning takes is BenchmarkPlanGPTOffload's (package
// policy) and docs/offload.md's, not this test's.
func TestPlanGPT13B(t *testing.T) {
	oracle.Integration(t, "plans a 13 B-parameter GPT step")
	if n, err := zoo.ParamCount("gpt", zoo.Config{Width: 5120.0 / 768, Layers: 41, SeqLen: 1024}); err != nil || n < 13e9 {
		t.Fatalf("the model has %d parameters (%v), not 13 B", n, err)
	}
	model := filepath.Join(t.TempDir(), "gpt13b.onnx")
	if _, stderr, code := tsplitc(t, "zoo", "gpt", "--width", "6.666666666666667", "--layers", "41", "--seq", "1024", "--weights-as-inputs", "-o", model); code != 0 {
		t.Fatalf("zoo: exit %d: %s", code, stderr)
	}
	stdout, stderr, code := tsplitc(t, "plan", model, "--batch", "8", "--optimizer", "adam",
		"--device", filepath.Join("..", "..", "testdata", "devices", "v100-512g.json"), "--offload", "--dry-run", "--quiet")
	if code != 0 {
		t.Fatalf("plan: exit %d: %s", code, stderr)
	}
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^device +v100-512g, policy tsplit$`),
		regexp.MustCompile(`(?m)^state +\d+ weights on the host`),
		regexp.MustCompile(`(?m)^step time +\d+\.\d+ ms predicted`),
		regexp.MustCompile(`(?m)^wrote +nothing \(--dry-run\)$`),
	} {
		if !want.MatchString(stdout) {
			t.Errorf("the summary lacks %s:\n%s", want, stdout)
		}
	}
	if _, stderr, code := tsplitc(t, "plan", model, "--dry-run", "-o", filepath.Join(t.TempDir(), "x.onnx")); code != 2 || !strings.Contains(stderr, "--dry-run writes nothing") {
		t.Errorf("--dry-run with -o: exit %d, %s", code, stderr)
	}
	t.Log(stdout)
}
