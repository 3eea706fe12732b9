package passes

import (
	"fmt"

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
	// Chosen says, for the tsplit policy, which of its two plans was
	// kept when both were tried (see PlanMemory): "" when only one was
	// made.
	Chosen string `json:"chosen,omitempty"`
	// Decisions lists every tensor decision, in the order made.
	Decisions []DecisionReport `json:"decisions"`
	// Base and Planned are the memory timelines (M_i along the schedule)
	// before and after planning, for reports. They are left out of the
	// model's metadata.
	Base    []TimelinePoint `json:"base_timeline,omitempty"`
	Planned []TimelinePoint `json:"planned_timeline,omitempty"`
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

// maxRounds bounds plan-and-rewrite rounds. A round plans on the
// current graph with the analytic cost model; the exact memory model of
// the rewritten graph then decides whether another round is needed.
const maxRounds = 24

func profileOf(s *State) *profile.Profile {
	if s.Opts.Profile != nil {
		return s.Opts.Profile
	}
	p, _ := profile.Lookup("titan-rtx")
	return p
}

// PlanMemory runs TSPLIT Alg. 2 rounds until the exact memory model of
// the rewritten graph fits the budget: plan on the current graph, insert
// the swaps and recomputations, re-analyze.
var PlanMemory = &Pass{
	Name:     "plan",
	Doc:      "choose swap/recompute per tensor by smallest ΔT/ΔM (TSPLIT Alg. 2) and insert them",
	Requires: []*Pass{Schedule},
	Mutates:  true,
	Run:      planWithFallback,
}

// planWithFallback runs the rounds, and for the tsplit policy keeps a
// split plan only where it pays. Alg. 2 takes a split when its ΔT/ΔM
// beats every swap and recompute at one bottleneck, a greedy choice
// that can leave the whole plan slower than — or, through later rounds,
// infeasible where — the swap/recompute-only plan of the same graph is
// not; TSPLIT "resorts to swapping/recomputing full tensors if the cost
// outweighs the benefits" (§V-C). So when the split plan contains splits
// or fails, the swap/recompute-only plan is made on a copy of the graph
// taken before planning, and the one with the shorter simulated step
// (or the one that exists) is kept. Report.Chosen says which.
func planWithFallback(s *State) (any, error) {
	if err := CheckPolicyParams(s.Opts.Policy, s.Opts.PolicyParams); err != nil {
		return nil, err
	}
	if policyName(s.Opts.Policy) != "tsplit" || s.Opts.NoSwap {
		return planRounds(s)
	}
	snap := s.Model.Clone()
	res, err := planRounds(s)
	if err == nil && s.Report.Split == 0 {
		return res, nil
	}
	opts := *s.Opts
	opts.Policy = "tsplit-nosplit"
	alt := NewState(snap, &opts)
	alt.Check = s.Check
	_, altErr := planRounds(alt)
	switch {
	case altErr != nil && err != nil:
		return nil, err
	case altErr != nil:
		s.Report.Chosen = "split plan (the swap/recompute-only plan failed)"
		return res, nil
	case err == nil && s.Report.Time <= alt.Report.Time:
		s.Report.Chosen = fmt.Sprintf("split plan (simulated step %.4g s; swap/recompute only: %.4g s)", s.Report.Time, alt.Report.Time)
		return res, nil
	}
	r := alt.Report
	r.Policy = s.Report.Policy
	if err != nil {
		r.Chosen = "swap/recompute-only plan (the split plan failed: " + err.Error() + ")"
	} else {
		r.Chosen = fmt.Sprintf("swap/recompute-only plan (simulated step %.4g s; with splits: %.4g s)", r.Time, s.Report.Time)
	}
	*s.Model = *snap
	s.Report, s.layout = r, alt.layout
	return nil, nil
}

// planRounds is Alg. 2 in rounds with the state's policy (PlanMemory).
func planRounds(s *State) (any, error) {
	m, g := s.Model, s.Model.Graph
	p := profileOf(s)
	budget := s.Opts.Budget
	if budget <= 0 {
		budget = p.Budget()
	}
	base, err := memory.Analyze(g, memory.Options{})
	if err != nil {
		return nil, err
	}
	baseTL := Simulate(g, base, p)
	r := &Report{Policy: policyName(s.Opts.Policy), Device: p.Name, Budget: budget, BasePeak: base.Peak, BaseTime: baseTL.StepTime, Base: timeline(base, baseTL)}
	s.Report = r
	mem := base
	tl := baseTL
	// target is what the planner aims M_i at: the budget, lowered by
	// what fragmentation costs when the static layout of a fitting
	// plan still needs a bigger pool.
	target := budget
	fragRounds := 0
	// The lower bound reported on failure is the input graph's: later
	// rounds plan on a rewritten graph.
	var lowerBound int64 = -1
	baseBound := func() int64 {
		if lowerBound < 0 {
			lb := NewPlanner(g, base, baseTL, p, budget)
			if !s.Opts.NoSwap && policyName(s.Opts.Policy) == "tsplit" {
				lb.SplitChoices = s.splitChoices()
			}
			lowerBound = lb.LowerBound()
		}
		return lowerBound
	}
	if mem.Peak > budget {
		baseBound() // before the graph changes
	}
	for round := 0; ; round++ {
		if err := s.Opts.interrupted(); err != nil {
			return nil, err
		}
		if s.Opts.OnRound != nil {
			s.Opts.OnRound(round, mem.Peak, target)
		}
		if mem.Peak <= target {
			l := mem.MakeLayout()
			if l.Pool <= budget {
				s.layout = l
				break
			}
			// Aim below by the overshoot, and a little more each time
			// so that this converges in a few rounds.
			over := l.Pool - budget
			target -= over + over/2 + memory.Alignment
			fragRounds++
			if fragRounds > maxRounds {
				return nil, fmt.Errorf("the static layout of every plan found needs a pool over the budget of %d bytes (fragmentation)", budget)
			}
			continue
		}
		if round >= maxRounds+fragRounds {
			return nil, fmt.Errorf("after %d rounds the plan still peaks at %d bytes, over the target of %d (budget %d)", maxRounds, mem.Peak, target, budget)
		}
		policy, err := LookupPolicy(s.Opts.Policy)
		if err != nil {
			return nil, err
		}
		plan, err := policy(&PolicyContext{State: s, G: g, Mem: mem, TL: tl, Prof: p, Budget: target, Round: round})
		if err != nil {
			if ie, ok := err.(*InfeasibleError); ok {
				// Planning aimed below the budget to leave room for the
				// layout's fragmentation: what stays live must fit with it.
				ie.Need += budget - target
				ie.Budget = budget
				ie.LowerBound = baseBound()
			}
			return nil, err
		}
		if len(plan.Decisions) == 0 && len(plan.Splits) == 0 {
			return nil, fmt.Errorf("round %d found nothing to evict at a peak of %d bytes (target %d)", round+1, mem.Peak, target)
		}
		for _, d := range plan.Decisions {
			r.Decisions = append(r.Decisions, DecisionReport{Tensor: d.Value.Name, Bytes: d.Value.Bytes(), Option: d.Option.String(),
				PNum: 1, Dim: -1, DeltaM: d.DeltaM, DeltaT: d.DeltaT, At: mem.Order[d.At].Describe()})
			switch d.Option {
			case Swap:
				r.Swapped++
			case Recompute:
				r.Recomputed++
			}
		}
		if err := InsertSwapRecompute(m, plan); err != nil {
			return nil, err
		}
		for _, sp := range plan.Splits {
			r.Split++
			r.Decisions = append(r.Decisions, DecisionReport{Tensor: sp.Op.Output(0).Name, Bytes: sp.Op.Output(0).Bytes(), Option: "split+swap",
				PNum: sp.PNum, Dim: sp.Dim(), Split: sp.Map.String(), DeltaM: sp.DeltaM, DeltaT: sp.DeltaT, At: sp.Op.Describe()})
			if err := InsertSplit(m, sp); err != nil {
				return nil, err
			}
		}
		if err := ir.Verify(m); err != nil {
			return nil, fmt.Errorf("rewritten graph does not verify: %w", err)
		}
		if mem, err = memory.Analyze(g, memory.Options{}); err != nil {
			return nil, err
		}
		tl = Simulate(g, mem, p)
		r.Rounds = round + 1
	}
	r.Peak, r.HostPeak, r.Time = mem.Peak, mem.HostPeak, tl.StepTime
	r.Planned = timeline(mem, tl)
	if r.HostPeak > p.HostMemory {
		return nil, fmt.Errorf("the plan swaps %d bytes to the host at once, more than the %s profile's %d bytes of pinned host memory", r.HostPeak, p.Name, p.HostMemory)
	}
	return nil, nil
}
