package passes

import (
	"github.com/tsplit/tsplit/ir"
	"github.com/tsplit/tsplit/memory"
	"github.com/tsplit/tsplit/profile"
)

// Report summarizes what planning did; the CLI prints it and the
// emitted model carries it as metadata.
type Report struct {
	Policy     string  `json:"policy"`
	Device     string  `json:"device"`
	Budget     int64   `json:"budget_bytes"`
	BasePeak   int64   `json:"base_peak_bytes"`
	Peak       int64   `json:"planned_peak_bytes"`
	Pool       int64   `json:"pool_bytes"`
	HostPeak   int64   `json:"host_peak_bytes"`
	BaseTime   float64 `json:"base_step_s"`
	Time       float64 `json:"planned_step_s"`
	Swapped    int     `json:"swapped"`
	Recomputed int     `json:"recomputed"`
	Split      int     `json:"split"`
	Rounds     int     `json:"rounds"`
	// Offloaded is how many weights (parameters, optimizer state,
	// running statistics) the plan keeps on the host (OffloadState).
	Offloaded int `json:"offloaded_state,omitempty"`
	// HostUpdate says the optimizer update of the offloaded state runs
	// on the host (Options.Update).
	HostUpdate bool `json:"host_update,omitempty"`
	// Order is the op order the plan was made in (passes.Order).
	Order string `json:"order,omitempty"`
	// Chosen says, for the tsplit policy, which of its two plans was
	// kept when both were tried (package policy, tsplit's PlanStep): ""
	// when only one was made.
	Chosen string `json:"chosen,omitempty"`
	// FusedTiles names the fused-tiled segments the step was built with
	// and their tile grids ("" for none; docs/sft.md).
	FusedTiles string `json:"fused_tiles,omitempty"`
	// Link is the host link the CPU device emulates for the plan, from
	// the profile it was made with (nil: none, a GPU's profile): what
	// `tsplitc run` paces the copy streams to.
	Link *profile.Emulation `json:"emulated_link,omitempty"`
	// Measured marks a plan made with a profile measured on the CPU
	// device (tsplitc profile): its predictions are that device's.
	Measured bool `json:"measured_profile,omitempty"`
	// Decisions lists every tensor decision, in the order made.
	Decisions []DecisionReport `json:"decisions"`
	// Base and Planned are the memory timelines (M_i along the schedule)
	// before and after planning, for reports. They are left out of the
	// model's metadata.
	Base    []TimelinePoint `json:"base_timeline,omitempty"`
	Planned []TimelinePoint `json:"planned_timeline,omitempty"`
	// Run is a measured memory timeline of the planned step (a run's
	// report, tsplitc run --report): per op of the schedule, the device
	// bytes in use when the runtime issued it — after its allocations
	// and the frees before it — from its issue to the next op's, in
	// measured seconds from the step's first op. Reports draw it over
	// Planned. Planning leaves it empty.
	Run []TimelinePoint `json:"measured_timeline,omitempty"`
	// Whole, for a plan that trains with sub-batches (moDNN), is the
	// whole batch's unplanned step: what a user would otherwise run,
	// and what the plan's overhead is against. BasePeak, BaseTime and
	// Base then describe the sub-batched step before planning.
	Whole *WholeBatch `json:"whole_batch,omitempty"`
	// placed says the plan's triggers and releases are placed
	// (PlaceReleases): the pipeline's ControlEdges then leaves the plan
	// as the search compared it.
	placed bool
}

// WholeBatch is the unplanned step of the whole batch a sub-batched
// plan splits.
type WholeBatch struct {
	Peak       int64   `json:"peak_bytes"`
	Time       float64 `json:"step_s"`
	SubBatches int     `json:"sub_batches"`
}

// Before is the unplanned step the plan is measured against: the whole
// batch's where the plan trains with sub-batches, else the base step.
func (r *Report) Before() (peak int64, time float64) {
	if w := r.Whole; w != nil {
		return w.Peak, w.Time
	}
	return r.BasePeak, r.BaseTime
}

// TimelinePoint is one op of a memory timeline.
type TimelinePoint struct {
	Op    string  `json:"op"`
	Type  string  `json:"type"`
	Phase string  `json:"phase"`
	Live  int64   `json:"live_bytes"`
	Start float64 `json:"start_s"`
	End   float64 `json:"end_s"`
	// Kind marks what planning added: "swap_out", "swap_in", "recompute",
	// "split", "host"; empty for the model's own ops.
	Kind string `json:"kind,omitempty"`
}

// PlanTimeline renders a memory model and its simulation as points
// (tl nil: positions and memory only, no times).
func PlanTimeline(mem *memory.Model, tl *Timeline) []TimelinePoint {
	if tl == nil {
		n := len(mem.Order)
		tl = &Timeline{Start: make([]float64, n), End: make([]float64, n)}
	}
	return timeline(mem, tl)
}

// timeline renders a memory model and simulation as points.
func timeline(mem *memory.Model, tl *Timeline) []TimelinePoint {
	out := make([]TimelinePoint, len(mem.Order))
	for i, op := range mem.Order {
		pt := TimelinePoint{Op: op.Name, Type: op.QualifiedType(), Phase: op.Phase.String(), Live: mem.Live[i], Start: tl.Start[i], End: tl.End[i]}
		switch ir.CopyOf(op) {
		case ir.ToHost:
			pt.Kind = "swap_out"
		case ir.ToDevice:
			pt.Kind = "swap_in"
		case ir.OnHost:
			pt.Kind = "host"
		}
		if pt.Kind == "" {
			pt.Kind = op.Origin // "recompute", "split" or the model's own ("")
		}
		out[i] = pt
	}
	return out
}

// DecisionReport is one row of the per-tensor decision table.
type DecisionReport struct {
	Tensor string `json:"tensor"`
	Bytes  int64  `json:"bytes"`
	Option string `json:"option"`
	PNum   int    `json:"p_num"`
	Dim    int    `json:"dim"`
	// Split is the split's map as FTCompat prints it (splits only):
	// dimension, kind, rewrite, and per input the followed dimension
	// with σ and halo.
	Split  string  `json:"split,omitempty"`
	DeltaM int64   `json:"delta_m"`
	DeltaT float64 `json:"delta_t_s"`
	At     string  `json:"bottleneck"`
}
