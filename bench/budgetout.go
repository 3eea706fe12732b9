package bench

import (
	"fmt"
	"image/color"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/tsplit/tsplit/internal/units"
)

// BudgetSweepFile is the budget sweeps' table (.md, .csv) and the
// prefix of their plots (+ _MODEL.png/.svg); the CI-sized variant's
// files end in _small, so both can live in one folder.
const BudgetSweepFile = "budget_sweep"

func (r *BudgetResults) fileBase() string {
	if r.Config.Small {
		return BudgetSweepFile + "_small"
	}
	return BudgetSweepFile
}

// WriteBudgetSweeps writes the budget sweeps' Markdown and CSV tables
// and one PNG and SVG plot per model into dir and returns the paths
// written.
func WriteBudgetSweeps(dir string, r *BudgetResults) ([]string, error) {
	out, err := newOutDir(dir)
	if err != nil {
		return nil, err
	}
	base := r.fileBase()
	if err := out.table(base, budgetMD(r), budgetCSV(r)); err != nil {
		return out.written, err
	}
	for i, m := range r.Models {
		if err := out.plot(base+"_"+m.Name, m.Name, func(dir, name string) error { return plotBudgetSweep(dir, name, r, i) }); err != nil {
			return out.written, err
		}
	}
	return out.written, nil
}

// fmtOverhead is a cell of the table: the overhead in percent, or "—"
// where the policy does not fit.
func fmtOverhead(s *BudgetSweep, i, j int) string {
	o, ok := s.Overhead(i, j)
	if !ok {
		return "—"
	}
	if math.Abs(o) < 0.005 {
		o = 0 // no "-0.00"
	}
	return fmtFloat(o, 2)
}

func budgetMD(r *BudgetResults) string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	c := r.Config
	w("# Predicted overhead vs memory budget\n\n")
	w("This file is generated; do not edit it by hand. It was made by\n\n    %s\n\n", c.Command)
	w("Each model is built at Table IV's base batch on %s (budget %s): the largest batch the base policy, which "+
		"swaps, recomputes and splits nothing, plans into the device. Its training step (%s update) is planned by every "+
		"policy at budgets from 100 %% of the unplanned step's peak (as built, every tensor resident) down in %d %% steps "+
		"to the first budget no policy fits, all on the same whole-batch step (modnn without sub-batching). A cell is the "+
		"predicted step time's overhead over the unplanned step, in percent, from the planner's simulator; — means the "+
		"policy does not fit that budget. The plots (%s_MODEL.png, .svg) draw the same plans as step time over the unplanned step on a "+
		"log scale, and the lower bound as a dashed black line.\n\n",
		r.Profile.Name, units.Bytes(r.Profile.Budget()), c.Optimizer, BudgetStepPct, r.fileBase())
	if c.Small {
		w("The CI-sized variant: the %s profile with every memory size divided by %d, and the zoo's small configurations.\n\n", c.Device, SmallScale)
	}
	w("%s", boundDefinitions())
	w("**All models:** %s Per model: ", gapSummaryText(SummarizeGaps(r.Sweeps...)))
	for i, m := range r.Models {
		g := SummarizeGaps(r.Sweeps[i])
		sep := "; "
		if i == len(r.Models)-1 {
			sep = ".\n\n"
		}
		w("%s %s (%d budgets)%s", m.Display, fmtGap(g.Median), len(g.gaps), sep)
	}
	for i, m := range r.Models {
		s := r.Sweeps[i]
		w("## %s\n\nBatch %d; unplanned peak %s, unplanned step %s ms.\n\n", m.Display, s.Batch, units.Bytes(s.BasePeak), fmtFloat(1e3*s.BaseStep, 3))
		header := append(append([]string{"Budget", "% of peak"}, s.Policies...), "lower bound", BoundPolicy+"'s gap")
		var rows [][]string
		for bi, pct := range s.Percents {
			row := []string{units.Bytes(s.Budgets[bi]), strconv.Itoa(pct)}
			for j := range s.Policies {
				row = append(row, fmtOverhead(s, bi, j))
			}
			row = append(row, fmtBoundCell(s, bi), fmtGapCell(s, bi))
			rows = append(rows, row)
		}
		w("%s\n", mdTable(header, rows))
		w("Lower bound: %s\n\n", gapSummaryText(SummarizeGaps(s)))
	}
	return b.String()
}

// BoundRow is the policy column of the budget sweep CSV's lower bound
// rows.
const BoundRow = "lower bound"

// budgetCSV is one row per model, budget and policy, and per budget a
// BoundRow row: fits says a bound of the class was computed and some
// plan of the class may fit, step_s is the unplanned step plus the
// bound, overhead_pct the bound over the unplanned step, order the
// order bounded ("plan": tsplit's plan's). gap (tsplit's rows: "inf"
// for ∞) and outside_class are tsplit's plan against the bound.
func budgetCSV(r *BudgetResults) [][]string {
	out := [][]string{{"model", "batch", "base_peak_bytes", "base_step_s", "budget_pct", "budget_bytes", "policy", "fits", "step_s", "overhead_pct", "peak_bytes", "order", "gap", "outside_class"}}
	for i, m := range r.Models {
		s := r.Sweeps[i]
		for bi, pct := range s.Percents {
			lead := []string{m.Name, strconv.FormatInt(s.Batch, 10), strconv.FormatInt(s.BasePeak, 10), strconv.FormatFloat(s.BaseStep, 'g', -1, 64),
				strconv.Itoa(pct), strconv.FormatInt(s.Budgets[bi], 10)}
			for j, pol := range s.Policies {
				p := s.Points[bi][j]
				row := append(slices.Clone(lead), pol, strconv.FormatBool(p.OK), "", "", "", p.Order, "", "")
				if o, ok := s.Overhead(bi, j); ok {
					row[8], row[9], row[10] = strconv.FormatFloat(p.Step, 'g', -1, 64), fmtFloat(o, 4), strconv.FormatInt(p.Peak, 10)
				}
				if pol == BoundPolicy {
					switch g, kind := s.Gap(bi); kind {
					case GapOutside:
						row[13] = "true"
					case GapZero, GapInf, GapFinite:
						row[12], row[13] = strconv.FormatFloat(g, 'g', -1, 64), "false"
					}
				}
				out = append(out, row)
			}
			row := append(slices.Clone(lead), BoundRow, "false", "", "", "", "", "", "")
			if b := s.Bound(bi); b != nil && b.Error == "" && !b.Infeasible {
				row[7], row[8], row[11] = "true", strconv.FormatFloat(s.BaseStep+b.AddedS, 'g', -1, 64), b.Order
				if s.BaseStep > 0 {
					row[9] = fmtFloat(100*b.AddedS/s.BaseStep, 4)
				}
			}
			out = append(out, row)
		}
	}
	return out
}

// BudgetSummary prints, per model, the smallest budget each policy fits
// and its overhead there, and tsplit's gaps to the lower bound.
func BudgetSummary(w io.Writer, r *BudgetResults) {
	for i, m := range r.Models {
		s := r.Sweeps[i]
		fmt.Fprintf(w, "%s at batch %d (unplanned peak %s):", m.Name, s.Batch, units.Bytes(s.BasePeak))
		for j, pol := range s.Policies {
			least := -1
			for bi := range s.Percents {
				if s.Points[bi][j].OK {
					least = bi
				}
			}
			if least < 0 {
				fmt.Fprintf(w, " %s never fits;", pol)
				continue
			}
			fmt.Fprintf(w, " %s %d%% (%s %%);", pol, s.Percents[least], fmtOverhead(s, least, j))
		}
		fmt.Fprintf(w, "\n  lower bound: %s\n", gapSummaryText(SummarizeGaps(s)))
	}
	fmt.Fprintf(w, "all models, lower bound: %s\n", gapSummaryText(SummarizeGaps(r.Sweeps...)))
}

// plotBudgetSweep draws model i's predicted step time over the budget,
// relative to the unplanned step on a log axis (overheads run from
// fractions of a percent to fifty-fold): one line per policy, with a gap
// where it does not fit, the budget axis running from the unplanned
// peak (100 %) down to the right, so a line ends where the policy stops
// fitting. It writes name.png and name.svg in dir.
func plotBudgetSweep(dir, name string, r *BudgetResults, i int) error {
	m, s := r.Models[i], r.Sweeps[i]
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s, batch %d, on %s: predicted step time vs budget", m.Display, s.Batch, r.Profile.Name)
	p.Title.Padding = vg.Points(6)
	p.X.Label.Text = fmt.Sprintf("budget (%% of the unplanned peak, %s)", units.Bytes(s.BasePeak))
	p.Y.Label.Text = "step time / unplanned step (log scale)"
	p.Add(plotter.NewGrid())
	// Reversed, so less memory is further right: the X axis is 100 − %.
	p.X.Min, p.X.Max = -2, float64(100-s.Percents[len(s.Percents)-1])+2
	p.X.Tick.Marker = reversedPercentTicks{}
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = ratioTicks{}
	legend := plot.NewLegend()
	legend.Top, legend.Left = true, true
	legend.TextStyle.Font.Size = vg.Points(10)
	legend.ThumbnailWidth = vg.Points(24)
	ylo, yhi := 1.0, 1.1
	type thumb struct {
		line *plotter.Line
		dots *plotter.Scatter
	}
	thumbs := make([]thumb, len(s.Policies))
	// Drawn last policy first, so tsplit's thick line lies under the
	// others where they coincide; the legend keeps the table order.
	for j := len(s.Policies) - 1; j >= 0; j-- {
		col, width := policyStyle(j, s.Policies[j])
		var segs []plotter.XYs
		var pts plotter.XYs
		for bi, pct := range s.Percents {
			pt := s.Points[bi][j]
			if !pt.OK || s.BaseStep <= 0 || pt.Step <= 0 {
				if len(pts) > 0 {
					segs, pts = append(segs, pts), nil
				}
				continue
			}
			y := pt.Step / s.BaseStep
			ylo, yhi = min(ylo, y), max(yhi, y)
			pts = append(pts, plotter.XY{X: float64(100 - pct), Y: y})
		}
		if len(pts) > 0 {
			segs = append(segs, pts)
		}
		for _, seg := range segs {
			l, sc, err := plotter.NewLinePoints(seg)
			if err != nil {
				return err
			}
			l.Color, l.Width = col, width
			sc.Color, sc.Shape, sc.Radius = col, plotutil.Shape(j), vg.Points(2.8)
			p.Add(l, sc)
			thumbs[j] = thumb{l, sc}
		}
	}
	for j, pol := range s.Policies {
		if t := thumbs[j]; t.line != nil {
			legend.Add(pol, t.line, t.dots)
		} else {
			legend.Add(pol+" (never fits)", plotter.NewFunction(func(float64) float64 { return math.NaN() }))
		}
	}
	// The lower bound, dashed, over the budgets where it was computed.
	var segs []plotter.XYs
	var pts plotter.XYs
	for bi, pct := range s.Percents {
		b := s.Bound(bi)
		if b == nil || b.Error != "" || b.Infeasible || s.BaseStep <= 0 {
			if len(pts) > 0 {
				segs, pts = append(segs, pts), nil
			}
			continue
		}
		y := 1 + b.AddedS/s.BaseStep
		ylo, yhi = min(ylo, y), max(yhi, y)
		pts = append(pts, plotter.XY{X: float64(100 - pct), Y: y})
	}
	if len(pts) > 0 {
		segs = append(segs, pts)
	}
	var boundLine *plotter.Line
	for _, seg := range segs {
		l, err := plotter.NewLine(seg)
		if err != nil {
			return err
		}
		l.Color, l.Width, l.Dashes = color.Black, vg.Points(1.6), []vg.Length{vg.Points(5), vg.Points(3)}
		p.Add(l)
		boundLine = l
	}
	if boundLine != nil {
		legend.Add("lower bound", boundLine)
	}
	p.Y.Min, p.Y.Max = ylo/1.01, yhi*1.05

	return writePlot(dir, name, 10*vg.Inch, 5.5*vg.Inch, legend, func(c draw.Canvas) { p.Draw(c) })
}

// reversedPercentTicks labels the reversed budget axis (x = 100 − %)
// every 10 %.
type reversedPercentTicks struct{}

func (reversedPercentTicks) Ticks(lo, hi float64) []plot.Tick {
	var ts []plot.Tick
	for x := 0.0; x <= hi; x += 5 {
		if x < lo {
			continue
		}
		t := plot.Tick{Value: x}
		if int(x)%10 == 0 {
			t.Label = strconv.Itoa(100-int(x)) + "%"
		}
		ts = append(ts, t)
	}
	return ts
}

// ratioTicks labels the log axis of relative step times at 1, 1.01,
// 1.02, 1.05, 1.1, 1.2, 1.5, 2, 3, 5, 10, 20, 50, … (×), the ones
// between lo and hi, the fine ones only on short axes.
type ratioTicks struct{}

func (ratioTicks) Ticks(lo, hi float64) []plot.Tick {
	var ts []plot.Tick
	add := func(x float64) {
		if x >= lo && x <= hi {
			ts = append(ts, plot.Tick{Value: x, Label: strconv.FormatFloat(x, 'f', -1, 64) + "×"})
		}
	}
	add(1)
	// Fewer ticks below 2× the taller the axis, so labels never overlap.
	fine := []float64{1.01, 1.02, 1.05, 1.1, 1.2, 1.5}
	switch {
	case hi > 20:
		fine = []float64{1.5}
	case hi > 3:
		fine = []float64{1.2, 1.5}
	case hi > 1.5:
		fine = []float64{1.05, 1.1, 1.2, 1.5}
	}
	for _, x := range fine {
		add(x)
	}
	for dec := 1.0; dec <= hi; dec *= 10 {
		for _, m := range []float64{2, 3, 5, 10} {
			if m*dec > 1.5 {
				add(m * dec)
			}
		}
	}
	return ts
}
