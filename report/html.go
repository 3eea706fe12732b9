package report

import (
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"strconv"
	"strings"

	"github.com/tsplit/tsplit/internal/units"
	"github.com/tsplit/tsplit/passes"
)

// hoverData is what the page's script reads to show the op under the
// pointer: per axis and panel, the timeline point under each pixel
// column, and those points.
type hoverData struct {
	Left   float64 `json:"left"`
	Width  float64 `json:"width"`
	Bins   int     `json:"bins"`
	Charts map[string][2][]int
	// Points are, for the base and the planned timeline, the rows
	// [position, op, type, phase, kind, live bytes, start s, end s] of
	// the points that some column shows, by position.
	Points [2][][]any
}

// short is a time for the tooltip, to 6 significant digits.
func short(x float64) json.Number { return json.Number(strconv.FormatFloat(x, 'g', 6, 64)) }

type card struct {
	Title, Value, Detail string
	Class                string
}

type decisionRow struct {
	N                        int
	Tensor, Option, At       string
	Bytes, DeltaM            int64
	DeltaT                   float64
	PNum, Dim                int
	OptionClass              string
	BytesS, DeltaMS, DeltaTS string
}

type page struct {
	R          *passes.Report
	S          Summary
	Cards      []card
	SVGTime    template.HTML
	SVGIndex   template.HTML
	HasTime    bool
	Rows       []decisionRow
	TotalBytes string
	TotalDM    string
	TotalDT    string
	Hover      hoverData
	Subtitle   string
	Budget     string
}

// WriteHTML writes the report as one self-contained HTML page: the
// memory timeline before and after planning (inline SVG, along
// simulated time or op index), the predicted overhead and the
// per-tensor decision table. The page loads nothing from anywhere.
func WriteHTML(w io.Writer, r *passes.Report) error {
	if r == nil {
		return fmt.Errorf("report: no report")
	}
	s := Summarize(r)
	p := &page{R: r, S: s}
	// Without simulated times there is only the op-index chart.
	charts := []*chart{newChart(r, ByIndex, false)}
	if ct := newChart(r, ByTime, false); ct.axis == ByTime {
		charts = append([]*chart{ct}, charts...)
		p.HasTime = true
	}
	p.Hover = hoverData{Left: plotLeft, Width: plotW, Bins: bins, Charts: map[string][2][]int{}}
	for _, c := range charts {
		svg := template.HTML(c.svg())
		if c.axis == ByTime {
			p.SVGTime = svg
		} else {
			p.SVGIndex = svg
		}
		p.Hover.Charts[c.axis.String()] = c.hover
	}
	for panel, pts := range [2][]passes.TimelinePoint{r.Base, r.Planned} {
		shown := make([]bool, len(pts))
		for _, c := range charts {
			for _, at := range c.hover[panel] {
				if at >= 0 {
					shown[at] = true
				}
			}
		}
		p.Hover.Points[panel] = [][]any{}
		for at, ok := range shown {
			if ok {
				q := &pts[at]
				p.Hover.Points[panel] = append(p.Hover.Points[panel], []any{at, q.Op, q.Type, q.Phase, q.Kind, q.Live, short(q.Start), short(q.End)})
			}
		}
	}
	p.Subtitle = fmt.Sprintf("device %s · policy %s · budget %s · %d decisions in %d rounds", r.Device, r.Policy, units.Bytes(r.Budget), len(r.Decisions), r.Rounds)
	p.Budget = units.Bytes(r.Budget)
	p.Cards = cards(r, s)
	var tb, tdm int64
	var tdt float64
	for i, d := range r.Decisions {
		row := decisionRow{N: i + 1, Tensor: d.Tensor, Option: d.Option, At: d.At, Bytes: d.Bytes, DeltaM: d.DeltaM, DeltaT: d.DeltaT,
			PNum: d.PNum, Dim: d.Dim, BytesS: units.Bytes(d.Bytes), DeltaMS: units.Bytes(d.DeltaM), DeltaTS: fmtSeconds(d.DeltaT)}
		switch d.Option {
		case "swap":
			row.OptionClass = "opt-swap"
		case "recompute":
			row.OptionClass = "opt-recompute"
		default:
			row.OptionClass = "opt-split"
		}
		p.Rows = append(p.Rows, row)
		tb += d.Bytes
		tdm += d.DeltaM
		tdt += d.DeltaT
	}
	p.TotalBytes, p.TotalDM, p.TotalDT = units.Bytes(tb), units.Bytes(tdm), fmtSeconds(tdt)
	return pageTmpl.Execute(w, p)
}

func pct(x float64) string { return fmt.Sprintf("%+.1f%%", 100*x) }

func cards(r *passes.Report, s Summary) []card {
	var out []card
	saved := ""
	basePeak, baseTime := r.Before()
	if basePeak > 0 {
		saved = fmt.Sprintf("%s: %s saved", pct(float64(r.Peak)/float64(basePeak)-1), units.Bytes(s.PeakSaved))
	}
	if w := r.Whole; w != nil {
		saved += fmt.Sprintf(" (against the whole batch; %d sub-batches)", w.SubBatches)
	}
	out = append(out, card{Title: "Peak memory", Value: units.Bytes(basePeak) + " → " + units.Bytes(r.Peak), Detail: saved})
	fit, cls := "fits the budget", "good"
	if !s.Fits {
		fit, cls = "over the budget", "bad"
	}
	if r.Pool > 0 {
		fit += fmt.Sprintf("; %s of fragmentation", units.Bytes(r.Pool-r.Peak))
	}
	out = append(out, card{Title: "Pool / budget", Value: units.Bytes(r.Pool) + " / " + units.Bytes(r.Budget), Detail: fit, Class: cls})
	over, cls := "not simulated", ""
	if baseTime > 0 {
		over = pct(s.Overhead) + " predicted overhead"
		if s.Overhead > 0.1 {
			cls = "warn"
		}
	}
	out = append(out, card{Title: "Step time", Value: fmtSeconds(baseTime) + " → " + fmtSeconds(r.Time), Detail: over, Class: cls})
	out = append(out, card{Title: "Host memory", Value: units.Bytes(r.HostPeak), Detail: "peak of swapped data held on the host"})
	out = append(out, card{Title: "Swapped · recomputed · split", Value: fmt.Sprintf("%d · %d · %d", r.Swapped, r.Recomputed, r.Split),
		Detail: fmt.Sprintf("%s · %s · %s", units.Bytes(s.Moved["swap"]), units.Bytes(s.Moved["recompute"]), units.Bytes(s.Moved["split+swap"]))})
	var ins []string
	total := 0
	for _, k := range kinds {
		if n := s.Inserted[k.kind]; n > 0 {
			ins = append(ins, fmt.Sprintf("%d %s", n, k.label))
			total += n
		}
	}
	detail := "none inserted"
	if total > 0 {
		detail = strings.Join(ins, ", ")
	}
	out = append(out, card{Title: "Ops", Value: strconv.Itoa(s.BaseOps) + " → " + strconv.Itoa(s.PlannedOps), Detail: detail})
	if r.Chosen != "" {
		// tsplit made a split plan and a swap/recompute-only plan.
		out = append(out, card{Title: "Plan kept", Value: strings.SplitN(r.Chosen, " (", 2)[0], Detail: r.Chosen})
	}
	return out
}

var pageTmpl = template.Must(template.New("page").Parse(pageHTML))

const pageHTML = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="tsplitc">
<title>tsplit plan report: {{.R.Device}}, budget {{.Budget}}</title>
<style>
:root { --fg: #202124; --muted: #5f6368; --line: #dadce0; --bg: #f8f9fa; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; color: var(--fg); background: var(--bg); }
main { max-width: 1440px; margin: 0 auto; padding: 14px 24px 40px; }
h1 { font-size: 20px; margin: 0; }
h2 { font-size: 16px; margin: 0 0 8px; }
.sub { color: var(--muted); margin: 2px 0 12px; }
section { background: #fff; border: 1px solid var(--line); border-radius: 8px; padding: 12px 16px; margin-bottom: 14px; }
.cards { display: grid; grid-template-columns: repeat(6, minmax(0, 1fr)); gap: 10px; background: none; border: 0; padding: 0; }
.card { background: #fff; border: 1px solid var(--line); border-radius: 8px; padding: 8px 12px; }
.card h3 { font-size: 12px; font-weight: 600; color: var(--muted); margin: 0; text-transform: uppercase; letter-spacing: .03em; }
.card .v { font-size: 15px; font-weight: 650; margin: 2px 0; }
.card .d { font-size: 12px; color: var(--muted); }
.card.good .d { color: #188038; } .card.bad .d, .card.bad .v { color: #d93025; } .card.warn .d { color: #b06000; }
.head { display: flex; align-items: baseline; gap: 16px; }
.toggle { margin-left: auto; font-size: 13px; }
.toggle button { font: inherit; border: 1px solid var(--line); background: #fff; padding: 2px 10px; cursor: pointer; }
.toggle button:first-of-type { border-radius: 4px 0 0 4px; } .toggle button:last-of-type { border-radius: 0 4px 4px 0; margin-left: -1px; }
.toggle button.on { background: #e8f0fe; border-color: #1a73e8; color: #1a73e8; position: relative; }
.chart { position: relative; }
.chart.hidden { display: none; }
svg.timeline { display: block; width: 100%; height: auto; }
.tip { position: absolute; pointer-events: none; background: rgba(32,33,36,.92); color: #fff; font-size: 12px; padding: 6px 8px; border-radius: 4px; max-width: 460px; white-space: nowrap; overflow: hidden; text-overflow: ellipsis; z-index: 2; }
.tip b { font-weight: 600; }
.note { color: var(--muted); font-size: 13px; margin: 6px 0 0; }
table { border-collapse: collapse; width: 100%; font-size: 13px; }
th, td { padding: 3px 8px; border-bottom: 1px solid #eceff1; text-align: left; }
th { position: sticky; top: 0; background: #fff; cursor: pointer; user-select: none; white-space: nowrap; border-bottom: 1px solid var(--line); }
th.num, td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
th[aria-sort=ascending]::after { content: " ▲"; } th[aria-sort=descending]::after { content: " ▼"; }
td.name { font-family: ui-monospace, "DejaVu Sans Mono", monospace; font-size: 12px; max-width: 420px; overflow-wrap: anywhere; }
tfoot td { font-weight: 600; border-top: 1px solid var(--line); }
.opt { display: inline-block; padding: 0 6px; border-radius: 8px; font-size: 12px; color: #fff; }
.opt-swap { background: #e37400; } .opt-recompute { background: #9334e6; } .opt-split { background: #007b83; }
.scroll { max-height: 560px; overflow: auto; }
footer { color: var(--muted); font-size: 12px; }
@media (max-width: 1000px) { .cards { grid-template-columns: repeat(2, minmax(0, 1fr)); } }
</style>
</head>
<body>
<main>
<h1>tsplit plan report</h1>
<p class="sub">{{.Subtitle}}</p>
<section class="cards">
{{- range .Cards}}
<div class="card {{.Class}}"><h3>{{.Title}}</h3><div class="v" title="{{.Value}}">{{.Value}}</div><div class="d">{{.Detail}}</div></div>
{{- end}}
</section>
<section id="timeline">
<div class="head"><h2>Memory timeline</h2>
<span class="note">M_i, the device memory live at each op, along the schedule; hover for the op.</span>
{{- if .HasTime}}
<div class="toggle" role="group" aria-label="x axis">x axis:
<button type="button" data-axis="time" class="on">simulated time</button><button type="button" data-axis="index">op index</button></div>
{{- end}}
</div>
{{- if .HasTime}}
<div class="chart" data-axis="time">{{.SVGTime}}</div>
{{- end}}
<div class="chart{{if .HasTime}} hidden{{end}}" data-axis="index">{{.SVGIndex}}</div>
<div class="tip" id="tip" hidden></div>
<p class="note">Top: the unplanned step. Bottom: the planned step, with the unplanned curve dashed under it. The dashed red line is the budget; shading marks the phases; the lanes under the plot show where the plan inserted swap-outs, swap-ins (as transfer bars over their simulated span when x is time), recomputations and split micro-ops. Each pixel column shows the highest M_i of the ops in it.</p>
</section>
<section id="decisions">
<h2>Decisions ({{len .Rows}})</h2>
{{- if .Rows}}
<div class="scroll">
<table id="decision-table">
<thead><tr><th class="num" data-type="num">#</th><th data-type="text">Tensor</th><th class="num" data-type="num">Size</th><th data-type="text">Option</th><th class="num" data-type="num">p_num</th><th class="num" data-type="num">dim</th><th class="num" data-type="num" title="memory saved at the bottleneck">ΔM</th><th class="num" data-type="num" title="predicted step-time cost">ΔT</th><th data-type="text">Bottleneck op</th></tr></thead>
<tbody>
{{- range .Rows}}
<tr><td class="num">{{.N}}</td><td class="name">{{.Tensor}}</td><td class="num" data-v="{{.Bytes}}">{{.BytesS}}</td><td><span class="opt {{.OptionClass}}">{{.Option}}</span></td><td class="num">{{.PNum}}</td><td class="num" data-v="{{.Dim}}">{{if lt .Dim 0}}–{{else}}{{.Dim}}{{end}}</td><td class="num" data-v="{{.DeltaM}}">{{.DeltaMS}}</td><td class="num" data-v="{{.DeltaT}}">{{.DeltaTS}}</td><td class="name">{{.At}}</td></tr>
{{- end}}
</tbody>
<tfoot><tr><td></td><td>total</td><td class="num">{{.TotalBytes}}</td><td></td><td></td><td></td><td class="num">{{.TotalDM}}</td><td class="num">{{.TotalDT}}</td><td></td></tr></tfoot>
</table>
</div>
<p class="note">In the order the planner made them. ΔM is the memory the decision frees at its bottleneck op (the op whose M_i was over the target), ΔT its predicted cost in step time (0 when the transfer hides under compute). p_num and dim are the split's piece count and axis (1 and – when the tensor is not split). Click a column to sort.</p>
{{- else}}
<p class="note">The unplanned step fits the budget: nothing was swapped, recomputed or split.</p>
{{- end}}
</section>
<footer>Written by tsplitc. Step times and M_i are the planner's predictions (cost model and memory model), not measurements.</footer>
</main>
<script type="application/json" id="hover-data">{{.Hover}}</script>
<script>
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("hover-data").textContent);
  var points = data.Points.map(function (rows) {
    var m = {};
    rows.forEach(function (q) { m[q[0]] = q; });
    return m;
  });
  var tip = document.getElementById("tip");
  var section = document.getElementById("timeline");
  function bytes(b) {
    var u = ["B", "KiB", "MiB", "GiB", "TiB"], i = 0;
    while (b >= 1024 && i < u.length - 1) { b /= 1024; i++; }
    return (i ? b.toFixed(2) : b) + " " + u[i];
  }
  function secs(s) {
    return s >= 1 ? s.toFixed(3) + " s" : s >= 1e-3 ? (s * 1e3).toFixed(3) + " ms" : (s * 1e6).toFixed(1) + " µs";
  }
  function line(parent, label, text) {
    var d = document.createElement("div");
    if (label) { var b = document.createElement("b"); b.textContent = label + " "; d.appendChild(b); }
    d.appendChild(document.createTextNode(text));
    parent.appendChild(d);
  }
  document.querySelectorAll("svg.timeline").forEach(function (svg) {
    var axis = svg.getAttribute("data-axis");
    var cols = data.Charts[axis];
    var panels = svg.querySelectorAll("g.panel");
    var cross = document.createElementNS(svg.namespaceURI, "path");
    cross.setAttribute("stroke", "#202124");
    cross.setAttribute("stroke-width", "0.6");
    cross.setAttribute("pointer-events", "none");
    svg.appendChild(cross);
    function hide() { tip.hidden = true; cross.setAttribute("d", ""); }
    svg.addEventListener("mouseleave", hide);
    svg.addEventListener("mousemove", function (e) {
      var pt = svg.createSVGPoint();
      pt.x = e.clientX; pt.y = e.clientY;
      var p = pt.matrixTransform(svg.getScreenCTM().inverse());
      var panel = -1, top = 0, h = 0;
      panels.forEach(function (g, i) {
        var t = +g.getAttribute("data-top"), hh = +g.getAttribute("data-height");
        if (p.y >= t && p.y <= t + hh) { panel = i; top = t; h = hh; }
      });
      var col = Math.floor((p.x - data.left) / (data.width / data.bins));
      if (panel < 0 || !cols || col < 0 || col >= data.bins || cols[panel][col] < 0) { hide(); return; }
      var at = cols[panel][col], q = points[panel][at];
      cross.setAttribute("d", "M" + p.x + " " + top + "v" + h);
      tip.textContent = "";
      line(tip, "", q[1]);
      line(tip, "", q[2] + " · " + q[3] + (q[4] ? " · inserted " + q[4] : "") + " · op #" + at);
      line(tip, "M_i", bytes(q[5]));
      if (q[7] > 0) line(tip, "time", secs(q[6]) + " – " + secs(q[7]));
      tip.hidden = false;
      var box = section.getBoundingClientRect();
      var x = e.clientX - box.left + 14, y = e.clientY - box.top + 14;
      if (x + tip.offsetWidth > box.width) x = e.clientX - box.left - tip.offsetWidth - 14;
      tip.style.left = x + "px"; tip.style.top = y + "px";
    });
  });
  document.querySelectorAll(".toggle button").forEach(function (b) {
    b.addEventListener("click", function () {
      var axis = b.getAttribute("data-axis");
      document.querySelectorAll(".toggle button").forEach(function (o) { o.classList.toggle("on", o === b); });
      document.querySelectorAll(".chart").forEach(function (c) { c.classList.toggle("hidden", c.getAttribute("data-axis") !== axis); });
      tip.hidden = true;
    });
  });
  var table = document.getElementById("decision-table");
  if (table) {
    var body = table.tBodies[0];
    table.querySelectorAll("th").forEach(function (th, i) {
      th.addEventListener("click", function () {
        var num = th.getAttribute("data-type") === "num";
        var dir = th.getAttribute("aria-sort") === "ascending" ? -1 : 1;
        table.querySelectorAll("th").forEach(function (o) { o.removeAttribute("aria-sort"); });
        th.setAttribute("aria-sort", dir > 0 ? "ascending" : "descending");
        var rows = Array.prototype.slice.call(body.rows);
        function key(r) {
          var c = r.cells[i], v = c.getAttribute("data-v");
          if (v === null) v = c.textContent;
          return num ? parseFloat(v) : v;
        }
        rows.sort(function (a, b) { var x = key(a), y = key(b); return (x < y ? -1 : x > y ? 1 : 0) * dir; });
        rows.forEach(function (r) { body.appendChild(r); });
      });
    });
  }
  document.body.setAttribute("data-ready", "1");
})();
</script>
</body>
</html>
`
