package passes_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/tsplit/tsplit/internal/filecheck"
	"github.com/tsplit/tsplit/ir"
	"github.com/tsplit/tsplit/memory"
	"github.com/tsplit/tsplit/passes"
	"github.com/tsplit/tsplit/policy"
	"github.com/tsplit/tsplit/profile"
)

// TestIRCheck runs every testdata/*.ir: a small graph in the dump format
// (ir.Parse) with a RUN line naming passes and directives saying what
// the output must contain (package internal/filecheck; docs/testing.md
// says how to write one). The graph is verified before the first pass
// and after every pass. The output is the IR dump after the last pass,
// followed by what the RUN line's analyses and the planner report; it
// must also parse back to the same dump.
func TestIRCheck(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.ir"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no .ir tests in passes/testdata: %v", err)
	}
	for _, path := range files {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".ir"), func(t *testing.T) {
			src, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			script, err := filecheck.Parse(path, src)
			if err != nil {
				t.Fatal(err)
			}
			m, err := ir.Parse(src)
			if err != nil {
				if pe, ok := err.(*ir.ParseError); ok {
					t.Fatalf("%s:%d:%d: %s", path, pe.Line, pe.Col, pe.Msg)
				}
				t.Fatal(err)
			}
			input := dumpText(t, m)
			out, runErr := irCheckRun(m, script.Run)
			if len(script.Errors) > 0 {
				if err := script.MatchError(runErr); err != nil {
					t.Fatal(err)
				}
				return
			}
			if runErr != nil {
				t.Fatalf("%s:%d: RUN: %v", path, script.RunLine, runErr)
			}
			if err := script.Match(out); err != nil {
				t.Fatalf("%v\noutput:\n%s", err, out)
			}
			after := dumpText(t, m)
			if script.SameAsInput != 0 && after != input {
				t.Fatalf("%s:%d: CHECK-SAME-AS-INPUT: the graph changed\ninput:\n%s\noutput:\n%s", path, script.SameAsInput, input, after)
			}
			reparse(t, m)
		})
	}
}

// reparse checks that a pass's output parses back (ir.Parse) into a
// graph that verifies and dumps identically, so every planned graph of
// the tests also tests the parser.
func reparse(t *testing.T, m *ir.Model) {
	t.Helper()
	text := dumpText(t, m)
	p, err := ir.Parse([]byte(text))
	if err != nil {
		t.Fatalf("the output does not parse: %v", err)
	}
	if err := ir.Verify(p); err != nil {
		t.Fatalf("the parsed output does not verify: %v", err)
	}
	if again := dumpText(t, p); again != text {
		t.Fatalf("the output does not parse back to the same dump:\n%s", again)
	}
}

func dumpText(t *testing.T, m *ir.Model) string {
	t.Helper()
	var b bytes.Buffer
	if err := ir.DumpModel(&b, m); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// irCheckRun runs a RUN line on m and renders the output. The line is
// pass names separated by commas, then options:
//
//	budget=BYTES | ratio=R   the memory budget (R × the depth-first peak)
//	noswap, norecompute      restrict the tsplit planner
//	policy=NAME, profile=NAME
//	op=NAME dim=D|sum parts=P  what insert-split splits
//
// Pass names resolve through irCheckPass.
func irCheckRun(m *ir.Model, run string) (string, error) {
	// The pass list runs up to the first option (a flag or KEY=VALUE);
	// spaces after its commas are allowed.
	fields := strings.Fields(run)
	n := 0
	for n < len(fields) && !strings.Contains(fields[n], "=") && fields[n] != "noswap" && fields[n] != "norecompute" {
		n++
	}
	names := strings.Join(fields[:n], "")
	o := &passes.Options{Policy: policy.Tsplit, Order: passes.OrderDFS}
	split := &splitRequest{}
	ratio := 0.0
	for _, f := range fields[n:] {
		key, val, _ := strings.Cut(f, "=")
		var err error
		switch key {
		case "budget":
			o.Budget, err = strconv.ParseInt(val, 10, 64)
		case "ratio":
			ratio, err = strconv.ParseFloat(val, 64)
		case "noswap":
			o.NoSwap = true
		case "norecompute":
			o.NoRecompute = true
		case "policy":
			o.Policy, err = policy.Lookup(val)
		case "profile":
			o.Profile, err = profile.Lookup(val)
		case "op":
			split.op, err = strconv.Unquote(val)
			if err != nil {
				split.op, err = val, nil
			}
		case "dim":
			split.dim = val
		case "parts":
			split.parts, err = strconv.Atoi(val)
		default:
			err = fmt.Errorf("unknown option")
		}
		if err != nil {
			return "", fmt.Errorf("option %q: %v", f, err)
		}
	}
	if err := ir.Verify(m); err != nil {
		return "", fmt.Errorf("before the first pass: %w", err)
	}
	if ratio > 0 {
		probe := m.Clone()
		if err := passes.NewState(probe, nil).Run(passes.Schedule); err != nil {
			return "", err
		}
		mem, err := memory.Analyze(probe.Graph, memory.Options{})
		if err != nil {
			return "", err
		}
		o.Budget = int64(float64(mem.Peak) * ratio)
	}
	s := passes.NewState(m, o)
	s.Check = true
	var extra bytes.Buffer
	ranLayout := false
	for _, name := range strings.Split(names, ",") {
		p, err := irCheckPass(strings.TrimSpace(name), split)
		if err != nil {
			return "", err
		}
		if err := s.Run(p); err != nil {
			return "", err
		}
		ranLayout = ranLayout || p == passes.Layout
		if p.Mutates {
			continue
		}
		res, err := s.Result(p)
		if err != nil {
			return "", err
		}
		if err := renderAnalysis(&extra, m, p, res); err != nil {
			return "", err
		}
	}
	var out bytes.Buffer
	if err := ir.DumpModel(&out, m); err != nil {
		return "", err
	}
	out.Write(extra.Bytes())
	if s.Report != nil {
		fmt.Fprintf(&out, "# budget %d\n", s.Report.Budget)
		goldenReport(&out, s.Report, true)
	}
	if ranLayout {
		if err := layoutText(&out, m); err != nil {
			return "", err
		}
	}
	return out.String(), nil
}

// irCheckPass resolves a pass name of a RUN line: a pass of the
// pipeline table, an analysis, or a test-only rewrite. It is the one
// place that knows the pass manager's names.
func irCheckPass(name string, split *splitRequest) (*passes.Pass, error) {
	for _, p := range append(append([]*passes.Pass{}, passes.Pipeline...), passes.Liveness, passes.FTCompat) {
		if p.Name == name {
			return p, nil
		}
	}
	if name == "insert-split" {
		return split.pass(), nil
	}
	return nil, fmt.Errorf("no pass %q", name)
}

// splitRequest is insert-split's target: the op, the output dimension
// (or "sum" for a split of a contracted dimension) and the part count.
type splitRequest struct {
	op    string
	dim   string
	parts int
}

// pass applies InsertSplit to the named op directly, without the
// planner, so a test pins how one split is rewritten (slices with halos,
// micro-ops, merges) whatever the cost model would choose.
func (r *splitRequest) pass() *passes.Pass {
	return &passes.Pass{
		Name:    "insert-split",
		Doc:     "split one op as the RUN line's op=, dim= and parts= say (tests only)",
		Mutates: true,
		Run: func(s *passes.State) (any, error) {
			var op *ir.Op
			for _, o := range s.Model.Graph.Order() {
				if o.Name == r.op {
					op = o
				}
			}
			if op == nil {
				return nil, fmt.Errorf("no op named %q", r.op)
			}
			var dm passes.DimMap
			found := false
			for _, d := range passes.AnalyzeFT(s.Model).Of(op) {
				if r.dim == "sum" && d.Merge == passes.MergeSum || d.Merge == passes.MergeConcat && strconv.Itoa(d.OutDim) == r.dim {
					dm, found = d, true
					break
				}
			}
			if !found {
				return nil, fmt.Errorf("%s has no split along %q", op.Describe(), r.dim)
			}
			return nil, passes.InsertSplit(s.Model, &passes.SplitDecision{Op: op, PNum: r.parts, Map: dm})
		},
	}
}

// renderAnalysis writes the result of an analysis the RUN line names
// after the dump (layout's is written at the end, for every RUN that
// includes it).
func renderAnalysis(w *bytes.Buffer, m *ir.Model, p *passes.Pass, res any) error {
	switch r := res.(type) {
	case *memory.Model:
		livenessText(w, r)
	case *passes.FTResult:
		fmt.Fprintf(w, "# %s\n", p.Name)
		return r.Dump(w, m.Graph)
	}
	return nil
}

// livenessText writes M_i at every op and every interval.
func livenessText(w *bytes.Buffer, mem *memory.Model) {
	fmt.Fprintf(w, "# liveness: peak %d at position %d, resident %d, host peak %d\n", mem.Peak, mem.PeakAt, mem.Resident, mem.HostPeak)
	for i, op := range mem.Order {
		fmt.Fprintf(w, "M %4d %10d %s\n", i, mem.Live[i], op.Describe())
	}
	for _, iv := range mem.Intervals {
		what := ""
		switch {
		case iv.Value != nil:
			what = fmt.Sprintf("%v %q", iv.Value, iv.Value.Name)
		case iv.Op != nil:
			what = iv.Op.Describe()
		}
		fmt.Fprintf(w, "I %-10s %10d [%d,%d] %s\n", iv.Kind, iv.Bytes, iv.Start, iv.End, what)
	}
}

// layoutText writes the static layout the layout pass recorded: the
// pool, then each interval's offset, size, lifetime, kind and name, by
// offset and then start.
func layoutText(w *bytes.Buffer, m *ir.Model) error {
	l, err := memory.DecodeLayout(m.Meta[memory.LayoutKey])
	if err != nil {
		return err
	}
	mem, err := memory.Analyze(m.Graph, memory.Options{})
	if err != nil {
		return err
	}
	if _, err := mem.Placement(l); err != nil {
		return err
	}
	fmt.Fprintf(w, "# layout: pool %d bytes, peak %d\n", l.Pool, mem.Peak)
	type row struct {
		off  int64
		iv   memory.Interval
		text string
	}
	var rows []row
	for _, iv := range mem.Intervals {
		var off int64
		if iv.Value != nil {
			off = l.Values[iv.Value.Name]
		} else {
			off = l.Workspace[fmt.Sprint(iv.Start)]
		}
		rows = append(rows, row{off, iv, fmt.Sprintf("# %10d +%-9d [%d,%d] %v %s", off, iv.Bytes, iv.Start, iv.End, iv.Kind, iv.Name())})
	}
	sort.SliceStable(rows, func(i, j int) bool {
		a, b := rows[i], rows[j]
		if a.off != b.off {
			return a.off < b.off
		}
		return a.iv.Start < b.iv.Start
	})
	var lines []string
	for _, r := range rows {
		lines = append(lines, r.text)
	}
	w.WriteString(strings.Join(lines, "\n") + "\n")
	return nil
}

// TestIRCheckRunLine: the RUN line's pass list may have spaces after
// its commas; an unknown pass or option is an error naming it.
func TestIRCheckRunLine(t *testing.T) {
	src := []byte("graph \"g\"\n  %0 = input \"x\" f32[4]\n  %1 = Relu %0 \"a\"\n  return %1\n")
	for _, c := range []struct{ run, err string }{
		{"schedule, liveness ratio=1.0", ""},
		{"schedule,liveness noswap budget=4096", ""},
		{"schedule,nosuchpass", `no pass "nosuchpass"`},
		{"schedule budget=lots", `option "budget=lots"`},
		{"schedule frobnicate=1", `option "frobnicate=1": unknown option`},
		{"insert-split op=a dim=1 parts=2", `node "a" (Relu) has no split along "1"`},
		{"insert-split op=b dim=0 parts=2", `no op named "b"`},
	} {
		m, err := ir.Parse(src)
		if err != nil {
			t.Fatal(err)
		}
		out, err := irCheckRun(m, c.run)
		switch {
		case c.err == "" && err != nil:
			t.Errorf("%q: %v", c.run, err)
		case c.err == "" && !strings.Contains(out, "# liveness: peak"):
			t.Errorf("%q: liveness did not run:\n%s", c.run, out)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%q: got %v, want an error containing %q", c.run, err, c.err)
		}
	}
}
