package bench

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The measured benchmark on the smallest model: every plan that fits
// runs within its budget with the measured peak equal to the planned
// one, a policy that cannot fit is reported as such, and the files are
// written. Timings are not checked: they are the machine's.
func TestMeasuredBenchmark(t *testing.T) {
	cfg := MeasuredConfig{Models: []string{"transformer:2"}, Policies: []string{"base", "tsplit"}, Budgets: []int{70},
		ProfileRuns: 1, Rounds: 1, Command: "test"}
	r, err := RunMeasured(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	m := r.Reps[0][0]
	if m.Profile.Emulation == nil || m.Base.MeasuredPeak != m.Base.Peak || len(m.Base.Steps) != 1 {
		t.Fatalf("unplanned: %+v", m.Base)
	}
	// The profile re-measured over the runs keeps the link the plans
	// ran on.
	if w := m.Window; w == nil || w.Emulation == nil || w.H2D != m.Profile.H2D || w.Measured.Runs != 1 || m.Base.Repredicted <= 0 {
		t.Errorf("re-measured profile %+v, unplanned re-predicted %v", w, m.Base.Repredicted)
	}
	if c := m.Case(70, "base"); c == nil || c.OK() {
		t.Errorf("base fits 70 %% of the unplanned peak: %+v", c)
	}
	c := m.Case(70, "tsplit")
	if c == nil || !c.OK() || len(c.Steps) != 1 || len(c.Paired) != 1 {
		t.Fatalf("tsplit at 70 %%: %+v", c)
	}
	if c.Repredicted <= 0 || c.MeasuredPeak != c.Peak || c.Peak > c.Budget {
		t.Errorf("tsplit at 70 %%: re-predicted %v, measured peak %d, planned %d, budget %d", c.Repredicted, c.MeasuredPeak, c.Peak, c.Budget)
	}
	dir := t.TempDir()
	files, err := WriteMeasured(dir, r)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"measured.md", "measured.csv", "measured_transformer.png", "measured_transformer.svg", "measured_profile_transformer.json"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Errorf("%s not written (%v): %v", name, files, err)
		}
	}
	md, _ := os.ReadFile(filepath.Join(dir, "measured.md"))
	if !strings.Contains(string(md), "| 70 % | base | does not fit |") {
		t.Errorf("measured.md does not say base does not fit:\n%s", md)
	}
	for _, bad := range []MeasuredConfig{{Models: []string{"transformer"}}, {Models: []string{"nosuch:2"}}, {Budgets: []int{0}}, {Policies: []string{"nosuch"}}} {
		if _, err := bad.Resolve(); err == nil {
			t.Errorf("%+v resolved", bad)
		}
	}
}
