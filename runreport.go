package tsplit

import (
	"github.com/tsplit/tsplit/executor"
	"github.com/tsplit/tsplit/ir"
	"github.com/tsplit/tsplit/memory"
	"github.com/tsplit/tsplit/passes"
	"github.com/tsplit/tsplit/profile"
)

// runReport is the report of a plan's run (RunOptions.Report): the
// plan's own summary and decisions, its predicted memory timeline (the
// memory model of the order that ran, simulated on device's profile
// when one is named: the time axis) and the timeline measured in tl.
func runReport(m *ir.Model, plan *passes.Report, mem *memory.Model, tl []executor.Record, device string) (*passes.Report, error) {
	if plan == nil {
		return nil, usage("Report", "draws a plan's predicted memory timeline under the measured one, and %s is not a planned model", m.Path)
	}
	r := *plan
	var sim *passes.Timeline
	if device != "" {
		p, err := profile.Lookup(device)
		if err != nil {
			return nil, &UsageError{Option: "Device", Err: err}
		}
		sim = passes.Simulate(m.Graph, mem, p)
		r.Time = sim.StepTime
	}
	r.Planned = passes.PlanTimeline(mem, sim)
	r.Run = measuredTimeline(tl)
	return &r, nil
}

// measuredTimeline is a run's memory timeline: for every op, the
// device bytes in use when it was issued (the runtime allocates an
// op's outputs right before issuing it, and frees what the ops before
// it no longer need right after issuing those, on the same thread), from
// its issue to the next op's, in seconds from the step's first op.
func measuredTimeline(tl []executor.Record) []passes.TimelinePoint {
	var t0 float64
	first := true
	for i := range tl {
		if tl[i].Op != nil && tl[i].Stream != "" && (first || tl[i].Start.Seconds() < t0) {
			t0, first = tl[i].Start.Seconds(), false
		}
	}
	var out []passes.TimelinePoint
	for i := range tl {
		rec := &tl[i]
		if rec.Op == nil || rec.Stream == "" {
			break // the run stopped early
		}
		pt := passes.TimelinePoint{Op: rec.Op.Name, Type: rec.Op.QualifiedType(), Phase: rec.Op.Phase.String(), Live: rec.Live,
			Start: max(rec.Issued.Seconds()-t0, 0), End: max(rec.End.Seconds()-t0, 0)}
		if i+1 < len(tl) && tl[i+1].Op != nil && tl[i+1].Stream != "" {
			pt.End = max(tl[i+1].Issued.Seconds()-t0, pt.Start)
		}
		out = append(out, pt)
	}
	return out
}
