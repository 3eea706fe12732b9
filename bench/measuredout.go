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
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/tsplit/tsplit"
)

// MeasuredFile is the measured benchmark's table (.md, .csv) and the
// prefix of its plots and profiles (_MODEL.png/.svg,
// _profile_MODEL.json).
const MeasuredFile = "measured"

// WriteMeasured writes the measured benchmark's Markdown and CSV
// tables, a plot per model and the profile measured for each model into
// dir, and returns the paths written.
func WriteMeasured(dir string, r *MeasuredResults) ([]string, error) {
	out, err := newOutDir(dir)
	if err != nil {
		return nil, err
	}
	if err := out.table(MeasuredFile, measuredMD(r), measuredCSV(r)); err != nil {
		return out.written, err
	}
	for i, m := range r.Reps[0] {
		// The profile of the last repetition: the one made last.
		js, err := tsplit.MarshalProfile(r.Reps[len(r.Reps)-1][i].Profile)
		if err != nil {
			return out.written, err
		}
		if err := out.put(MeasuredFile+"_profile_"+m.Name+".json", js); err != nil {
			return out.written, err
		}
		if err := out.plot(MeasuredFile+"_"+m.Name, m.Name, func(dir, name string) error { return plotMeasured(dir, name, r, i) }); err != nil {
			return out.written, err
		}
	}
	return out.written, nil
}

// ms is seconds in milliseconds, for tables.
func ms(s float64) string { return strconv.FormatFloat(s*1e3, 'f', 1, 64) }

// pct is a signed percentage.
func pct(x float64) string { return fmt.Sprintf("%+.1f %%", 100*x) }

// Accuracy is the prediction error over a set of cases: the median and
// the largest of each case's median |predicted − measured| / measured
// over the repetitions.
type Accuracy struct {
	Cases         int
	Median, Worst float64
}

// Prediction errors a case is judged by.
const (
	// ErrPlanned: the plan's own prediction (the profile measured before
	// planning) against the median measured step.
	ErrPlanned = iota
	// ErrWindow: the plan simulated on the profile re-measured over the
	// benchmark against the median measured step.
	ErrWindow
	// ErrRelative: the re-measured prediction over the unplanned step's
	// against the median of the measured steps over the unplanned steps
	// run just before them (the least sensitive to the machine's load).
	ErrRelative
)

var errNames = []string{"planned", "re-measured", "relative"}

// CaseError is a case's prediction error of a kind.
func (m *MeasuredModel) CaseError(c *MeasuredCase, kind int) float64 {
	switch kind {
	case ErrPlanned:
		return c.Error()
	case ErrWindow:
		return c.WindowError()
	}
	return relErr(c.Repredicted/m.Base.Repredicted, c.Relative())
}

// caseRuns is one case (a model's policy at a budget) over the
// repetitions.
type caseRuns struct {
	model   string
	batch   int64
	percent int
	policy  string
	// cases and models of the repetitions where the policy planned the
	// step; reps is the number of repetitions.
	cases  []*MeasuredCase
	models []*MeasuredModel
	reps   int
	first  *MeasuredCase // the first repetition's, planned or not
}

// runsOf gathers the cases of model i over the repetitions, in the
// order of the first repetition.
func (r *MeasuredResults) runsOf(i int) []*caseRuns {
	var out []*caseRuns
	for j, c0 := range r.Reps[0][i].Cases {
		cr := &caseRuns{model: r.Reps[0][i].Name, batch: r.Reps[0][i].Batch, percent: c0.Percent, policy: c0.Policy, reps: len(r.Reps), first: c0}
		for _, rep := range r.Reps {
			m := rep[i]
			if c := m.Cases[j]; c.OK() && len(c.Steps) > 0 {
				cr.cases, cr.models = append(cr.cases, c), append(cr.models, m)
			}
		}
		out = append(out, cr)
	}
	return out
}

// errs are a case's errors of a kind, one per repetition it planned in.
func (cr *caseRuns) errs(kind int) []float64 {
	var out []float64
	for k, c := range cr.cases {
		out = append(out, cr.models[k].CaseError(c, kind))
	}
	return out
}

// median of a per-repetition quantity.
func (cr *caseRuns) median(f func(c *MeasuredCase, m *MeasuredModel) float64) float64 {
	var xs []float64
	for k, c := range cr.cases {
		xs = append(xs, f(c, cr.models[k]))
	}
	return quantile(xs, 0.5)
}

// paired pools the case's measured steps over the unplanned steps run
// just before them, over the repetitions.
func (cr *caseRuns) paired() []float64 {
	var out []float64
	for _, c := range cr.cases {
		out = append(out, c.Paired...)
	}
	return out
}

// steps pools the case's measured steps over the repetitions.
func (cr *caseRuns) steps() []float64 {
	var out []float64
	for _, c := range cr.cases {
		out = append(out, c.Steps...)
	}
	return out
}

func (cr *caseRuns) peaksOK() bool {
	for _, c := range cr.cases {
		if c.MeasuredPeak != c.Peak || c.Peak > c.Budget {
			return false
		}
	}
	return true
}

// TsplitAccuracy is the prediction error of a kind of the tsplit
// policy's plans over every model and budget (issue 13's first
// must-show): per case the median over the repetitions, then their
// median and the largest; with single, over every repetition of every
// case instead.
func (r *MeasuredResults) TsplitAccuracy(kind int, single bool) Accuracy {
	var meds []float64
	for i := range r.Config.Models {
		for _, cr := range r.runsOf(i) {
			if cr.policy != "tsplit" || len(cr.cases) == 0 {
				continue
			}
			var abs []float64
			for _, e := range cr.errs(kind) {
				abs = append(abs, math.Abs(e))
			}
			if single {
				meds = append(meds, abs...)
			} else {
				meds = append(meds, quantile(abs, 0.5))
			}
		}
	}
	if len(meds) == 0 {
		return Accuracy{}
	}
	return Accuracy{Cases: len(meds), Median: quantile(meds, 0.5), Worst: slices.Max(meds)}
}

// Discord is a pair of policies whose measured order differs from
// their predicted order.
type Discord struct {
	Faster, Slower string // by prediction
	// WithinNoise: the interquartile ranges of their measured steps
	// over the unplanned steps overlap.
	WithinNoise bool
}

// Ranking compares, at one budget of model i, the policies that fit
// ordered by predicted step (median over the repetitions) with their
// order by measured step relative to the unplanned step run just
// before (the median of every repetition's, the least sensitive to the
// machine's load): the pairs in another order (issue 13's second
// must-show).
func (r *MeasuredResults) Ranking(i, percent int) (predicted []string, discords []Discord) {
	var crs []*caseRuns
	for _, cr := range r.runsOf(i) {
		if cr.percent == percent && len(cr.cases) > 0 {
			crs = append(crs, cr)
		}
	}
	pred := func(cr *caseRuns) float64 {
		return cr.median(func(c *MeasuredCase, _ *MeasuredModel) float64 { return c.Predicted })
	}
	slices.SortStableFunc(crs, func(a, b *caseRuns) int {
		switch pa, pb := pred(a), pred(b); {
		case pa < pb:
			return -1
		case pa > pb:
			return 1
		}
		return 0
	})
	for k, a := range crs {
		predicted = append(predicted, a.policy)
		pa, qa := a.paired(), quantile(a.paired(), 0.5)
		for _, b := range crs[k+1:] {
			pb, qb := b.paired(), quantile(b.paired(), 0.5)
			if pred(a) == pred(b) || qa <= qb {
				continue // predicted equal, or measured in the predicted order
			}
			alo, ahi := quantile(pa, 0.25), quantile(pa, 0.75)
			blo, bhi := quantile(pb, 0.25), quantile(pb, 0.75)
			discords = append(discords, Discord{Faster: a.policy, Slower: b.policy, WithinNoise: alo <= bhi && blo <= ahi})
		}
	}
	return predicted, discords
}

// errCell is a case's error of a kind: the median over the
// repetitions, and their range when there are several.
func errCell(cr *caseRuns, kind int) string {
	es := cr.errs(kind)
	if len(es) == 1 {
		return pct(es[0])
	}
	return fmt.Sprintf("%s (%s … %s)", pct(quantile(es, 0.5)), pct(slices.Min(es)), pct(slices.Max(es)))
}

func measuredMD(r *MeasuredResults) string {
	var b strings.Builder
	c := r.Config
	fmt.Fprintf(&b, "# Measured vs predicted step time\n\n")
	fmt.Fprintf(&b, "`%s` on the CPU device with %s's link emulated (docs/measured.md), repeated %d times. Each repetition "+
		"profiles every model (`tsplitc profile MODEL --emulate %s`, %d timed steps), plans its step with each policy on that "+
		"profile at %s of the unplanned peak, and then, %d rounds, runs every plan for one step in turn, each right after a "+
		"step of the unplanned step. Measured: the median step (first op start to last op end). Three errors, "+
		"(predicted − measured) / measured: *planned*, the plan's own prediction (the profile measured before planning); "+
		"*re-measured*, the same plan simulated on the profile re-measured from the unplanned step's runs between the plans' "+
		"runs, same link (the machine's load changes over minutes: this one sees the load the plans ran under); *relative*, "+
		"the re-measured prediction over the unplanned step's against the median of each measured step over the unplanned "+
		"step run just before it (the least sensitive to the load). Values are medians over the repetitions, with their "+
		"range. Machine: 2 cores shared with other work, load average (1, 5, 15 min) %s before, %s after; %v in all.\n\n",
		c.Command, c.Emulate, c.Repeats, c.Emulate, c.ProfileRuns, joinPercents(c.Budgets), c.Rounds, r.LoadBefore, r.LoadAfter, r.Elapsed.Round(1e9))
	b.WriteString("## tsplit's plans\n\n")
	fmt.Fprintf(&b, "| model | budget | error: planned | re-measured | relative | peak: planned = measured |\n|---|---|---|---|---|---|\n")
	for i := range c.Models {
		for _, cr := range r.runsOf(i) {
			if cr.policy != "tsplit" || len(cr.cases) == 0 {
				continue
			}
			fmt.Fprintf(&b, "| %s b%d | %d %% | %s | %s | %s | %s |\n", cr.model, cr.batch, cr.percent,
				errCell(cr, ErrPlanned), errCell(cr, ErrWindow), errCell(cr, ErrRelative), yesNo(cr.peaksOK()))
		}
	}
	b.WriteString("\n|error| of the cases' medians over the repetitions:")
	for k, name := range errNames {
		a := r.TsplitAccuracy(k, false)
		fmt.Fprintf(&b, " %s median %.1f %%, worst %.1f %%;", name, 100*a.Median, 100*a.Worst)
	}
	b.WriteString(" of every repetition of every case:")
	for k, name := range errNames {
		a := r.TsplitAccuracy(k, true)
		fmt.Fprintf(&b, " %s median %.1f %%, worst %.1f %%;", name, 100*a.Median, 100*a.Worst)
	}
	b.WriteString("\n\n")
	for i := range c.Models {
		m0 := r.Reps[0][i]
		fmt.Fprintf(&b, "## %s, batch %d\n\n", m0.Name, m0.Batch)
		for k, rep := range r.Reps {
			m := rep[i]
			p, w := m.Profile, m.Window
			fmt.Fprintf(&b, "Repetition %d: profile step %s ms, %d op keys, %.3g µs per op, link %.4g MB/s each way (%s × %.4g), "+
				"%.0f µs per copy; re-measured over the runs (%d unplanned steps): %s ms, %.3g µs per op, copies %.0f µs late.\n",
				k+1, ms(p.Measured.StepS), len(p.OpTimes), p.Launch*1e6, p.H2D/1e6, p.Emulation.Of, p.Emulation.Ratio, p.LinkLatency*1e6,
				w.Measured.Runs, ms(m.Base.Measured()), w.Launch*1e6, w.Emulation.Overhead*1e6)
		}
		b.WriteString("\n| budget | policy | swap / recompute / split | predicted ms | re-measured ms | measured ms | error: planned | re-measured | relative | throughput vs unplanned: re-measured prediction | measured | stall ms | peak: planned = measured |\n")
		b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
		for _, cr := range r.runsOf(i) {
			if len(cr.cases) == 0 {
				fmt.Fprintf(&b, "| %d %% | %s | does not fit | | | | | | | | | | |\n", cr.percent, cr.policy)
				continue
			}
			c0 := cr.cases[0]
			fits := ""
			if len(cr.cases) < cr.reps {
				fits = fmt.Sprintf(" (fits in %d of %d repetitions)", len(cr.cases), cr.reps)
			}
			med := cr.median
			fmt.Fprintf(&b, "| %d %% | %s%s | %d / %d / %d | %s | %s | %s | %s | %s | %s | %.1f %% | %.1f %% | %s | %s |\n",
				cr.percent, cr.policy, fits, c0.Swapped, c0.Recomputed, c0.Split,
				ms(med(func(c *MeasuredCase, _ *MeasuredModel) float64 { return c.Predicted })),
				ms(med(func(c *MeasuredCase, _ *MeasuredModel) float64 { return c.Repredicted })),
				ms(med(func(c *MeasuredCase, _ *MeasuredModel) float64 { return c.Measured() })),
				errCell(cr, ErrPlanned), errCell(cr, ErrWindow), errCell(cr, ErrRelative),
				100*med(func(c *MeasuredCase, m *MeasuredModel) float64 { return m.Base.Repredicted / c.Repredicted }),
				100/quantile(cr.paired(), 0.5),
				ms(med(func(c *MeasuredCase, _ *MeasuredModel) float64 { return c.Stall() })), yesNo(cr.peaksOK()))
		}
		b.WriteString("\n")
		for _, pc := range c.Budgets {
			order, discords := r.Ranking(i, pc)
			fmt.Fprintf(&b, "Ranking at %d %% by predicted step: %s. ", pc, strings.Join(order, " < "))
			if len(discords) == 0 {
				b.WriteString("The measured steps (over the unplanned step run just before) rank the same.\n\n")
				continue
			}
			var parts []string
			for _, d := range discords {
				note := "outside the noise"
				if d.WithinNoise {
					note = "within the noise: their IQRs overlap"
				}
				parts = append(parts, fmt.Sprintf("%s measured slower than %s (%s)", d.Faster, d.Slower, note))
			}
			fmt.Fprintf(&b, "Measured (over the unplanned step run just before) in another order: %s.\n\n", strings.Join(parts, "; "))
		}
		fmt.Fprintf(&b, "![%s](%s_%s.png)\n\n", m0.Name, MeasuredFile, m0.Name)
	}
	return b.String()
}

func yesNo(ok bool) string {
	if ok {
		return "yes"
	}
	return "NO"
}

func peakCheck(c *MeasuredCase) string {
	if c.MeasuredPeak == c.Peak && c.Peak <= c.Budget {
		return "yes"
	}
	return fmt.Sprintf("no: %d planned, %d measured, budget %d", c.Peak, c.MeasuredPeak, c.Budget)
}

func joinPercents(ps []int) string {
	var s []string
	for _, p := range ps {
		s = append(s, strconv.Itoa(p)+" %")
	}
	return strings.Join(s, " and ")
}

func measuredCSV(r *MeasuredResults) [][]string {
	rows := [][]string{{"repetition", "model", "batch", "budget_pct", "budget_bytes", "policy", "fits", "swapped", "recomputed", "split",
		"predicted_s", "repredicted_s", "unplanned_repredicted_s", "measured_s", "measured_q1_s", "measured_q3_s", "error", "repredicted_error",
		"measured_over_unplanned", "relative_error", "stall_s", "planned_peak_bytes", "measured_peak_bytes", "steps_s"}}
	f := func(x float64) string { return strconv.FormatFloat(x, 'g', 6, 64) }
	for k, rep := range r.Reps {
		for _, m := range rep {
			for _, c := range append([]*MeasuredCase{m.Base}, m.Cases...) {
				row := []string{strconv.Itoa(k + 1), m.Name, strconv.FormatInt(m.Batch, 10), strconv.Itoa(c.Percent), strconv.FormatInt(c.Budget, 10), c.Policy}
				if !c.OK() {
					rows = append(rows, append(row, "false", "", "", "", "", "", "", "", "", "", "", "", "", "", "", "", "", ""))
					continue
				}
				lo, hi := c.Spread()
				var steps []string
				for _, s := range c.Steps {
					steps = append(steps, f(s))
				}
				rel, relE := "", ""
				if c != m.Base {
					rel, relE = f(c.Relative()), f(m.CaseError(c, ErrRelative))
				}
				rows = append(rows, append(row, "true", strconv.Itoa(c.Swapped), strconv.Itoa(c.Recomputed), strconv.Itoa(c.Split),
					f(c.Predicted), f(c.Repredicted), f(m.Base.Repredicted), f(c.Measured()), f(lo), f(hi), f(c.Error()), f(c.WindowError()),
					rel, relE, f(c.Stall()), strconv.FormatInt(c.Peak, 10), strconv.FormatInt(c.MeasuredPeak, 10), strings.Join(steps, ";")))
			}
		}
	}
	return rows
}

// PrintMeasured prints every plan's errors and the must-show numbers.
func PrintMeasured(w io.Writer, r *MeasuredResults) {
	for i := range r.Config.Models {
		m0 := r.Reps[0][i]
		fmt.Fprintf(w, "%s b%d (medians over %d repetitions)\n", m0.Name, m0.Batch, len(r.Reps))
		for _, cr := range r.runsOf(i) {
			if len(cr.cases) == 0 {
				fmt.Fprintf(w, "  %3d%% %-15s does not fit\n", cr.percent, cr.policy)
				continue
			}
			fmt.Fprintf(w, "  %3d%% %-15s %8s ms predicted %8s ms measured  errors: planned %s, re-measured %s, relative %s  peak %s\n",
				cr.percent, cr.policy, ms(cr.median(func(c *MeasuredCase, _ *MeasuredModel) float64 { return c.Predicted })),
				ms(cr.median(func(c *MeasuredCase, _ *MeasuredModel) float64 { return c.Measured() })),
				errCell(cr, ErrPlanned), errCell(cr, ErrWindow), errCell(cr, ErrRelative), yesNo(cr.peaksOK()))
		}
	}
	for _, single := range []bool{false, true} {
		if single {
			fmt.Fprintf(w, "\ntsplit, every repetition:")
		} else {
			fmt.Fprintf(w, "tsplit, cases' medians:")
		}
		for k, name := range errNames {
			a := r.TsplitAccuracy(k, single)
			fmt.Fprintf(w, " %s |error| median %.1f %%, worst %.1f %% (%d);", name, 100*a.Median, 100*a.Worst, a.Cases)
		}
	}
	fmt.Fprintf(w, " load %s → %s\n", r.LoadBefore, r.LoadAfter)
}

// plotMeasured draws one model's policies (x) at every budget:
// predicted step (open marks) and measured median with its
// interquartile range (filled marks and bars), the unplanned step's
// measured median dashed.
func plotMeasured(dir, base string, r *MeasuredResults, i int) error {
	m := r.Reps[0][i]
	var baseSteps []float64
	for _, rep := range r.Reps {
		baseSteps = append(baseSteps, rep[i].Base.Steps...)
	}
	baseMeasured := quantile(baseSteps, 0.5)
	runs := r.runsOf(i)
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s, batch %d: predicted vs measured step on the CPU device (%s link emulated)", m.Name, m.Batch, r.Config.Emulate)
	p.Y.Label.Text = "step time (ms)"
	p.Add(plotter.NewGrid())
	pols := r.Config.Policies
	p.NominalX(pols...)
	p.X.Tick.Label.Rotation = math.Pi / 6
	p.X.Tick.Label.XAlign, p.X.Tick.Label.YAlign = draw.XRight, draw.YTop
	ymax := baseMeasured * 1e3
	base1, err := plotter.NewLine(plotter.XYs{{X: -0.5, Y: baseMeasured * 1e3}, {X: float64(len(pols)) - 0.5, Y: baseMeasured * 1e3}})
	if err != nil {
		return err
	}
	base1.Color, base1.Dashes, base1.Width = color.Gray{Y: 60}, []vg.Length{vg.Points(6), vg.Points(3)}, vg.Points(1.3)
	p.Add(base1)
	p.Legend.Add("unplanned, measured", base1)
	p.Legend.Top = true
	budgetColors := []color.Color{color.RGBA{0x1f, 0x77, 0xb4, 0xff}, color.RGBA{0xd6, 0x27, 0x28, 0xff}, color.RGBA{0x2c, 0xa0, 0x2c, 0xff}, color.RGBA{0x94, 0x67, 0xbd, 0xff}}
	for bi, pc := range r.Config.Budgets {
		col := budgetColors[bi%len(budgetColors)]
		off := (float64(bi) - float64(len(r.Config.Budgets)-1)/2) * 0.18
		var pred, meas plotter.XYs
		var errs plotter.YErrors
		for j, pol := range pols {
			var cr *caseRuns
			for _, x := range runs {
				if x.percent == pc && x.policy == pol {
					cr = x
				}
			}
			if cr == nil || len(cr.cases) == 0 {
				continue
			}
			x := float64(j) + off
			steps := cr.steps()
			med, lo, hi := quantile(steps, 0.5), quantile(steps, 0.25), quantile(steps, 0.75)
			pr := cr.median(func(c *MeasuredCase, _ *MeasuredModel) float64 { return c.Repredicted })
			pred = append(pred, plotter.XY{X: x, Y: pr * 1e3})
			meas = append(meas, plotter.XY{X: x, Y: med * 1e3})
			errs = append(errs, struct{ Low, High float64 }{(med - lo) * 1e3, (hi - med) * 1e3})
			ymax = max(ymax, pr*1e3, hi*1e3)
		}
		if len(meas) == 0 {
			continue
		}
		ps, err := plotter.NewScatter(pred)
		if err != nil {
			return err
		}
		ps.Color, ps.Radius = col, vg.Points(4)
		ps.Shape = draw.RingGlyph{}
		ms, err := plotter.NewScatter(meas)
		if err != nil {
			return err
		}
		ms.Color, ms.Radius, ms.Shape = col, vg.Points(3), draw.CircleGlyph{}
		bars, err := plotter.NewYErrorBars(struct {
			plotter.XYs
			plotter.YErrors
		}{meas, errs})
		if err != nil {
			return err
		}
		bars.Color = col
		p.Add(bars, ps, ms)
		p.Legend.Add(fmt.Sprintf("%d %%: predicted (re-measured profile)", pc), ps)
		p.Legend.Add(fmt.Sprintf("%d %%: measured (IQR)", pc), ms)
	}
	p.Y.Min, p.Y.Max = 0, 1.1*ymax
	const w, h = 10 * vg.Inch, 6 * vg.Inch
	return saveFigure(dir, base, w, h, p.Draw)
}
