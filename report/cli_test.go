package report

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/tsplit/tsplit/passes"
)

// TestCLI runs tsplitc --report end to end: it builds the command, writes
// a small zoo model and plans it with a report of each format. (The
// test lives here because it is about the report's files.)
func TestCLI(t *testing.T) {
	if testing.Short() {
		t.Skip("builds tsplitc")
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("skipping: no go command to build tsplitc with")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "tsplitc")
	if out, err := exec.Command(gobin, "build", "-o", bin, "../cmd/tsplitc").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	run := func(args ...string) (string, string, int) {
		t.Helper()
		cmd := exec.Command(bin, args...)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		var ee *exec.ExitError
		code := 0
		switch {
		case errors.As(err, &ee):
			code = ee.ExitCode()
		case err != nil:
			t.Fatal(err)
		}
		return out.String(), errb.String(), code
	}
	model := filepath.Join(dir, "m.onnx")
	if _, errs, code := run("zoo", goldenName, "--small", "-o", model); code != 0 {
		t.Fatalf("zoo: exit %d: %s", code, errs)
	}
	budget := strconv.FormatInt(smallReport(t).Budget, 10)
	for _, name := range []string{"plan.html", "plan.svg", "plan.json"} {
		path := filepath.Join(dir, name)
		out, errs, code := run(model, "--batch", strconv.Itoa(goldenBatch), "--memory", budget, "-o", filepath.Join(dir, "p.onnx"), "--report", path)
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
			checkXML(t, data)
		case ".json":
			var r passes.Report
			if err := json.Unmarshal(data, &r); err != nil || len(r.Planned) == 0 || r.Budget != smallReport(t).Budget {
				t.Errorf("%s: %v, %d points, budget %d", name, err, len(r.Planned), r.Budget)
			}
		}
		if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o644 {
			t.Errorf("%s: %v %v", name, st.Mode(), err)
		}
	}
	// An unknown extension is a usage error, found before planning.
	out := filepath.Join(dir, "q.onnx")
	_, errs, code := run(model, "--batch", "4", "-o", out, "--report", filepath.Join(dir, "plan.pdf"))
	if code != 2 || !strings.Contains(errs, "plan.pdf") || !strings.Contains(errs, ".html") {
		t.Fatalf("--report plan.pdf: exit %d, stderr %q", code, errs)
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("the model was planned and written despite the bad --report")
	}
	// No stray temporary files.
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".") {
			t.Errorf("left behind %s", e.Name())
		}
	}
}
