package passes

import (
	"fmt"
	"io"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/tsplit/tsplit/ir"
	"github.com/tsplit/tsplit/memory"
)

// Pass is one analysis or transformation.
type Pass struct {
	Name string
	Doc  string
	// Requires lists analyses whose results Run reads through State.
	Requires []*Pass
	// Mutates marks a transformation: after it runs, cached analysis
	// results are dropped.
	Mutates bool
	// Run does the work; an analysis returns its result.
	Run func(s *State) (any, error)
}

// State is what passes share: the model, options, cached results and
// debugging hooks.
type State struct {
	Model *ir.Model
	Opts  *Options
	// Check runs ir.Verify after every pass.
	Check bool
	// DumpAfter names the passes after which the IR is dumped to DumpTo:
	// a pass's full name ("plan/round-2/insert"), a path.Match pattern
	// of full names ("plan/round-*/insert"), or, without a slash, the
	// last element of a name ("insert": after every round's insertion).
	DumpAfter string
	DumpTo    io.Writer
	// Timings records how long each pass took, a pass before the passes
	// it ran (planning's rounds run inside "plan"). A forked State
	// records into its parent's.
	Timings []Timing
	// OnPass, when set, is called after every pass with its timing.
	OnPass func(Timing)
	// Report is filled by the planning passes.
	Report *Report
	// Detail is what the policy's last round said beyond its plan
	// (Plan.Detail), for the caller.
	Detail any
	// layout is the static placement the planner found to fit.
	layout *memory.Layout
	// scope prefixes the names of the passes running now ("plan/").
	scope string
	// parent is the State a fork reports its timings to.
	parent *State
	// mu guards what forks share with their root — its timings, the
	// OnPass and dump writers — so that forks may plan concurrently.
	mu *sync.Mutex
	// NoBound skips the lower bound PlanRounds computes for its error
	// message (a fork whose failure nobody reports).
	NoBound bool
	// round is the planning round in progress (planpass.go).
	round *roundState
	// asBuilt is the step as built, recorded by Schedule; order is the
	// order it scheduled (schedule.go).
	asBuilt *asBuilt
	order   OpOrder
	// ft keeps FT maps across this state's planning rounds (FTCache).
	ft FTCache

	results map[*Pass]any
	done    map[*Pass]bool // transformations that have run
}

// Timing is one pass's duration. Pass is the full name: passes that
// run inside another carry its name as a prefix ("plan/round-1/decide").
type Timing struct {
	Pass     string
	Duration time.Duration
}

// NewState starts a pipeline over m.
func NewState(m *ir.Model, opts *Options) *State {
	if opts == nil {
		opts = &Options{}
	}
	return &State{Model: m, Opts: opts, results: map[*Pass]any{}, done: map[*Pass]bool{}, mu: &sync.Mutex{}}
}

// Fork starts a State over another model (a copy taken before planning)
// with other options, inside the running pass: its passes are named
// under name ("plan/tsplit-nosplit/round-1/decide"), it checks and dumps
// as s does, and its timings go to s. Adopt takes its result.
func (s *State) Fork(m *ir.Model, opts *Options, name string) *State {
	f := NewState(m, opts)
	f.Check, f.DumpAfter, f.DumpTo, f.OnPass = s.Check, s.DumpAfter, s.DumpTo, s.OnPass
	f.scope = s.scope + name + "/"
	f.parent, f.mu, f.NoBound = s, s.mu, s.NoBound
	s.mu.Lock()
	if s.ft.shared == nil {
		s.ft.shared = newFTShared(m)
	}
	f.ft.shared = s.ft.shared
	s.mu.Unlock()
	f.asBuilt, f.order = s.asBuilt, s.order
	return f
}

// Adopt makes a fork's planned model, report and layout s's own.
func (s *State) Adopt(f *State) {
	*s.Model = *f.Model
	s.Report, s.layout, s.Detail = f.Report, f.layout, f.Detail
}

// Locked runs fn holding the lock forks of s share (to call a callback
// or read a shared model from concurrent forks).
func (s *State) Locked(fn func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fn()
}

// Result returns the result of an analysis, running it (and what it
// requires) if it is not cached.
func (s *State) Result(p *Pass) (any, error) {
	if r, ok := s.results[p]; ok {
		return r, nil
	}
	if err := s.run(p); err != nil {
		return nil, err
	}
	return s.results[p], nil
}

// Run runs passes in order.
func (s *State) Run(pipeline ...*Pass) error {
	for _, p := range pipeline {
		if err := s.run(p); err != nil {
			return err
		}
	}
	return nil
}

// within runs fn with the passes it runs named under sub (a round).
func (s *State) within(sub string, fn func() error) error {
	was := s.scope
	s.scope += sub + "/"
	defer func() { s.scope = was }()
	return fn()
}

// record adds a timing slot at the root State and returns where it is.
func (s *State) record(name string) (*State, int) {
	root := s
	for root.parent != nil {
		root = root.parent
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	root.Timings = append(root.Timings, Timing{Pass: name})
	return root, len(root.Timings) - 1
}

func (s *State) run(p *Pass) error {
	for _, r := range p.Requires {
		_, cached := s.results[r]
		if !cached && !s.done[r] {
			if err := s.run(r); err != nil {
				return err
			}
		}
	}
	// A top-level pass names itself in its errors; one running inside
	// it (a planning round's step) leaves that to it, so a planning
	// error reads the same however planning is divided into passes.
	name, top := s.scope+p.Name, s.scope == ""
	fail := func(err error) error {
		if top {
			return fmt.Errorf("%s: %w", p.Name, err)
		}
		return err
	}
	if err := s.Opts.interrupted(); err != nil {
		return fail(err)
	}
	root, slot := s.record(name)
	was := s.scope
	s.scope = name + "/"
	start := time.Now()
	res, err := p.Run(s)
	t := Timing{name, time.Since(start)}
	s.scope = was
	s.mu.Lock()
	root.Timings[slot] = t
	if s.OnPass != nil {
		s.OnPass(t)
	}
	s.mu.Unlock()
	if err != nil {
		return fail(err)
	}
	if p.Mutates {
		s.results = map[*Pass]any{}
		s.done[p] = true
	} else {
		s.results[p] = res
	}
	if s.Check {
		if err := ir.Verify(s.Model); err != nil {
			return fmt.Errorf("after pass %s: %w", name, err)
		}
	}
	if s.DumpTo != nil && dumpMatches(s.DumpAfter, name) {
		s.mu.Lock()
		defer s.mu.Unlock()
		fmt.Fprintf(s.DumpTo, "# after %s\n", name)
		if err := ir.Dump(s.DumpTo, s.Model.Graph); err != nil {
			return err
		}
	}
	return nil
}

// dumpMatches reports whether -d dump-after=pattern names the pass.
func dumpMatches(pattern, name string) bool {
	if pattern == "" {
		return false
	}
	if pattern == name {
		return true
	}
	if !strings.Contains(pattern, "/") {
		return pattern == path.Base(name)
	}
	ok, _ := path.Match(pattern, name)
	return ok
}

// WriteTimings prints the timing table: one line per pass, indented by
// how deep it ran, with its share of the top-level passes' total.
func WriteTimings(w io.Writer, ts []Timing) error {
	var total time.Duration
	width := len("total")
	for _, t := range ts {
		depth := strings.Count(t.Pass, "/")
		if depth == 0 {
			total += t.Duration
		}
		width = max(width, 2*depth+len(path.Base(t.Pass)))
	}
	for _, t := range ts {
		depth := strings.Count(t.Pass, "/")
		label := strings.Repeat("  ", depth) + path.Base(t.Pass)
		share := 0.0
		if total > 0 {
			share = 100 * float64(t.Duration) / float64(total)
		}
		if _, err := fmt.Fprintf(w, "%-*s %12v %5.1f%%  %s\n", width, label, t.Duration.Round(time.Microsecond), share, t.Pass); err != nil {
			return err
		}
	}
	_, err := fmt.Fprintf(w, "%-*s %12v\n", width, "total", total.Round(time.Microsecond))
	return err
}

// typed fetches an analysis result with its type.
func typed[T any](s *State, p *Pass) (T, error) {
	var zero T
	r, err := s.Result(p)
	if err != nil {
		return zero, err
	}
	t, ok := r.(T)
	if !ok {
		return zero, fmt.Errorf("pass %s returned %T", p.Name, r)
	}
	return t, nil
}
