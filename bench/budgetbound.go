package bench

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/tsplit/tsplit"
	"github.com/tsplit/tsplit/measure"
)

// GapKind sorts a budget of a sweep by how tsplit's plan there stands
// to the lower bound.
type GapKind int

const (
	// GapNone: no bound, because tsplit does not fit (the bound is of
	// its plan's order).
	GapNone GapKind = iota
	// GapError: the bound's LP could not be solved.
	GapError
	// GapOutside: tsplit's plan adds less than the bound, or fits where
	// the bound says no swap + recompute plan does: it splits tensors,
	// outside the bound's class.
	GapOutside
	// GapZero: the bound and the plan's added time are both 0 (gap 0).
	GapZero
	// GapInf: the bound is 0 and the plan adds time (gap ∞).
	GapInf
	// GapFinite: the bound is positive and at most the plan's added
	// time.
	GapFinite
)

// Bound is the sweep's lower bound at budget i: the one computed for
// BoundPolicy's plan (nil where that policy is not in the sweep, does
// not fit, or was planned without it).
func (s *BudgetSweep) Bound(i int) *tsplit.BoundInfo {
	j := slices.Index(s.Policies, BoundPolicy)
	if j < 0 || !s.Points[i][j].OK {
		return nil
	}
	return s.Points[i][j].Bound
}

// Gap is BoundPolicy's gap to the bound at budget i, (ΔT − LB) / LB as
// package bound defines it, and its kind; the gap is meaningful for
// GapZero, GapInf and GapFinite only.
func (s *BudgetSweep) Gap(i int) (float64, GapKind) {
	b := s.Bound(i)
	switch {
	case b == nil:
		return 0, GapNone
	case b.Error != "":
		return 0, GapError
	case b.OutsideClass || b.Infeasible:
		return 0, GapOutside
	case math.IsInf(b.Ratio, 1):
		return b.Ratio, GapInf
	case b.AddedS <= 0:
		return 0, GapZero
	}
	return b.Ratio, GapFinite
}

// GapSummary counts a set of sweep budgets by GapKind and takes the
// median gap.
type GapSummary struct {
	// Budgets are the budgets swept, Fits those tsplit fits.
	Budgets, Fits int
	// Counts of the budgets tsplit fits by kind.
	Zero, Inf, Finite, Outside, Errors int
	// Split counts the budgets of kind Zero, Inf or Finite where
	// tsplit's plan splits tensors but still adds at least the bound
	// (of the depth-first order then, bound.Summary.Order): outside the
	// class too, but counted with its gap, as `tsplitc plan --bound`
	// reports it.
	Split int
	// Median is the median gap over the budgets of kind Zero, Inf and
	// Finite (NaN when there are none), MedianFinite over those of kind
	// Finite: where the bound is positive.
	Median, MedianFinite float64
	gaps, finite         []float64
}

func (g *GapSummary) add(s *BudgetSweep) {
	ts := slices.Index(s.Policies, BoundPolicy)
	for i := range s.Percents {
		g.Budgets++
		gap, kind := s.Gap(i)
		if ts >= 0 && s.Points[i][ts].OK {
			g.Fits++
		}
		switch kind {
		case GapError:
			g.Errors++
		case GapOutside:
			g.Outside++
		case GapZero, GapInf, GapFinite:
			g.gaps = append(g.gaps, gap)
			if s.Points[i][ts].Split > 0 {
				g.Split++
			}
		}
		switch kind {
		case GapZero:
			g.Zero++
		case GapInf:
			g.Inf++
		case GapFinite:
			g.Finite++
			g.finite = append(g.finite, gap)
		}
	}
	g.Median, g.MedianFinite = median(g.gaps), median(g.finite)
}

// SummarizeGaps is the GapSummary of sweeps together.
func SummarizeGaps(sweeps ...*BudgetSweep) GapSummary {
	var g GapSummary
	for _, s := range sweeps {
		g.add(s)
	}
	return g
}

// median is the middle of xs, or the mean of the two middle ones (+Inf
// when one of them is), NaN for none (a sweep where tsplit fits no
// budget has no median gap, not a gap of 0).
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	return measure.Median(slices.Clone(xs))
}

// fmtGap writes a gap in percent: "∞" for +Inf, "—" for NaN.
func fmtGap(g float64) string {
	switch {
	case math.IsNaN(g):
		return "—"
	case math.IsInf(g, 1):
		return "∞"
	}
	return fmtFloat(100*g, 1) + " %"
}

// fmtBoundCell is the lower bound column at budget i: its overhead over
// the unplanned step in percent, † when it is of the depth-first order.
func fmtBoundCell(s *BudgetSweep, i int) string {
	b := s.Bound(i)
	switch {
	case b == nil:
		return "—"
	case b.Error != "":
		return "not computed"
	case b.Infeasible:
		return "none fits"
	}
	o := 0.0
	if s.BaseStep > 0 {
		o = 100 * b.AddedS / s.BaseStep
	}
	c := fmtFloat(o, 2)
	if b.Order != "plan" {
		c += " †"
	}
	return c
}

// fmtGapCell is tsplit's gap column at budget i.
func fmtGapCell(s *BudgetSweep, i int) string {
	g, kind := s.Gap(i)
	switch kind {
	case GapNone, GapError:
		return "—"
	case GapOutside:
		return "outside the class"
	}
	return fmtGap(g)
}

// boundDefinitions is the budget sweep file's paragraph on the lower
// bound column and the gap.
func boundDefinitions() string {
	return "The **lower bound** column is package bound's certified lower bound (`bound.Lower`, docs/planner.md §9) on the " +
		"time any plan of the class *swap + recompute on a fixed op order* adds at that budget, in percent of the unplanned " +
		"step, computed for the order tsplit's plan there runs the step in, exactly as `tsplitc plan --bound` and `--json` " +
		"report it (`lower_bound.added_s`): no plan of the class in that order is faster. It exists where tsplit fits (— " +
		"elsewhere); \"none fits\" means no plan of the class fits that budget; † marks a bound of the depth-first order, " +
		"used where tsplit's plan splits tensors, so that its own order of the step cannot be recovered. The other policies' " +
		"plans are of the class too (none splits; moDNN here does not sub-batch), each in the order it plans in (the CSV's " +
		"order column: as-built, or depth-first for modnn and tflms); the column bounds those that run tsplit's order. " +
		"**tsplit's gap** is (ΔT − LB) / LB, ΔT the time tsplit's " +
		"plan adds and LB the bound: 0 when both are 0, ∞ when LB = 0 < ΔT; \"outside the class\" labels a plan that splits " +
		"tensors and adds less than the bound (or fits where no plan of the class does), which the bound does not cover. A " +
		"split plan that adds at least the bound keeps its gap.\n\n" +
		"The summaries: of the budgets swept, those tsplit fits, by kind; the **median gap** is over the budgets tsplit fits " +
		"less those outside the class (a 0/0 counts as 0, an ∞ as ∞, the mean of the two middle gaps for an even count), and " +
		"the median over a positive bound is over those with LB > 0 only, where the ratio says most.\n\n"
}

// gapSummaryText says what g counts, for the file's header (overall)
// and under each table.
func gapSummaryText(g GapSummary) string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("tsplit fits %d of %d budgets", g.Fits, g.Budgets)
	var parts []string
	add := func(n int, what string) {
		if n > 0 {
			parts = append(parts, strconv.Itoa(n)+" "+what)
		}
	}
	add(g.Zero, "with bound 0 and a plan that adds nothing (0/0)")
	add(g.Inf, "with bound 0 and a plan that adds time (∞)")
	add(g.Finite, "with a positive bound")
	add(g.Outside, "outside the class")
	add(g.Errors, "where the bound could not be computed")
	if len(parts) > 0 {
		w(": %s", strings.Join(parts, ", "))
	}
	if g.Split > 0 {
		w(" (%d of those with a gap are split plans at or above the bound)", g.Split)
	}
	w(". Median gap %s over %d budgets", fmtGap(g.Median), len(g.gaps))
	if g.Finite > 0 {
		w("; %s over the %d with a positive bound", fmtGap(g.MedianFinite), g.Finite)
	}
	w(".")
	return b.String()
}
