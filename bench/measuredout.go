package bench

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/tsplit/tsplit/backend"
	"github.com/tsplit/tsplit/internal/units"
)

// MeasuredFile is the measured benchmark's table (.md, .csv) and the
// prefix of its plots and profiles (_MODEL.png/.svg,
// _profile_MODEL.json).
const MeasuredFile = "measured"

// WriteMeasured writes the measured benchmark's Markdown and CSV
// tables, a plot per model and the profile measured for each model into
// dir, and returns the paths written.
func WriteMeasured(dir string, r *MeasuredResults) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var written []string
	put := func(name string, data []byte) error {
		path := filepath.Join(dir, name)
		written = append(written, path)
		return backend.WriteBytesAtomic(path, data)
	}
	if err := put(MeasuredFile+".md", []byte(measuredMD(r))); err != nil {
		return written, err
	}
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	if err := w.WriteAll(measuredCSV(r)); err != nil {
		return written, err
	}
	if err := put(MeasuredFile+".csv", b.Bytes()); err != nil {
		return written, err
	}
	for _, m := range r.Models {
		js, err := json.MarshalIndent(m.Profile, "", "  ")
		if err != nil {
			return written, err
		}
		if err := put(MeasuredFile+"_profile_"+m.Name+".json", append(js, '\n')); err != nil {
			return written, err
		}
		name := MeasuredFile + "_" + m.Name
		if err := plotMeasured(dir, name, r, m); err != nil {
			return written, fmt.Errorf("plot %s: %w", m.Name, err)
		}
		written = append(written, filepath.Join(dir, name+".png"), filepath.Join(dir, name+".svg"))
	}
	return written, nil
}

// ms is seconds in milliseconds, for tables.
func ms(s float64) string { return strconv.FormatFloat(s*1e3, 'f', 1, 64) }

// pct is a signed percentage.
func pct(x float64) string { return fmt.Sprintf("%+.1f %%", 100*x) }

// Accuracy is the prediction error over a set of cases: the median and
// the largest |predicted − measured| / measured.
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

// TsplitAccuracy is the prediction error of a kind of the tsplit
// policy's plans over every model and budget (issue 13's first
// must-show).
func (r *MeasuredResults) TsplitAccuracy(kind int) Accuracy {
	var errs []float64
	for _, m := range r.Models {
		for _, c := range m.Cases {
			if c.Policy == "tsplit" && c.OK() && len(c.Steps) > 0 {
				errs = append(errs, math.Abs(m.CaseError(c, kind)))
			}
		}
	}
	if len(errs) == 0 {
		return Accuracy{}
	}
	return Accuracy{Cases: len(errs), Median: quantile(errs, 0.5), Worst: slices.Max(errs)}
}

// Discord is a pair of policies whose measured order differs from
// their predicted order.
type Discord struct {
	Faster, Slower string // by prediction
	// WithinNoise: the interquartile ranges of their measured steps
	// over the unplanned steps overlap.
	WithinNoise bool
}

// Ranking compares, at one budget of one model, the policies that fit
// ordered by predicted step with their order by measured step relative
// to the unplanned step run just before (Relative, the least sensitive
// to the machine's load): the pairs in another order (issue 13's
// second must-show).
func (m *MeasuredModel) Ranking(percent int) (predicted []string, discords []Discord) {
	var cs []*MeasuredCase
	for _, c := range m.Cases {
		if c.Percent == percent && c.OK() && len(c.Steps) > 0 {
			cs = append(cs, c)
		}
	}
	slices.SortStableFunc(cs, func(a, b *MeasuredCase) int {
		switch {
		case a.Predicted < b.Predicted:
			return -1
		case a.Predicted > b.Predicted:
			return 1
		}
		return 0
	})
	for i, a := range cs {
		predicted = append(predicted, a.Policy)
		for _, b := range cs[i+1:] {
			if a.Predicted == b.Predicted || a.Relative() <= b.Relative() {
				continue // predicted equal, or measured in the predicted order
			}
			alo, ahi := quantile(a.Paired, 0.25), quantile(a.Paired, 0.75)
			blo, bhi := quantile(b.Paired, 0.25), quantile(b.Paired, 0.75)
			discords = append(discords, Discord{Faster: a.Policy, Slower: b.Policy, WithinNoise: alo <= bhi && blo <= ahi})
		}
	}
	return predicted, discords
}

func measuredMD(r *MeasuredResults) string {
	var b strings.Builder
	c := r.Config
	fmt.Fprintf(&b, "# Measured vs predicted step time\n\n")
	fmt.Fprintf(&b, "`%s` on the CPU device with %s's link emulated (docs/measured.md). Every model is profiled first "+
		"(`tsplitc profile MODEL --emulate %s`, %d timed steps); each policy plans its step on that profile at %s of the "+
		"unplanned peak; then, %d rounds, every plan runs one step in turn, each right after a step of the unplanned step. "+
		"Measured: the median step (first op start to last op end) with the interquartile range. Three errors, "+
		"(predicted − measured) / measured: *planned*, the plan's own prediction (the profile measured before planning); "+
		"*re-measured*, the same plan simulated on the profile re-measured from the unplanned step's runs between the plans' "+
		"runs, same link (the machine's load changes over minutes: this one sees the load the plans ran under); *relative*, "+
		"the re-measured prediction over the unplanned step's against the median of each measured step over the unplanned "+
		"step run just before it (the least sensitive to the load). Machine: 2 cores shared with other work, load average "+
		"(1, 5, 15 min) %s before, %s after; %v in all.\n\n",
		c.Command, c.Emulate, c.Emulate, c.ProfileRuns, joinPercents(c.Budgets), c.Rounds, r.LoadBefore, r.LoadAfter, r.Elapsed.Round(1e9))
	b.WriteString("**tsplit's plans:**")
	for k, name := range []string{"planned", "re-measured", "relative"} {
		a := r.TsplitAccuracy(k)
		fmt.Fprintf(&b, " %s |error| median %.1f %%, worst %.1f %% (%d cases);", name, 100*a.Median, 100*a.Worst, a.Cases)
	}
	b.WriteString("\n\n")
	for _, m := range r.Models {
		p := m.Profile
		fmt.Fprintf(&b, "## %s, batch %d\n\n", m.Name, m.Batch)
		fmt.Fprintf(&b, "Profile: %d op keys timed, %.3g µs per op besides kernels, link %.3g MB/s each way (%s × %.4g), %.0f µs per copy. ",
			len(p.OpTimes), p.Launch*1e6, p.H2D/1e6, p.Emulation.Of, p.Emulation.Ratio, p.LinkLatency*1e6)
		w := m.Window
		fmt.Fprintf(&b, "Re-measured over the benchmark: %d steps, %.3g µs per op, paced copies %.0f µs late. ", w.Measured.Runs, w.Launch*1e6, w.Emulation.Overhead*1e6)
		fmt.Fprintf(&b, "Unplanned step: %s ms predicted (%s ms re-measured), %s ms measured, peak %s.\n\n",
			ms(m.Base.Predicted), ms(m.Base.Repredicted), ms(m.Base.Measured()), units.Bytes(m.Base.Peak))
		fmt.Fprintf(&b, "| budget | policy | swap / recompute / split | predicted ms | re-measured ms | measured ms (IQR) | error: planned | re-measured | relative | throughput vs unplanned: re-measured prediction | measured | stall ms | peak: planned = measured |\n")
		fmt.Fprintf(&b, "|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
		for _, c := range m.Cases {
			if !c.OK() {
				fmt.Fprintf(&b, "| %d %% | %s | does not fit | | | | | | | | | | |\n", c.Percent, c.Policy)
				continue
			}
			lo, hi := c.Spread()
			fmt.Fprintf(&b, "| %d %% | %s | %d / %d / %d | %s | %s | %s (%s–%s) | %s | %s | %s | %.1f %% | %.1f %% | %s | %s |\n",
				c.Percent, c.Policy, c.Swapped, c.Recomputed, c.Split, ms(c.Predicted), ms(c.Repredicted), ms(c.Measured()), ms(lo), ms(hi),
				pct(c.Error()), pct(c.WindowError()), pct(m.CaseError(c, ErrRelative)), 100*m.Base.Repredicted/c.Repredicted, 100/c.Relative(), ms(c.Stall()), peakCheck(c))
		}
		b.WriteString("\n")
		for _, pc := range c.Budgets {
			order, discords := m.Ranking(pc)
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
		fmt.Fprintf(&b, "![%s](%s_%s.png)\n\n", m.Name, MeasuredFile, m.Name)
	}
	return b.String()
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
	rows := [][]string{{"model", "batch", "budget_pct", "budget_bytes", "policy", "fits", "swapped", "recomputed", "split",
		"predicted_s", "repredicted_s", "unplanned_predicted_s", "measured_s", "measured_q1_s", "measured_q3_s", "error", "repredicted_error", "measured_over_unplanned", "relative_error", "stall_s", "planned_peak_bytes", "measured_peak_bytes", "steps_s"}}
	f := func(x float64) string { return strconv.FormatFloat(x, 'g', 6, 64) }
	for _, m := range r.Models {
		for _, c := range append([]*MeasuredCase{m.Base}, m.Cases...) {
			row := []string{m.Name, strconv.FormatInt(m.Batch, 10), strconv.Itoa(c.Percent), strconv.FormatInt(c.Budget, 10), c.Policy}
			if !c.OK() {
				rows = append(rows, append(row, "false", "", "", "", "", "", "", "", "", "", "", "", "", "", "", "", "", ""))
				continue
			}
			lo, hi := c.Spread()
			var steps []string
			for _, s := range c.Steps {
				steps = append(steps, f(s))
			}
			rows = append(rows, append(row, "true", strconv.Itoa(c.Swapped), strconv.Itoa(c.Recomputed), strconv.Itoa(c.Split),
				f(c.Predicted), f(c.Repredicted), f(m.Base.Predicted), f(c.Measured()), f(lo), f(hi), f(c.Error()), f(c.WindowError()),
				f(c.Relative()), f(m.CaseError(c, ErrRelative)), f(c.Stall()),
				strconv.FormatInt(c.Peak, 10), strconv.FormatInt(c.MeasuredPeak, 10), strings.Join(steps, ";")))
		}
	}
	return rows
}

// MeasuredSummary prints the error of every plan and the must-show
// numbers.
func MeasuredSummary(w io.Writer, r *MeasuredResults) {
	for _, m := range r.Models {
		fmt.Fprintf(w, "%s b%d: unplanned %s ms predicted (%s re-measured), %s ms measured\n", m.Name, m.Batch, ms(m.Base.Predicted), ms(m.Base.Repredicted), ms(m.Base.Measured()))
		for _, c := range m.Cases {
			if !c.OK() {
				fmt.Fprintf(w, "  %3d%% %-15s does not fit\n", c.Percent, c.Policy)
				continue
			}
			fmt.Fprintf(w, "  %3d%% %-15s %8s ms predicted %8s re-measured %8s ms measured  errors %s %s %s  peak %s\n", c.Percent, c.Policy,
				ms(c.Predicted), ms(c.Repredicted), ms(c.Measured()), pct(c.Error()), pct(c.WindowError()), pct(m.CaseError(c, ErrRelative)), peakCheck(c))
		}
	}
	fmt.Fprintf(w, "tsplit:")
	for k, name := range []string{"planned", "re-measured", "relative"} {
		a := r.TsplitAccuracy(k)
		fmt.Fprintf(w, " %s |error| median %.1f %%, worst %.1f %% (%d cases);", name, 100*a.Median, 100*a.Worst, a.Cases)
	}
	fmt.Fprintf(w, " load %s → %s\n", r.LoadBefore, r.LoadAfter)
}

// plotMeasured draws one model's policies (x) at every budget:
// predicted step (open marks) and measured median with its
// interquartile range (filled marks and bars), the unplanned step's
// measured median dashed.
func plotMeasured(dir, base string, r *MeasuredResults, m *MeasuredModel) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s, batch %d: predicted vs measured step on the CPU device (%s link emulated)", m.Name, m.Batch, r.Config.Emulate)
	p.Y.Label.Text = "step time (ms)"
	p.Add(plotter.NewGrid())
	pols := r.Config.Policies
	p.NominalX(pols...)
	p.X.Tick.Label.Rotation = math.Pi / 6
	p.X.Tick.Label.XAlign, p.X.Tick.Label.YAlign = draw.XRight, draw.YTop
	ymax := m.Base.Measured() * 1e3
	base1, err := plotter.NewLine(plotter.XYs{{X: -0.5, Y: m.Base.Measured() * 1e3}, {X: float64(len(pols)) - 0.5, Y: m.Base.Measured() * 1e3}})
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
			c := m.Case(pc, pol)
			if c == nil || !c.OK() || len(c.Steps) == 0 {
				continue
			}
			x := float64(j) + off
			lo, hi := c.Spread()
			pred = append(pred, plotter.XY{X: x, Y: c.Predicted * 1e3})
			meas = append(meas, plotter.XY{X: x, Y: c.Measured() * 1e3})
			errs = append(errs, struct{ Low, High float64 }{(c.Measured() - lo) * 1e3, (hi - c.Measured()) * 1e3})
			ymax = max(ymax, c.Predicted*1e3, hi*1e3)
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
		p.Legend.Add(fmt.Sprintf("%d %%: predicted", pc), ps)
		p.Legend.Add(fmt.Sprintf("%d %%: measured (IQR)", pc), ms)
	}
	p.Y.Min, p.Y.Max = 0, 1.1*ymax
	const w, h = 10 * vg.Inch, 6 * vg.Inch
	write := func(c vg.CanvasWriterTo, path string) error {
		p.Draw(draw.New(c))
		var b bytes.Buffer
		if _, err := c.WriteTo(&b); err != nil {
			return err
		}
		return backend.WriteBytesAtomic(path, b.Bytes())
	}
	if err := write(vgimg.PngCanvas{Canvas: vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(110), vgimg.UseBackgroundColor(color.White))},
		filepath.Join(dir, base+".png")); err != nil {
		return err
	}
	return write(vgsvg.New(w, h), filepath.Join(dir, base+".svg"))
}
