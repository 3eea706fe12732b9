package passes

import (
	"errors"
	"fmt"

	"github.com/tsplit/tsplit/ir"
	"github.com/tsplit/tsplit/memory"
	"github.com/tsplit/tsplit/profile"
)

// Planning in rounds. PlanMemory is one pass of the pipeline; inside it,
// PlanRounds runs each round as passes of its own, which the manager
// times, checks and dumps like any other (names under "plan/"):
//
//	plan/liveness, plan/simulate      the graph as planning found it
//	plan/round-N/fit                  static layout of a plan that fits M_i
//	plan/round-N/decide               the policy's plan for this round
//	plan/round-N/insert               the plan rewritten into the graph
//	plan/round-N/liveness, …/simulate the rewritten graph, for the next round
//
// A round plans on the current graph with the analytic cost model; the
// exact memory model of the rewritten graph then decides whether another
// round is needed.

// maxRounds bounds plan-and-rewrite rounds.
const maxRounds = 24

// Profile is the device s plans for: Options.Profile, or titan-rtx.
func (s *State) Profile() *profile.Profile { return profileOf(s) }

func profileOf(s *State) *profile.Profile {
	if s.Opts.Profile != nil {
		return s.Opts.Profile
	}
	p, _ := profile.Lookup("titan-rtx")
	return p
}

// Simulation is the predicted timeline of the current order on the
// device (Simulate over Liveness's memory model).
var Simulation = &Pass{
	Name:     "simulate",
	Doc:      "discrete-event simulation of the compute and copy streams",
	Requires: []*Pass{Liveness},
	Run: func(s *State) (any, error) {
		mem, err := typed[*memory.Model](s, Liveness)
		if err != nil {
			return nil, err
		}
		return Simulate(s.Model.Graph, mem, profileOf(s)), nil
	},
}

// roundState is the planning round in progress, which its passes share.
type roundState struct {
	pol    Policy
	n      int   // 0 first
	target int64 // what the round aims M_i at
	budget int64 // the budget planning was given
}

// FitLayout is the static layout of the current graph, computed when its
// memory model fits the round's target: the pool it needs says whether
// fragmentation still takes the plan past the budget.
var FitLayout = &Pass{
	Name:     "fit",
	Doc:      "static layout of a plan whose M_i fit: does its pool fit the budget",
	Requires: []*Pass{Liveness},
	Run: func(s *State) (any, error) {
		mem, err := typed[*memory.Model](s, Liveness)
		if err != nil {
			return nil, err
		}
		return mem.MakeLayout(), nil
	},
}

// Decide asks the round's policy for its plan of the current graph.
var Decide = &Pass{
	Name:     "decide",
	Doc:      "the policy chooses what to evict, swap, recompute or split this round",
	Requires: []*Pass{Liveness, Simulation},
	Run: func(s *State) (any, error) {
		mem, err := typed[*memory.Model](s, Liveness)
		if err != nil {
			return nil, err
		}
		tl, err := typed[*Timeline](s, Simulation)
		if err != nil {
			return nil, err
		}
		r := s.round
		if r == nil {
			return nil, fmt.Errorf("decide runs inside planning rounds (PlanRounds)")
		}
		plan, err := r.pol.Plan(&PolicyContext{Model: s.Model, G: s.Model.Graph, Mem: mem, TL: tl, Prof: profileOf(s),
			Budget: r.target, Given: r.budget, Round: r.n, Opts: s.Opts, FT: &s.ft})
		if err != nil {
			return nil, err
		}
		if plan == nil {
			plan = &Plan{Budget: r.target}
		}
		s.Detail = plan.Detail
		return plan, nil
	},
}

// Insert rewrites the round's plan into the graph and records its
// decisions in the report: swaps and recomputations first
// (InsertSwapRecompute), then each split (InsertSplit).
var Insert = &Pass{
	Name:     "insert",
	Doc:      "rewrite the plan: swap-out/swap-in pairs, recompute clones, split and merge ops",
	Requires: []*Pass{Decide},
	Mutates:  true,
	Run: func(s *State) (any, error) {
		plan, err := typed[*Plan](s, Decide)
		if err != nil {
			return nil, err
		}
		mem, err := typed[*memory.Model](s, Liveness)
		if err != nil {
			return nil, err
		}
		m, r := s.Model, s.Report
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
		// The rewritten graph is verified once, when planning ends
		// (PlanRounds), not after every round: a whole-graph Verify per
		// round was a quarter of a failing plan's time. State.Check
		// still verifies after every pass, rounds included.
		return nil, nil
	},
}

// PlanMemory plans the step into the budget with the options' policy:
// PlanRounds, or the policy's own PlanStep (StepPlanner).
var PlanMemory = &Pass{
	Name:     "plan",
	Doc:      "plan and insert swaps, recomputations and splits in rounds until the step fits the budget",
	Requires: []*Pass{Schedule},
	Mutates:  true,
	Run: func(s *State) (any, error) {
		pol := s.Opts.Policy
		if pol == nil {
			return nil, fmt.Errorf("no memory policy in the options (package policy has them)")
		}
		plan := func(s *State) error {
			if sp, ok := pol.(StepPlanner); ok {
				return sp.PlanStep(s)
			}
			return PlanRounds(s, pol)
		}
		off, ok := pol.(StateOffloader)
		if !ok || !off.OffloadsState() || !s.Opts.Offload || s.Opts.OffloadState || s.Opts.NoSwap {
			return nil, plan(s)
		}
		// The state stays on the device unless it has to leave: where
		// the policy's bound with it resident is over the budget, or
		// where planning with it resident fails.
		need, err := stateMustLeave(s, pol)
		if err != nil {
			return nil, err
		}
		// offloaded plans a copy of from with the state on the host, the
		// update where Options.Update says or, under UpdateAuto, on the
		// device and on the host, keeping the shorter simulated step.
		offloaded := func(from *ir.Model) (*State, error) {
			try := func(u UpdatePlace, name string) (*State, error) {
				o := *s.Opts
				o.OffloadState, o.Update = true, u
				f := s.Fork(from.Clone(), &o, name)
				return f, plan(f)
			}
			if u := s.Opts.Update; u != UpdateAuto {
				return try(u, "offload")
			}
			if us, ok := pol.(UpdateSearcher); ok && us.SearchesUpdate(s.Opts) {
				// One search over both placements (tsplit's order
				// variants), instead of a whole search per placement,
				// which doubled the planning of a 13 B-parameter step
				// (issue 14 must-show 3).
				return try(UpdateAuto, "offload")
			}
			d, derr := try(UpdateDevice, "offload")
			h, herr := try(UpdateHost, "offload-host-update")
			if herr == nil && (derr != nil || h.Report.Time < d.Report.Time) {
				return h, nil
			}
			// Both failed: the failure whose bound is lower, which no
			// placement of the update goes below.
			var di, hi *InfeasibleError
			if derr != nil && errors.As(herr, &hi) && (!errors.As(derr, &di) || hi.LowerBound < di.LowerBound) {
				return h, herr
			}
			return d, derr
		}
		if need {
			f, err := offloaded(s.Model)
			s.Adopt(f)
			return nil, err
		}
		if !hasOffloadable(s.Model.Graph) {
			return nil, plan(s)
		}
		snap := s.Model.Clone()
		err = plan(s)
		var ie *InfeasibleError
		if err == nil || !errors.As(err, &ie) {
			return nil, err
		}
		f, ferr := offloaded(snap)
		if ferr != nil {
			return nil, err // the resident plan's failure explains more
		}
		s.Adopt(f)
		return nil, nil
	},
}

// stateMustLeave reports whether pol cannot plan s's graph with the
// training state on the device: its lower bound (LowerBounder) is over
// the budget. A graph that fits unplanned never needs it.
func stateMustLeave(s *State, pol Policy) (bool, error) {
	lb, ok := pol.(LowerBounder)
	if !ok || !hasOffloadable(s.Model.Graph) {
		return false, nil
	}
	p := profileOf(s)
	budget := s.Opts.Budget
	if budget <= 0 {
		budget = p.Budget()
	}
	mem, err := typed[*memory.Model](s, Liveness)
	if err != nil {
		return false, err
	}
	if mem.Peak <= budget {
		return false, nil
	}
	tl, err := typed[*Timeline](s, Simulation)
	if err != nil {
		return false, err
	}
	return lb.LowerBound(&PolicyContext{Model: s.Model, G: s.Model.Graph, Mem: mem, TL: tl, Prof: p, Budget: budget, Given: budget, Opts: s.Opts, FT: &s.ft}) > budget, nil
}

// hasOffloadable reports whether g has a weight OffloadState would move
// (a trained parameter or optimizer state: one the step replaces).
func hasOffloadable(g *ir.Graph) bool {
	for _, v := range g.Inits {
		if v.Next != nil && !memory.HostResident(v) {
			return true
		}
	}
	for _, v := range g.Inputs {
		if v.Param && v.Next != nil && !memory.HostResident(v) {
			return true
		}
	}
	return false
}

// Offload is OffloadState as a pass of planning (under "plan/"), run
// before the first round when Options.OffloadState is set.
var Offload = &Pass{
	Name:    "offload",
	Doc:     "keep parameters and optimizer state on the host, swapped in before each use",
	Mutates: true,
	Run: func(s *State) (any, error) {
		host := s.Opts.Update == UpdateHost
		n, err := OffloadState(s.Model, host)
		if err != nil {
			return nil, err
		}
		if s.Report != nil {
			s.Report.Offloaded, s.Report.HostUpdate = n, host
		}
		return nil, nil
	},
}

// inRound runs a pass of round n (0 first) and returns its result.
func inRound[T any](s *State, n int, p *Pass) (T, error) {
	var out T
	err := s.within(fmt.Sprintf("round-%d", n+1), func() error {
		var err error
		out, err = typed[T](s, p)
		return err
	})
	return out, err
}

// PlanRounds plans s's graph with pol in rounds until the exact memory
// model of the rewritten graph fits the budget, and its static layout
// too: plan on the current graph, insert, re-analyze. It fills
// s.Report.
func PlanRounds(s *State, pol Policy) error {
	g := s.Model.Graph
	p := profileOf(s)
	budget := s.Opts.Budget
	if budget <= 0 {
		budget = p.Budget()
	}
	base, err := typed[*memory.Model](s, Liveness)
	if err != nil {
		return err
	}
	baseTL, err := typed[*Timeline](s, Simulation)
	if err != nil {
		return err
	}
	r := &Report{Policy: pol.Name(), Device: p.Name, Budget: budget, BasePeak: base.Peak, BaseTime: baseTL.StepTime,
		Order: string(s.order), Link: p.Emulation, Measured: len(p.OpTimes) > 0}
	if ab := s.asBuilt; ab != nil {
		// The unplanned step is the step as built, whatever order the
		// plan is made in (issue 12 item 5: the depth-first order's peak
		// is not what running the unplanned step measures).
		r.BasePeak, r.BaseTime, r.Base = ab.peak, ab.time, ab.timeline
	} else {
		r.Base = timeline(base, baseTL)
	}
	s.Report = r
	if s.Opts.OffloadState {
		// The unplanned step above is the one the user has; planning
		// starts from the step with its state on the host, whose bound
		// the error of a failed plan then gives.
		if err := s.run(Offload); err != nil {
			return err
		}
		if base, err = typed[*memory.Model](s, Liveness); err != nil {
			return err
		}
		if baseTL, err = typed[*Timeline](s, Simulation); err != nil {
			return err
		}
	}
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
			lowerBound = 0
			if lb, ok := pol.(LowerBounder); ok {
				// With the state's FT maps: the first round maps the
				// same graph and finds them there.
				lowerBound = lb.LowerBound(&PolicyContext{Model: s.Model, G: g, Mem: base, TL: baseTL, Prof: p, Budget: budget, Opts: s.Opts, FT: &s.ft})
			}
		}
		return lowerBound
	}
	if mem.Peak > budget && !s.NoBound {
		baseBound() // before the graph changes
	}
	defer func() { s.round = nil }()
	for round := 0; ; round++ {
		if err := s.Opts.interrupted(); err != nil {
			return err
		}
		if s.Opts.OnRound != nil {
			s.Opts.OnRound(round, mem.Peak, target)
		}
		s.round = &roundState{pol: pol, n: round, target: target, budget: budget}
		if mem.Peak <= target {
			l, err := inRound[*memory.Layout](s, round, FitLayout)
			if err != nil {
				return err
			}
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
				return fmt.Errorf("the static layout of every plan found needs a pool over the budget of %d bytes (fragmentation)", budget)
			}
			continue
		}
		if round >= maxRounds+fragRounds {
			return fmt.Errorf("after %d rounds the plan still peaks at %d bytes, over the target of %d (budget %d)", maxRounds, mem.Peak, target, budget)
		}
		plan, err := inRound[*Plan](s, round, Decide)
		if err != nil {
			var ie *InfeasibleError
			if errors.As(err, &ie) {
				// Planning aimed below the budget to leave room for the
				// layout's fragmentation: what stays live must fit with it.
				ie.Need += budget - target
				ie.Budget = budget
				ie.HostState = base.HostState
				if !s.NoBound {
					ie.LowerBound = baseBound()
				}
			}
			return err
		}
		if len(plan.Decisions) == 0 && len(plan.Splits) == 0 {
			return fmt.Errorf("round %d found nothing to evict at a peak of %d bytes (target %d)", round+1, mem.Peak, target)
		}
		if !s.NoBound {
			// The bound is the input graph's: compute it before the
			// first rewrite, which changes the values the base memory
			// model indexes (a plan that first fitted the budget and
			// then lowered its target for fragmentation reached here
			// without it, and computing it after the rewrite indexed
			// past the model; found by FuzzPlan).
			baseBound()
		}
		if err := s.within(fmt.Sprintf("round-%d", round+1), func() error { return s.run(Insert) }); err != nil {
			return err
		}
		if mem, err = inRound[*memory.Model](s, round, Liveness); err != nil {
			return err
		}
		if tl, err = inRound[*Timeline](s, round, Simulation); err != nil {
			return err
		}
		r.Rounds = round + 1
	}
	if r.Rounds > 0 {
		if err := ir.Verify(s.Model); err != nil {
			return fmt.Errorf("rewritten graph does not verify: %w", err)
		}
	}
	r.Peak, r.HostPeak, r.Time = mem.Peak, mem.HostPeak, tl.StepTime
	r.Planned = timeline(mem, tl)
	if !pol.OwnTriggers() {
		// Place the swap-ins' triggers now (ControlEdges' rule), so that
		// a search over plans compares the steps that will run.
		if err := placeTriggers(s, false); err != nil {
			return err
		}
	}
	if r.HostPeak > p.HostMemory {
		return &HostMemoryError{Profile: p.Name, Need: r.HostPeak, State: mem.HostState, Have: p.HostMemory}
	}
	return nil
}
