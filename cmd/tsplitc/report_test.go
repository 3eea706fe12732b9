package main

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tsplit/tsplit/passes"
)

// TestPlanReportFiles: plan --report writes the report in the format its
// extension names (HTML, SVG, JSON), mode 0644, and names it in the
// summary; an unknown extension is a usage error found before planning,
// and nothing is left behind.
func TestPlanReportFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	model := filepath.Join("..", "..", "testdata", "onnx", "bert-base-small.onnx")
	const budget = 4429516 // 60 % of its peak at batch 16: plans (testdata/planned/golden.txt)
	for _, name := range []string{"plan.html", "plan.svg", "plan.json"} {
		path := filepath.Join(dir, name)
		out, errs, code := tsplitc(t, model, "--batch", "16", "--memory", "4429516", "-o", filepath.Join(dir, "p.onnx"), "--report", path)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", name, code, errs)
		}
		if !strings.Contains(out, "report        "+path) {
			t.Errorf("%s: output does not name the report:\n%s", name, out)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		switch filepath.Ext(name) {
		case ".html":
			if !bytes.HasPrefix(data, []byte("<!DOCTYPE html>")) || !bytes.Contains(data, []byte(`class="curve planned"`)) {
				t.Errorf("%s is not the HTML report", name)
			}
		case ".svg":
			for d := xml.NewDecoder(bytes.NewReader(data)); ; {
				if _, err := d.Token(); err == io.EOF {
					break
				} else if err != nil {
					t.Fatalf("%s: not well-formed XML: %v", name, err)
				}
			}
		case ".json":
			var r passes.Report
			if err := json.Unmarshal(data, &r); err != nil || len(r.Planned) == 0 || r.Budget != budget {
				t.Errorf("%s: %v, %d points, budget %d", name, err, len(r.Planned), r.Budget)
			}
		}
		if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o644 {
			t.Errorf("%s: %v %v", name, st.Mode(), err)
		}
	}
	out := filepath.Join(dir, "q.onnx")
	_, errs, code := tsplitc(t, model, "--batch", "4", "-o", out, "--report", filepath.Join(dir, "plan.pdf"))
	if code != 2 || !strings.Contains(errs, "plan.pdf") || !strings.Contains(errs, ".html") {
		t.Fatalf("--report plan.pdf: exit %d, stderr %q", code, errs)
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("the model was planned and written despite the bad --report")
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".") {
			t.Errorf("left behind %s", e.Name())
		}
	}
}
