package main

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/tsplit/tsplit/internal/oracle"
)

var updatePlanned = flag.Bool("update", false, "rewrite testdata/planned/golden.txt from the current compiler")

// plannedCase is one `tsplitc MODEL --batch N --memory B --policy P -o …`
// whose output bytes are pinned by testdata/planned/golden.txt.
type plannedCase struct {
	model  string // path relative to the module root
	batch  int64
	budget int64 // bytes
	policy string
	// heavy: in the integration tier only (the 45 % cases, the
	// baselines on inception and resnet50, the torch exports).
	heavy bool
}

func (c plannedCase) key() string {
	return fmt.Sprintf("%s b%d %d %s", c.model, c.batch, c.budget, c.policy)
}

// plannedCases lists the cases: every policy at 60 % of the base peak on
// four families, tsplit at 80 %, 60 % and 45 % on every small zoo model
// (batch 16), and three policies at 75 % of the peak on two torch exports
// (batch 2). A plain go test plans tsplit's 60 % and 80 % cases and every
// policy on vgg16 and bert-base (a convolutional and a transformer
// family), about half the work; make test plans them all. Budgets are bytes so the file says exactly what was planned;
// base peaks were measured with `tsplitc MODEL --policy base --report
// r.json` (base_peak_bytes) when the file was recorded.
func plannedCases() []plannedCase {
	basePeak := map[string]int64{ // batch 16, bytes
		"bert-base-small": 7382528, "bert-large-small": 10184192, "gpt-small": 7581440,
		"inception-small": 20452096, "resnet101-small": 9440256, "resnet18-small": 2122240,
		"resnet50-small": 6289408, "vgg16-small": 7033856, "vgg19-small": 7632640,
	}
	all := []string{"tsplit", "tsplit-nosplit", "checkpoint", "capuchin", "superneurons", "vdnn-all", "vdnn-conv", "tflms", "modnn"}
	var cs []plannedCase
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for k := range basePeak {
			if !yield(k) {
				return
			}
		}
	}) {
		peak := basePeak[name]
		model := "testdata/onnx/" + name + ".onnx"
		pols := []string{"tsplit"}
		if slices.Contains([]string{"vgg16-small", "resnet50-small", "inception-small", "bert-base-small"}, name) {
			pols = all
		}
		for _, p := range pols {
			heavy := p != "tsplit" && name != "vgg16-small" && name != "bert-base-small"
			cs = append(cs, plannedCase{model, 16, peak * 6 / 10, p, heavy})
		}
		cs = append(cs, plannedCase{model, 16, peak * 8 / 10, "tsplit", false}, plannedCase{model, 16, peak * 45 / 100, "tsplit", true})
	}
	for _, tm := range []struct {
		name string
		peak int64
	}{{"resnet18", 105 << 20}, {"transformer", 4782 << 10}} {
		for _, p := range []string{"tsplit", "checkpoint", "capuchin"} {
			cs = append(cs, plannedCase{"testdata/torch/" + tm.name + ".onnx", 2, tm.peak * 3 / 4, p, true})
		}
	}
	return cs
}

// TestPlannedOutputsUnchanged plans every case with the real command and
// compares the sha256 of the planned file (or the first line of the
// error) with the golden file. It pins the planner's output across
// refactors: a change that should not change plans must leave every line
// as it is; one that should runs `go test ./cmd/tsplitc -run
// TestPlannedOutputsUnchanged -update` and says why in its commit.
func TestPlannedOutputsUnchanged(t *testing.T) {
	t.Parallel()
	root, err := oracle.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	goldenPath := filepath.Join(root, "testdata", "planned", "golden.txt")
	want := map[string]string{}
	if !*updatePlanned {
		want = readPlannedGolden(t, goldenPath)
	}
	cases := plannedCases()
	got := make([]string, len(cases))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 2)
	// Cases on PyTorch exports are skipped, and left out of the
	// comparison, where PyTorch is missing (TSPLIT_REQUIRE_ORACLES
	// makes that an error); the others still run.
	skipped := make([]bool, len(cases))
	// The heavy cases are in the integration tier: most 45 % cases
	// fail, and a failure costs the CLI's search for a budget that fits
	// (tsplit.Options.FindFeasible), up to eight more plans each.
	heavy := true
	t.Run("integration", func(t *testing.T) {
		oracle.Integration(t, "the 45 % cases, the baselines on inception and resnet50, the torch exports")
		heavy = false
	})
	t.Run("cases", func(t *testing.T) {
		for i, c := range cases {
			path := filepath.Join(root, c.model)
			if heavy && c.heavy {
				skipped[i] = true
				continue
			}
			if strings.HasPrefix(c.model, "testdata/torch/") {
				name := strings.TrimSuffix(filepath.Base(c.model), ".onnx")
				skipped[i] = true
				t.Run("export "+name, func(t *testing.T) {
					path = oracle.TorchModel(t, name)
					skipped[i] = false
				})
				if skipped[i] {
					continue
				}
			}
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				got[i] = planOutcome(t, path, c)
			}()
		}
		wg.Wait()
	})
	if t.Failed() {
		return
	}
	if *updatePlanned {
		for i, c := range cases {
			if skipped[i] {
				t.Fatalf("%s was skipped: regenerate with TSPLIT_INTEGRATION=1 and PyTorch installed (make torch-models), or the file would lose it", c.key())
			}
		}
		var b strings.Builder
		b.WriteString("# tsplitc MODEL --batch N --memory BYTES --policy P -o OUT: sha256 of the input, then of OUT or the error's first line.\n")
		b.WriteString("# Regenerate: go test ./cmd/tsplitc -run TestPlannedOutputsUnchanged -update\n")
		for i, c := range cases {
			fmt.Fprintf(&b, "%s | %s\n", c.key(), got[i])
		}
		if err := os.MkdirAll(filepath.Dir(goldenPath), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(goldenPath, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	for i, c := range cases {
		if skipped[i] {
			continue
		}
		w, ok := want[c.key()]
		if !ok {
			t.Errorf("%s: not in %s (run with -update)", c.key(), goldenPath)
			continue
		}
		if w == got[i] {
			continue
		}
		wIn, _, _ := strings.Cut(w, " ")
		gIn, _, _ := strings.Cut(got[i], " ")
		if wIn != gIn {
			t.Errorf("%s: the input differs from the one recorded (input sha256 %s, recorded %s): re-export it or regenerate with -update", c.key(), gIn, wIn)
			continue
		}
		t.Errorf("%s: planned output changed\n got  %s\n want %s", c.key(), got[i], w)
	}
}

// planOutcome runs one case: "INPUT-SHA OUTPUT-SHA" or "INPUT-SHA error: …".
func planOutcome(t *testing.T, path string, c plannedCase) string {
	in, err := os.ReadFile(path)
	if err != nil {
		t.Error(err)
		return ""
	}
	inSum := sha256.Sum256(in)
	out := filepath.Join(t.TempDir(), "planned.onnx")
	_, stderr, code := tsplitc(t, path, "--batch", fmt.Sprint(c.batch), "--memory", fmt.Sprint(c.budget),
		"--policy", c.policy, "-o", out)
	if code != 0 {
		if code != 1 {
			t.Errorf("%s: exit %d: %s", c.key(), code, stderr)
		}
		// The error names the input path; keep what follows it so the
		// line does not depend on where the checkout is.
		first, _, _ := strings.Cut(stderr, "\n")
		if _, after, ok := strings.Cut(first, path+": "); ok {
			first = after
		}
		return hex.EncodeToString(inSum[:]) + " error: " + first
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Error(err)
		return ""
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(inSum[:]) + " " + hex.EncodeToString(sum[:])
}

func readPlannedGolden(t *testing.T, path string) map[string]string {
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("%v (run with -update to record it)", err)
	}
	defer f.Close()
	m := map[string]string{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, " | ")
		if !ok {
			t.Fatalf("%s: bad line %q", path, line)
		}
		m[k] = v
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return m
}
