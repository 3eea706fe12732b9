package tsplit

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/tsplit/tsplit/compiler"
	"github.com/tsplit/tsplit/ir"
	"github.com/tsplit/tsplit/passes"
	"github.com/tsplit/tsplit/policy"
)

// Fused-tiled segments (SFT, docs/sft.md) as an alternative plan. When
// an op's working set does not fit the budget (must-tile), swapping,
// recomputing and per-op splitting still need each whole activation
// somewhere; a fused-tiled segment never builds it. The tiles are
// chosen on the forward model, before the training step exists
// (passes.FuseForTraining builds the step from the tiled forward), so
// the plan needs the forward model: Plan keeps a copy when it builds
// the step itself. The policy then plans the fused step like any other
// (what is outside the segments may still be swapped or recomputed),
// and the plan whose predicted step time is lower is kept; where
// nothing needs tiles no fused plan is made.

// fusedTilesApply reports whether Plan tries fused tiles for pol: the
// tsplit policy planning whole batches (the baselines reproduce their
// papers, moDNN sub-batches instead).
func fusedTilesApply(pol policy.Policy) bool {
	return pol != nil && pol.Name() == "tsplit"
}

// withFusedTiles plans the step of fwd with fused tiles after the plain
// plan (pres, perr) of the same step, and returns the better: the one
// that fits, or of two that fit the one predicted faster. When the
// plain plan failed for want of memory and fused tiles do not help
// either, the error says why.
func withFusedTiles(ctx context.Context, fwd *ir.Model, o *Options, pol policy.Policy, popts *policy.Options, pr *progress, pres *policy.Result, perr error) (*policy.Result, error) {
	if pres == nil || pres.Report == nil || ctx.Err() != nil {
		return pres, perr
	}
	var ie *passes.InfeasibleError
	if perr != nil && !errors.As(perr, &ie) && !(pres.Report.Planned == nil && pres.Report.BasePeak > pres.Report.Budget) {
		return pres, perr // not a question of memory
	}
	budget := pres.Report.Budget
	build := func(m *ir.Model) error {
		_, err := compiler.BuildTrainingStep(m, o.Train)
		return err
	}
	step, err := passes.FuseForTraining(fwd, budget, build)
	if err != nil {
		if perr != nil {
			return pres, fmt.Errorf("%w; fused tiles: %v", perr, err)
		}
		return pres, perr
	}
	if step == nil {
		return pres, perr // nothing needs tiles
	}
	po := *popts
	po.Budget = budget
	if step.Fits && po.Order == passes.OrderAuto {
		// The step was tiled for the order it was built in, and fits
		// there: another order would only undo the cell-by-cell
		// backward.
		po.Order = passes.OrderAsBuilt
	}
	if step.Fits && po.Order == passes.OrderAuto {
		// The step was tiled for the order it was built in, and fits
		// there: another order would only undo the cell-by-cell
		// backward.
		po.Order = passes.OrderAsBuilt
	}
	fres, ferr := planModel(ctx, step.Model, o, pol, &po, pr)
	if ferr != nil {
		if perr != nil {
			return pres, fmt.Errorf("%w; fused tiles (%s) did not plan either: %v", perr, describeFused(step), ferr)
		}
		return pres, perr
	}
	if perr == nil && fres.Report.Time >= pres.Report.Time {
		return pres, perr
	}
	r := fres.Report
	r.FusedTiles = describeFused(step)
	// The base is the step a user would otherwise run: the plain one.
	r.BasePeak, r.BaseTime, r.Base = pres.Report.BasePeak, pres.Report.BaseTime, pres.Report.Base
	return fres, nil
}

// describeFused names each segment's first and last op and its tile
// grid: "conv0 … pool5 on 3×3 tiles; conv7 … pool9 on 2×2 tiles".
func describeFused(step *passes.FusedStep) string {
	var parts []string
	for _, ft := range step.Fused {
		ops := ft.Tiling.Seg.Ops
		var grid []string
		for _, n := range ft.Tiling.Counts {
			grid = append(grid, fmt.Sprint(n))
		}
		parts = append(parts, fmt.Sprintf("%s … %s on %s tiles", ops[0].Name, ops[len(ops)-1].Name, strings.Join(grid, "×")))
	}
	return strings.Join(parts, "; ")
}
