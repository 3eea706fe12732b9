package report

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/tsplit/tsplit/compiler"
	"github.com/tsplit/tsplit/memory"
	"github.com/tsplit/tsplit/passes"
	"github.com/tsplit/tsplit/policy"
	"github.com/tsplit/tsplit/profile"
	"github.com/tsplit/tsplit/zoo"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// planZoo plans zoo model name at batch into frac of its unplanned peak
// on the titan-rtx profile, as tsplitc does.
func planZoo(t testing.TB, name string, cfg zoo.Config, batch int64, frac float64) *passes.Report {
	t.Helper()
	mp, err := zoo.Build(name, cfg)
	if err != nil {
		t.Fatal(err)
	}
	m, err := compiler.FromProto(mp, "", compiler.Options{Batch: batch})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := compiler.BuildTrainingStep(m, compiler.TrainOptions{}); err != nil {
		t.Fatal(err)
	}
	prof, err := profile.Lookup("titan-rtx")
	if err != nil {
		t.Fatal(err)
	}
	s := passes.NewState(m, &passes.Options{Profile: prof, Policy: policy.Tsplit})
	// The budget is a fraction of the peak of the final schedule.
	if err := s.Run(passes.Schedule); err != nil {
		t.Fatal(err)
	}
	mem, err := memory.Analyze(m.Graph, memory.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s.Opts.Budget = int64(float64(mem.Peak) * frac)
	if err := s.Run(passes.Pipeline...); err != nil {
		t.Fatalf("%s at batch %d, budget %d: %v", name, batch, s.Opts.Budget, err)
	}
	return s.Report
}

// The golden model: small BERT-base at batch 16 in half its peak. It
// needs swaps and a recomputation, and its report is small. (Small
// ResNet-50 at batch 16 is infeasible below about 75% of its peak, and
// its timelines make a golden JSON four times larger.)
const (
	goldenName  = "bert-base"
	goldenBatch = 16
	goldenFrac  = 0.5
)

var (
	smallOnce sync.Once
	small     *passes.Report
)

func smallReport(t *testing.T) *passes.Report {
	t.Helper()
	smallOnce.Do(func() { small = planZoo(t, goldenName, zoo.SmallConfig(goldenName), goldenBatch, goldenFrac) })
	if small == nil {
		t.Fatal("planning the golden model failed")
	}
	return small
}

func render(t *testing.T, f Format, r *passes.Report) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := Write(&b, f, r); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./report/ -update to write it)", err)
	}
	if bytes.Equal(got, want) {
		return
	}
	gl, wl := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
	for i := 0; i < max(len(gl), len(wl)); i++ {
		var g, w string
		if i < len(gl) {
			g = gl[i]
		}
		if i < len(wl) {
			w = wl[i]
		}
		if g != w {
			t.Fatalf("%s differs at line %d:\n got  %.300s\n want %.300s\n(if the planner changed on purpose, run go test ./report/ -update)", path, i+1, g, w)
		}
	}
}

func TestGoldenJSON(t *testing.T) {
	r := smallReport(t)
	got := render(t, JSON, r)
	golden(t, "bert-base-small.json", got)
	// It reads back as the same report.
	var back struct {
		Schema  string  `json:"schema"`
		Summary Summary `json:"summary"`
		passes.Report
	}
	if err := json.Unmarshal(got, &back); err != nil {
		t.Fatal(err)
	}
	if back.Schema != Schema || back.Peak != r.Peak || len(back.Planned) != len(r.Planned) || len(back.Decisions) != len(r.Decisions) {
		t.Fatalf("read back schema %q, peak %d, %d points, %d decisions", back.Schema, back.Peak, len(back.Planned), len(back.Decisions))
	}
	if s := back.Summary; !s.Fits || s.PeakSaved <= 0 || s.Inserted["swap_out"] != r.Swapped || s.PlannedOps != len(r.Planned) {
		t.Fatalf("summary %+v", s)
	}
}

func TestGoldenSVG(t *testing.T) {
	got := render(t, SVG, smallReport(t))
	golden(t, "bert-base-small.svg", got)
	checkXML(t, got)
}

// The synthetic report's SVG does not depend on the planner:
// it changes only when the rendering does.
func TestGoldenSynthetic(t *testing.T) {
	r := synthetic(300)
	svg := render(t, SVG, r)
	checkXML(t, svg)
	golden(t, "synthetic.svg", svg)
}

// Planning and rendering twice gives the same bytes.
func TestDeterministic(t *testing.T) {
	a := render(t, HTML, smallReport(t))
	r2 := planZoo(t, goldenName, zoo.SmallConfig(goldenName), goldenBatch, goldenFrac)
	if b := render(t, HTML, r2); !bytes.Equal(a, b) {
		t.Fatal("two plans of the same model render differently")
	}
}

func checkXML(t *testing.T, data []byte) {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(data))
	for {
		_, err := d.Token()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatalf("not well-formed XML: %v", err)
		}
	}
}

// resourceRef finds what would make a browser fetch something: a URL in
// src/href/action/poster/srcset, url(...) that is not a fragment, or a
// stylesheet import.
var resourceRef = regexp.MustCompile(`(?i)\b(src|href|action|poster|srcset|xlink:href)\s*=|url\(\s*['"]?[^#'"\s)]|@import|<link\b|<iframe\b|<object\b|<embed\b`)

func TestHTMLSelfContained(t *testing.T) {
	r := smallReport(t)
	page := string(render(t, HTML, r))
	for _, bad := range []string{"http://", "https://", "//cdn", "fonts.googleapis"} {
		if strings.Contains(page, bad) {
			t.Errorf("the page contains %q", bad)
		}
	}
	if m := resourceRef.FindString(page); m != "" {
		t.Errorf("the page references a resource: %q", m)
	}
	for _, want := range []string{`<svg class="timeline" id="tl-time"`, `<svg class="timeline" id="tl-index"`, `class="curve planned"`, `class="curve base"`,
		`class="budget"`, `data-phase="backward"`, `data-kind="swap_out" data-count="` + strconv.Itoa(r.Swapped) + `"`, `id="decision-table"`} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %s", want)
		}
	}
	if n := strings.Count(page, `<span class="opt `); n != len(r.Decisions) {
		t.Errorf("%d decision rows, want %d", n, len(r.Decisions))
	}
	// Each inline SVG is well-formed XML.
	for _, m := range regexp.MustCompile(`(?s)<svg .*?</svg>`).FindAllString(page, -1) {
		checkXML(t, []byte(m))
	}
}

// synthetic builds a report of n ops with every kind of inserted op and
// one spike of M far above the rest at op n/3.
func synthetic(n int) *passes.Report {
	r := &passes.Report{Policy: "tsplit", Device: "test", Budget: 600 << 20, BasePeak: 1 << 30, Peak: 590 << 20, Pool: 595 << 20, HostPeak: 200 << 20,
		Swapped: 1, Recomputed: 1, Split: 1, Rounds: 1,
		Decisions: []passes.DecisionReport{
			{Tensor: "a<b>&\"c\"", Bytes: 100 << 20, Option: "swap", PNum: 1, Dim: -1, DeltaM: 100 << 20, At: `node "x" (Conv)`},
			{Tensor: "r", Bytes: 50 << 20, Option: "recompute", PNum: 1, Dim: -1, DeltaM: 50 << 20, DeltaT: 1e-3, At: `node "y" (Relu)`},
			{Tensor: "s", Bytes: 300 << 20, Option: "split+swap", PNum: 4, Dim: 0, DeltaM: 225 << 20, DeltaT: 2e-3, At: `node "z" (MatMul)`}}}
	phase := func(i, n int) string { return phases[min(3, 4*i/n)] }
	t := 0.0
	for i := 0; i < n; i++ {
		live := int64(100<<20) + int64(400*i/n)<<20 + int64(i%7)<<20
		if i == n/3 {
			live = 1 << 30
		}
		r.Base = append(r.Base, passes.TimelinePoint{Op: fmt.Sprintf("op%d", i), Type: "Conv", Phase: phase(i, n), Live: live, Start: t, End: t + 1e-4})
		t += 1e-4
	}
	r.BaseTime = t
	t = 0
	period := max(n/20, 5)
	for i := 0; i < n; i++ {
		p := r.Base[i]
		p.Live = min(p.Live, 590<<20)
		p.Start, p.End = t, t+1e-4
		switch i % period {
		case 1:
			p.Kind, p.Type = "swap_out", "ai.tsplit:SwapOut"
			p.End = t + 5e-3
		case period / 5:
			p.Kind, p.Type = "swap_in", "ai.tsplit:SwapIn"
			p.End = t + 5e-3
		case 2 * period / 5:
			p.Kind = "recompute"
		case 3 * period / 5:
			p.Kind = "split"
		case 4 * period / 5:
			p.Kind = "host"
		}
		if !sideStream(&p) {
			t += 1e-4
		}
		r.Planned = append(r.Planned, p)
	}
	r.Time = t * 1.1
	return r
}

var stepsAttr = regexp.MustCompile(`class="curve (\w+)" data-steps="(\d+)" d="([^"]*)"`)

// A large timeline is max-pooled per pixel column: the paths stay
// within a few points per column and the spike survives.
func TestDownsample(t *testing.T) {
	for _, n := range []int{300, 100_000} {
		r := synthetic(n)
		for _, axis := range []Axis{ByTime, ByIndex} {
			c := newChart(r, axis, true)
			svg := c.svg()
			checkXML(t, []byte(svg))
			ms := stepsAttr.FindAllStringSubmatch(svg, -1)
			if len(ms) != 3 {
				t.Fatalf("n=%d %v: %d curves", n, axis, len(ms))
			}
			for _, m := range ms {
				k, _ := strconv.Atoi(m[2])
				if k > bins || k < 10 {
					t.Errorf("n=%d %v: curve %s has %d steps for %d columns", n, axis, m[1], k, bins)
				}
			}
			// The spike of the base curve is its highest point.
			spikeY := num(c.y(0, float64(1<<30)))
			if !strings.Contains(ms[0][3], "V"+spikeY+"H") && !strings.Contains(ms[0][3], " "+spikeY+"H") {
				t.Errorf("n=%d %v: the spike at y=%s is lost", n, axis, spikeY)
			}
			if len(svg) > 150_000 {
				t.Errorf("n=%d %v: %d bytes of SVG", n, axis, len(svg))
			}
			for _, k := range kinds {
				if !regexp.MustCompile(`data-kind="` + k.kind + `" data-count="[1-9]\d*">.*<path d="M`).MatchString(svg) {
					t.Errorf("n=%d %v: lane %s has no marks", n, axis, k.kind)
				}
			}
		}
	}
	page := string(render(t, HTML, synthetic(100_000)))
	if len(page) > 400_000 {
		t.Errorf("the page of 100000 ops has %d bytes", len(page))
	}
	if strings.Contains(page, `a<b>`) || !strings.Contains(page, `a&lt;b&gt;&amp;`) {
		t.Error("tensor names are not escaped")
	}
}

// A report without timelines (as stored in a planned model's metadata)
// still renders.
func TestNoTimelines(t *testing.T) {
	r := synthetic(10)
	r.Base, r.Planned = nil, nil
	for _, f := range []Format{HTML, SVG, JSON} {
		out := render(t, f, r)
		if f != JSON && !bytes.Contains(out, []byte("no timeline recorded")) {
			t.Errorf("%s: no placeholder", f)
		}
	}
	r.Decisions = nil
	if page := render(t, HTML, r); !bytes.Contains(page, []byte("nothing was swapped")) {
		t.Error("an empty plan does not say so")
	}
	if err := WriteHTML(io.Discard, nil); err == nil {
		t.Error("a nil report renders")
	}
}

func TestFormatOf(t *testing.T) {
	for path, want := range map[string]Format{"a.html": HTML, "b/C.HTM": HTML, "x.svg": SVG, "y.Json": JSON} {
		if f, err := FormatOf(path); err != nil || f != want {
			t.Errorf("%s: %q %v", path, f, err)
		}
	}
	for _, path := range []string{"a.pdf", "plan", "x.svg.gz"} {
		if _, err := FormatOf(path); err == nil {
			t.Errorf("%s: no error", path)
		}
	}
}

// tsplit's choice between its split and swap/recompute-only plans shows
// as a card.
func TestChosenCard(t *testing.T) {
	r := synthetic(10)
	if page := render(t, HTML, r); bytes.Contains(page, []byte("Plan kept")) {
		t.Error("a report without a choice shows one")
	}
	r.Chosen = "swap/recompute-only plan (simulated step 0.0699 s; with splits: 0.0948 s)"
	page := render(t, HTML, r)
	if !bytes.Contains(page, []byte("Plan kept")) || !bytes.Contains(page, []byte("with splits: 0.0948 s")) {
		t.Error("the kept plan is not shown")
	}
}

// A sub-batched plan (moDNN) is measured against the whole batch's
// unplanned step, not the sub-batched one its base timeline draws
// (issue 12 item 4): the cards, the chart's title and the summary say so.
func TestWholeBatchBefore(t *testing.T) {
	r := synthetic(10)
	r.Whole = &passes.WholeBatch{Peak: 3 << 30, Time: r.BaseTime * 0.5, SubBatches: 4}
	if s := Summarize(r); math.Abs(s.Overhead-(r.Time/(r.BaseTime*0.5)-1)) > 1e-12 || s.PeakSaved != 3<<30-r.Peak {
		t.Errorf("summary against the sub-batched step: overhead %g, saved %d", s.Overhead, s.PeakSaved)
	}
	page := render(t, HTML, r)
	for _, want := range []string{"3.00 GiB → 590.00 MiB", "against the whole batch; 4 sub-batches", "the whole batch peaks at 3.00 GiB", "its 4 sub-batches unplanned, peak 1.00 GiB"} {
		if !bytes.Contains(page, []byte(want)) {
			t.Errorf("the page lacks %q", want)
		}
	}
}
