package report

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/tsplit/tsplit/internal/units"
	"github.com/tsplit/tsplit/passes"
)

// Axis is what the x axis of the timeline measures.
type Axis int

const (
	// ByTime places each op at its simulated start time (the default):
	// the planned curve is as much longer as planning slows the step.
	ByTime Axis = iota
	// ByIndex places op i of the schedule at x = i.
	ByIndex
)

func (a Axis) String() string {
	if a == ByIndex {
		return "index"
	}
	return "time"
}

// Geometry of the chart, in SVG user units (pixels at 100%).
const (
	chartW     = 1200.0
	plotLeft   = 84.0
	plotRight  = 1184.0
	plotW      = plotRight - plotLeft // one pooling bin per pixel column
	panelH     = 190.0
	laneH      = 15.0
	bins       = int(plotW)
	yHeadroom  = 1.08 // the y axis ends this much above the highest value
	maxXTicks  = 10
	maxYTicks  = 5
	minBarW    = 1.0 // narrowest mark drawn, in pixels
	mergeSlack = 0.5 // marks closer than this (pixels) are merged
)

// Kinds of inserted ops, in lane order, with their lane labels.
var kinds = []struct{ kind, label string }{
	{"swap_out", "swap-out"},
	{"swap_in", "swap-in"},
	{"recompute", "recompute"},
	{"split", "split"},
	{"host", "host"},
}

// Phases in schedule order.
var phases = []string{"forward", "loss", "backward", "update"}

// seg is one step of a memory curve: M = v over [x0, x1) in data units
// (seconds or op positions); at is the timeline point that has that M.
type seg struct {
	x0, x1 float64
	v      int64
	at     int
}

// sideStream tells the ops that run beside the compute stream: their
// simulated times overlap the compute ops', so the time axis places
// their M_i with the compute op issued before them.
func sideStream(p *passes.TimelinePoint) bool {
	return p.Kind == "swap_out" || p.Kind == "swap_in" || p.Kind == "host"
}

// hasTimes tells whether a timeline carries simulated times.
func hasTimes(pts []passes.TimelinePoint) bool {
	for i := range pts {
		if pts[i].End > 0 {
			return true
		}
	}
	return false
}

// segments turns a timeline into a step function along the axis. By
// time, each compute op holds from its start to the next compute op's
// start, at the highest M_i of its own position and of the side-stream
// ops issued after it, so no peak is lost.
func segments(pts []passes.TimelinePoint, axis Axis) []seg {
	out := make([]seg, 0, len(pts))
	if axis == ByIndex {
		for i := range pts {
			out = append(out, seg{float64(i), float64(i + 1), pts[i].Live, i})
		}
		return out
	}
	for i := range pts {
		p := &pts[i]
		if sideStream(p) && len(out) > 0 {
			if last := &out[len(out)-1]; p.Live > last.v {
				last.v, last.at = p.Live, i
			}
			continue
		}
		if len(out) > 0 {
			if last := &out[len(out)-1]; p.Start > last.x0 {
				last.x1 = p.Start
			}
		}
		out = append(out, seg{p.Start, p.End, p.Live, i})
	}
	return out
}

// bin is one pixel column of a pooled curve.
type bin struct {
	v  int64
	at int // -1: no op in this column
}

// pool max-pools segments into n columns over [0, xmax).
func pool(segs []seg, xmax float64, n int) []bin {
	out := make([]bin, n)
	for i := range out {
		out[i].at = -1
	}
	if xmax <= 0 {
		return out
	}
	w := xmax / float64(n)
	for _, s := range segs {
		a := int(s.x0 / w)
		b := int(math.Ceil(s.x1/w)) - 1
		if b < a {
			b = a
		}
		a, b = max(a, 0), min(b, n-1)
		for c := a; c <= b; c++ {
			if out[c].at < 0 || s.v > out[c].v {
				out[c] = bin{s.v, s.at}
			}
		}
	}
	return out
}

// steps returns the curve in pixels: exact when it has at most one
// step per pixel column, max-pooled per column otherwise; consecutive
// steps at the same height are merged.
func steps(segs []seg, xmax float64) []seg {
	var raw []seg
	if len(segs) <= bins {
		for _, s := range segs {
			raw = append(raw, seg{plotLeft + s.x0/xmax*plotW, plotLeft + s.x1/xmax*plotW, s.v, s.at})
		}
	} else {
		w := plotW / float64(bins)
		for c, b := range pool(segs, xmax, bins) {
			if b.at >= 0 {
				raw = append(raw, seg{plotLeft + float64(c)*w, plotLeft + float64(c+1)*w, b.v, b.at})
			}
		}
	}
	var out []seg
	for _, s := range raw {
		if n := len(out); n > 0 && out[n-1].v == s.v && math.Abs(out[n-1].x1-s.x0) < 1e-9 {
			out[n-1].x1 = s.x1
			continue
		}
		out = append(out, s)
	}
	return out
}

// num formats a coordinate with one decimal, without a trailing ".0".
func num(x float64) string {
	s := strconv.FormatFloat(x, 'f', 1, 64)
	s = strings.TrimSuffix(s, ".0")
	if s == "-0" {
		s = "0"
	}
	return s
}

// esc escapes text for XML and HTML.
func esc(s string) string {
	r := strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;", "'", "&#39;")
	return r.Replace(s)
}

// niceStep returns a 1-2-5 step that cuts span into at most n parts.
func niceStep(span float64, n int) float64 {
	if span <= 0 {
		return 1
	}
	raw := span / float64(n)
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, f := range []float64{1, 2, 2.5, 5, 10} {
		if f*p >= raw {
			return f * p
		}
	}
	return 10 * p
}

// byteUnit picks a binary unit for an axis that reaches max bytes.
func byteUnit(max int64) (float64, string) {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	u, i := 1.0, 0
	for i < len(units)-1 && float64(max)/(u*1024) >= 1 {
		u *= 1024
		i++
	}
	return u, units[i]
}

// timeUnit picks a unit for an axis that reaches max seconds.
func timeUnit(max float64) (float64, string) {
	switch {
	case max >= 1:
		return 1, "s"
	case max >= 1e-3:
		return 1e3, "ms"
	default:
		return 1e6, "µs"
	}
}

// fmtTick formats a tick value without float noise.
func fmtTick(v float64) string {
	s := strconv.FormatFloat(v, 'f', 6, 64)
	s = strings.TrimRight(s, "0")
	return strings.TrimSuffix(s, ".")
}

// fmtSeconds formats a duration for labels.
func fmtSeconds(s float64) string {
	switch {
	case s == 0:
		return "0"
	case s >= 1:
		return fmt.Sprintf("%.3f s", s)
	case s >= 1e-3:
		return fmt.Sprintf("%.3f ms", s*1e3)
	default:
		return fmt.Sprintf("%.1f µs", s*1e6)
	}
}

// chart is one rendering of the timeline along one axis.
type chart struct {
	r          *passes.Report
	axis       Axis
	standalone bool // a whole SVG file: xmlns, title and fixed size
	xmax       float64
	ymax       float64
	base, plan []seg
	// run is the measured timeline drawn over plan (a run's report).
	run []seg
	b   strings.Builder
	// hover is, per panel, the timeline point under each pixel column
	// (-1: none), for the page's tooltip.
	hover [2][]int
	top   [2]float64 // plot top of each panel
}

// newChart lays out the timeline of r along axis; it falls back to op
// indices when the timelines carry no simulated times.
func newChart(r *passes.Report, axis Axis, standalone bool) *chart {
	if axis == ByTime && !hasTimes(r.Base) && !hasTimes(r.Planned) {
		axis = ByIndex
	}
	c := &chart{r: r, axis: axis, standalone: standalone}
	c.base, c.plan, c.run = segments(r.Base, axis), segments(r.Planned, axis), segments(r.Run, axis)
	for _, ss := range [][]seg{c.base, c.plan, c.run} {
		for _, s := range ss {
			c.xmax = max(c.xmax, s.x1)
		}
	}
	if axis == ByTime {
		c.xmax = max(c.xmax, r.BaseTime, r.Time)
	}
	if c.xmax <= 0 {
		c.xmax = 1
	}
	wholePeak, _ := r.Before()
	top := max(r.BasePeak, wholePeak, r.Peak, r.Budget, r.Pool)
	for _, ps := range [][]passes.TimelinePoint{r.Base, r.Planned, r.Run} {
		for i := range ps {
			top = max(top, ps[i].Live)
		}
	}
	c.ymax = float64(top) * yHeadroom
	if c.ymax <= 0 {
		c.ymax = 1
	}
	return c
}

func (c *chart) x(v float64) float64 { return plotLeft + v/c.xmax*plotW }

func (c *chart) y(panel int, v float64) float64 {
	return c.top[panel] + panelH - v/c.ymax*panelH
}

func (c *chart) pf(format string, args ...any) { fmt.Fprintf(&c.b, format, args...) }

// svg renders the chart.
func (c *chart) svg() string {
	lanes := 4
	if c.count("host") > 0 {
		lanes = 5
	}
	head := 0.0 // the title row of a standalone file
	if c.standalone {
		head = 26
	}
	c.top = [2]float64{54 + head, 54 + head + panelH + 58}
	lanesTop := c.top[1] + panelH + 8
	axisY := lanesTop + float64(lanes)*laneH + 4
	height := axisY + 44
	id := "tl-" + c.axis.String()
	if c.standalone {
		c.pf(`<svg xmlns="http://www.w3.org/2000/svg" width="%s" height="%s" viewBox="0 0 %s %s" font-family="system-ui, -apple-system, 'Segoe UI', Roboto, 'DejaVu Sans', sans-serif" font-size="12">`+"\n",
			num(chartW), num(height), num(chartW), num(height))
	} else {
		c.pf(`<svg class="timeline" id="%s" data-axis="%s" viewBox="0 0 %s %s" font-size="12" role="img" aria-labelledby="%s-title">`+"\n",
			id, c.axis, num(chartW), num(height), id)
	}
	c.pf(`<title id="%s-title">Memory timeline before and after planning (x: %s)</title>`+"\n", id, c.axisTitle())
	c.pf(`<rect width="%s" height="%s" fill="#fff"/>`+"\n", num(chartW), num(height))
	c.header(head)
	r := c.r
	over := ""
	basePeak, baseTime := r.Before()
	if baseTime > 0 {
		over = fmt.Sprintf(" (%+.1f%%)", 100*(r.Time/baseTime-1))
	}
	before := fmt.Sprintf("Before planning: peak %s, step %s", units.Bytes(r.BasePeak), fmtSeconds(r.BaseTime))
	if w := r.Whole; w != nil {
		before = fmt.Sprintf("Before planning: the whole batch peaks at %s, step %s; drawn: its %d sub-batches unplanned, peak %s, step %s",
			units.Bytes(basePeak), fmtSeconds(baseTime), w.SubBatches, units.Bytes(r.BasePeak), fmtSeconds(r.BaseTime))
	}
	titles := [2]string{
		before,
		fmt.Sprintf("After planning (%s): peak %s, pool %s, step %s%s", r.Policy, units.Bytes(r.Peak), units.Bytes(r.Pool), fmtSeconds(r.Time), over),
	}
	if len(r.Run) > 0 {
		var peak int64
		for i := range r.Run {
			peak = max(peak, r.Run[i].Live)
		}
		titles[1] += fmt.Sprintf("; measured: peak %s, step %s", units.Bytes(peak), fmtSeconds(r.Run[len(r.Run)-1].End))
	}
	for panel, ss := range [2][]seg{c.base, c.plan} {
		pts := r.Base
		if panel == 1 {
			pts = r.Planned
		}
		c.pf(`<g class="panel" id="%s-%s" data-top="%s" data-height="%s">`+"\n", id, [2]string{"base", "planned"}[panel], num(c.top[panel]), num(panelH))
		c.pf(`<text x="%s" y="%s" font-weight="600" font-size="13">%s</text>`+"\n", num(plotLeft), num(c.top[panel]-8), esc(titles[panel]))
		c.phaseBands(panel, pts)
		c.yAxis(panel)
		if panel == 1 && len(c.base) > 0 {
			c.curve(panel, c.base, "ghost", "#5f6368", 0.9, "3 2", false)
		}
		if len(ss) == 0 {
			c.pf(`<text x="%s" y="%s" text-anchor="middle" fill="#80868b">no timeline recorded</text>`+"\n", num(plotLeft+plotW/2), num(c.top[panel]+panelH/2))
		} else {
			color := "#5f6368"
			if panel == 1 {
				color = "#1a73e8"
			}
			c.curve(panel, ss, [2]string{"base", "planned"}[panel], color, 1.4, "", true)
			c.peak(panel, ss, pts)
		}
		if panel == 1 && len(c.run) > 0 {
			c.curve(panel, c.run, "measured", measuredColor, 1.2, "", false)
		}
		c.budget(panel)
		c.frame(panel)
		c.xTicks(c.top[panel]+panelH, panel == 0)
		c.pf("</g>\n")
		c.hover[panel] = c.hoverBins(ss)
	}
	c.lanes(lanesTop, lanes)
	c.xTicks(axisY, true)
	c.pf(`<text x="%s" y="%s" text-anchor="middle" fill="#3c4043">%s</text>`+"\n", num(plotLeft+plotW/2), num(axisY+34), esc(c.axisTitle()))
	c.pf("</svg>\n")
	return c.b.String()
}

func (c *chart) axisTitle() string {
	if c.axis == ByIndex {
		return "op index in the schedule"
	}
	_, u := timeUnit(c.xmax)
	if len(c.run) > 0 {
		return "time (" + u + "): simulated, measured for the measured curve"
	}
	return "simulated time (" + u + ")"
}

// header draws the title line (of a standalone file) and the legend.
func (c *chart) header(head float64) {
	r := c.r
	if c.standalone {
		c.pf(`<text x="%s" y="22" font-size="15" font-weight="700">Memory timeline: M_i along the schedule</text>`+"\n", num(plotLeft))
		c.pf(`<text x="%s" y="22" text-anchor="end" fill="#3c4043">%s, policy %s, budget %s</text>`+"\n", num(plotRight), esc(r.Device), esc(r.Policy), units.Bytes(r.Budget))
	}
	x := plotLeft
	y := 18 + head
	item := func(sw string, label string) {
		c.pf(`<g class="legend">%s<text x="%s" y="%s">%s</text></g>`+"\n", sw, num(x+22), num(y+4), esc(label))
		x += 22 + 7*float64(len([]rune(label))) + 18
	}
	for _, ph := range phases {
		item(fmt.Sprintf(`<rect x="%s" y="%s" width="16" height="10" fill="%s"/>`, num(x), num(y-5), phaseColor[ph]), ph)
	}
	item(fmt.Sprintf(`<path d="M%s %sh16" stroke="#5f6368" stroke-width="1.4"/>`, num(x), num(y)), "before")
	item(fmt.Sprintf(`<path d="M%s %sh16" stroke="#1a73e8" stroke-width="1.4"/>`, num(x), num(y)), "after")
	item(fmt.Sprintf(`<path d="M%s %sh16" stroke="#5f6368" stroke-width="0.9" stroke-dasharray="3 2"/>`, num(x), num(y)), "before (under after)")
	if len(c.run) > 0 {
		item(fmt.Sprintf(`<path d="M%s %sh16" stroke="%s" stroke-width="1.2"/>`, num(x), num(y), measuredColor), "measured")
	}
	item(fmt.Sprintf(`<path d="M%s %sh16" stroke="#d93025" stroke-width="1.2" stroke-dasharray="6 3"/>`, num(x), num(y)), "budget")
}

// measuredColor draws a run's measured memory timeline.
const measuredColor = "#202124"

var phaseColor = map[string]string{
	"forward":  "#e8f0fe",
	"loss":     "#fef7e0",
	"backward": "#fce8e6",
	"update":   "#e6f4ea",
}

var kindColor = map[string]string{
	"swap_out":  "#e37400",
	"swap_in":   "#188038",
	"recompute": "#9334e6",
	"split":     "#007b83",
	"host":      "#80868b",
}

// minPhaseRun is the shortest run of ops of one phase, in schedule
// order, that the shading shows; shorter runs (a weight transpose of
// the backward pass scheduled during the forward one) take the phase of
// the run before them.
const minPhaseRun = 8

// phaseSeg is the span of a compute op with its smoothed phase.
type phaseSeg struct {
	x0, x1 float64
	phase  string
}

// phaseSegs lists the compute ops' spans (without the gaps where the
// compute stream waits) with phases smoothed over short runs.
func (c *chart) phaseSegs(pts []passes.TimelinePoint) []phaseSeg {
	var out []phaseSeg
	for i := range pts {
		switch {
		case c.axis == ByIndex:
			out = append(out, phaseSeg{float64(i), float64(i + 1), pts[i].Phase})
		case !sideStream(&pts[i]):
			out = append(out, phaseSeg{pts[i].Start, pts[i].End, pts[i].Phase})
		}
	}
	prev := ""
	for i := 0; i < len(out); {
		j := i
		for j < len(out) && out[j].phase == out[i].phase {
			j++
		}
		if prev != "" && j-i < minPhaseRun && j < len(out) {
			for k := i; k < j; k++ {
				out[k].phase = prev
			}
		} else {
			prev = out[i].phase
		}
		i = j
	}
	return out
}

// phaseBands shades each pixel column by the phase that takes most of
// it (by time, or by op count along the index axis), merged into runs.
// Columns where the compute stream only waits keep the phase before.
func (c *chart) phaseBands(panel int, pts []passes.TimelinePoint) {
	n := bins
	weight := make([]map[string]float64, n)
	w := c.xmax / float64(n)
	end := 0.0
	for _, s := range c.phaseSegs(pts) {
		end = max(end, s.x1)
		a := max(int(s.x0/w), 0)
		b := min(int(math.Ceil(s.x1/w))-1, n-1)
		for k := a; k <= b; k++ {
			lo, hi := max(s.x0, float64(k)*w), min(s.x1, float64(k+1)*w)
			if weight[k] == nil {
				weight[k] = map[string]float64{}
			}
			weight[k][s.phase] += max(hi-lo, 1e-12*w)
		}
	}
	col := make([]string, n)
	for k := range col {
		best, bw := "", 0.0
		for ph, v := range weight[k] {
			if v > bw || (v == bw && ph < best) {
				best, bw = ph, v
			}
		}
		switch {
		case best != "":
			col[k] = best
		case k > 0 && float64(k)*w < end:
			col[k] = col[k-1]
		}
	}
	pw := plotW / float64(n)
	for k := 0; k < n; {
		j := k
		for j < n && col[j] == col[k] {
			j++
		}
		if col[k] != "" {
			fill, ok := phaseColor[col[k]]
			if !ok {
				fill = "#f1f3f4"
			}
			c.pf(`<rect class="phase" data-phase="%s" x="%s" y="%s" width="%s" height="%s" fill="%s"/>`+"\n",
				esc(col[k]), num(plotLeft+float64(k)*pw), num(c.top[panel]), num(float64(j-k)*pw), num(panelH), fill)
		}
		k = j
	}
}

func (c *chart) yAxis(panel int) {
	unit, name := byteUnit(int64(c.ymax))
	step := niceStep(c.ymax/unit, maxYTicks)
	for v := 0.0; v*unit <= c.ymax; v += step {
		y := c.y(panel, v*unit)
		c.pf(`<path d="M%s %sH%s" stroke="#e0e0e0" stroke-width="0.6"/><text x="%s" y="%s" text-anchor="end" fill="#5f6368" font-size="11">%s %s</text>`+"\n",
			num(plotLeft), num(y), num(plotRight), num(plotLeft-6), num(y+4), fmtTick(v), name)
	}
}

func (c *chart) xTicks(y float64, labels bool) {
	scale, _ := timeUnit(c.xmax)
	if c.axis == ByIndex {
		scale = 1
	}
	step := niceStep(c.xmax*scale, maxXTicks)
	if c.axis == ByIndex && step < 1 {
		step = 1
	}
	var d strings.Builder
	for v := 0.0; v/scale <= c.xmax*(1+1e-9); v += step {
		x := c.x(v / scale)
		fmt.Fprintf(&d, "M%s %sv4", num(x), num(y))
		if labels {
			c.pf(`<text x="%s" y="%s" text-anchor="middle" fill="#5f6368" font-size="11">%s</text>`+"\n", num(x), num(y+16), fmtTick(v))
		}
	}
	c.pf(`<path class="xticks" d="%s" stroke="#5f6368" stroke-width="0.8"/>`+"\n", d.String())
}

// curve draws a step path (and under it a light fill).
func (c *chart) curve(panel int, ss []seg, class, color string, width float64, dash string, fill bool) {
	st := steps(ss, c.xmax)
	if len(st) == 0 {
		return
	}
	var d strings.Builder
	for i, s := range st {
		y := num(c.y(panel, float64(s.v)))
		if i == 0 || math.Abs(st[i-1].x1-s.x0) > 1e-9 {
			fmt.Fprintf(&d, "M%s %sH%s", num(s.x0), y, num(s.x1))
		} else {
			fmt.Fprintf(&d, "V%sH%s", y, num(s.x1))
		}
	}
	base := num(c.top[panel] + panelH)
	if fill {
		c.pf(`<path class="area" d="%sV%sH%sZ" fill="%s" fill-opacity="0.12" stroke="none"/>`+"\n", d.String(), base, num(st[0].x0), color)
	}
	extra := ""
	if dash != "" {
		extra = ` stroke-dasharray="` + dash + `"`
	}
	c.pf(`<path class="curve %s" data-steps="%d" d="%s" fill="none" stroke="%s" stroke-width="%s" stroke-linejoin="round"%s/>`+"\n",
		class, len(st), d.String(), color, num(width), extra)
}

// peak marks the highest point of a curve.
func (c *chart) peak(panel int, ss []seg, pts []passes.TimelinePoint) {
	best := 0
	for i, s := range ss {
		if s.v > ss[best].v {
			best = i
		}
	}
	s := ss[best]
	x, y := c.x((s.x0+s.x1)/2), c.y(panel, float64(s.v))
	anchor, dx := "start", 6.0
	if x > plotLeft+plotW*0.75 {
		anchor, dx = "end", -6
	}
	c.pf(`<g class="peak"><circle cx="%s" cy="%s" r="3.5" fill="#fff" stroke="#202124" stroke-width="1.2"/><text x="%s" y="%s" text-anchor="%s" font-size="11" fill="#202124">peak %s at %s</text></g>`+"\n",
		num(x), num(y), num(x+dx), num(y-6), anchor, units.Bytes(s.v), esc(clip(pts[s.at].Op, 48)))
}

func (c *chart) budget(panel int) {
	if c.r.Budget <= 0 {
		return
	}
	y := c.y(panel, float64(c.r.Budget))
	c.pf(`<g class="budget"><path d="M%s %sH%s" stroke="#d93025" stroke-width="1.2" stroke-dasharray="6 3"/><text x="%s" y="%s" text-anchor="end" font-size="11" fill="#d93025">budget %s</text></g>`+"\n",
		num(plotLeft), num(y), num(plotRight), num(plotRight-4), num(y-4), units.Bytes(c.r.Budget))
}

func (c *chart) frame(panel int) {
	c.pf(`<rect x="%s" y="%s" width="%s" height="%s" fill="none" stroke="#9aa0a6" stroke-width="0.8"/>`+"\n",
		num(plotLeft), num(c.top[panel]), num(plotW), num(panelH))
}

func (c *chart) count(kind string) int {
	n := 0
	for i := range c.r.Planned {
		if c.r.Planned[i].Kind == kind {
			n++
		}
	}
	return n
}

// lanes draws, under the planned panel, one lane per kind of inserted
// op: transfers and host ops as bars over their simulated span (so the
// lanes show how busy the links are), other ops as ticks.
func (c *chart) lanes(top float64, n int) {
	pts := c.r.Planned
	for li := 0; li < n; li++ {
		k := kinds[li]
		y := top + float64(li)*laneH
		var spans [][2]float64
		for i := range pts {
			if pts[i].Kind != k.kind {
				continue
			}
			var x0, x1 float64
			if c.axis == ByIndex {
				x0, x1 = c.x(float64(i)), c.x(float64(i+1))
			} else {
				x0, x1 = c.x(pts[i].Start), c.x(pts[i].End)
			}
			if x1-x0 < minBarW {
				mid := (x0 + x1) / 2
				x0, x1 = mid-minBarW/2, mid+minBarW/2
			}
			if m := len(spans); m > 0 && x0 <= spans[m-1][1]+mergeSlack {
				spans[m-1][1] = max(spans[m-1][1], x1)
				continue
			}
			spans = append(spans, [2]float64{x0, x1})
		}
		c.pf(`<g class="lane" data-kind="%s" data-count="%d">`, k.kind, c.count(k.kind))
		c.pf(`<rect x="%s" y="%s" width="%s" height="%s" fill="%s"/>`, num(plotLeft), num(y+1), num(plotW), num(laneH-2), [2]string{"#f8f9fa", "#f1f3f4"}[li%2])
		c.pf(`<text x="%s" y="%s" text-anchor="end" font-size="10" fill="%s">%s %d</text>`, num(plotLeft-6), num(y+laneH-4), kindColor[k.kind], esc(k.label), c.count(k.kind))
		if len(spans) > 0 {
			var d strings.Builder
			for _, s := range spans {
				fmt.Fprintf(&d, "M%s %sh%sv%sh%sZ", num(s[0]), num(y+2), num(s[1]-s[0]), num(laneH-4), num(s[0]-s[1]))
			}
			c.pf(`<path d="%s" fill="%s"/>`, d.String(), kindColor[k.kind])
		}
		c.pf("</g>\n")
	}
}

// hoverBins pools a curve into the page's tooltip columns.
func (c *chart) hoverBins(ss []seg) []int {
	out := make([]int, bins)
	for i, b := range pool(ss, c.xmax, bins) {
		out[i] = b.at
	}
	return out
}

func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return "…" + string(r[len(r)-n+1:])
}
