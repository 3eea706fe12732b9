package report

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/tsplit/tsplit/passes"
)

// A run's report draws the measured timeline over the predicted one in
// both HTML charts (along time and op index) and in the SVG, with its
// legend entry and title, and the JSON holds both series; a plan's
// report has no measured curve.
func TestMeasuredOverlay(t *testing.T) {
	plan := smallReport(t)
	r := *plan
	// A made-up measurement: every op 1.5× its predicted span, 4 KiB
	// more in use.
	for _, p := range plan.Planned {
		p.Start, p.End, p.Live = 1.5*p.Start, 1.5*p.End, p.Live+4096
		r.Run = append(r.Run, p)
	}
	html := string(render(t, HTML, &r))
	if n := strings.Count(html, `class="curve measured"`); n != 2 {
		t.Errorf("HTML: %d measured curves, want 2 (time and index charts)", n)
	}
	if n := strings.Count(html, `class="curve planned"`); n != 2 {
		t.Errorf("HTML: %d planned curves, want 2", n)
	}
	for _, want := range []string{">measured</text>", "; measured: peak", "measured for the measured curve"} {
		if !strings.Contains(html, want) {
			t.Errorf("HTML lacks %q", want)
		}
	}
	svg := render(t, SVG, &r)
	checkXML(t, svg)
	if !bytes.Contains(svg, []byte(`class="curve measured"`)) || !bytes.Contains(svg, []byte(`class="curve planned"`)) {
		t.Error("SVG lacks one of the two curves")
	}
	var doc struct {
		Planned  []passes.TimelinePoint `json:"planned_timeline"`
		Measured []passes.TimelinePoint `json:"measured_timeline"`
	}
	if err := json.Unmarshal(render(t, JSON, &r), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Planned) != len(plan.Planned) || len(doc.Measured) != len(r.Run) || doc.Measured[0].Live != plan.Planned[0].Live+4096 {
		t.Errorf("JSON: %d planned and %d measured points", len(doc.Planned), len(doc.Measured))
	}
	if strings.Contains(string(render(t, HTML, plan)), "curve measured") {
		t.Error("a plan's report draws a measured curve")
	}
}
