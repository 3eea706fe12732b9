package passes

import (
	"fmt"
	"io"
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
	// DumpAfter names a pass after which the IR is dumped to DumpTo.
	DumpAfter string
	DumpTo    io.Writer
	// Timings records how long each pass took, in order.
	Timings []Timing
	// Report is filled by the planning passes.
	Report *Report
	// layout is the static placement the planner found to fit.
	layout *memory.Layout
	// splitFn tells the split planner how an op may be split.
	splitFn func(op *ir.Op) []DimMap

	results map[*Pass]any
	done    map[*Pass]bool // transformations that have run
}

// Timing is one pass's duration.
type Timing struct {
	Pass     string
	Duration time.Duration
}

// NewState starts a pipeline over m.
func NewState(m *ir.Model, opts *Options) *State {
	if opts == nil {
		opts = &Options{}
	}
	return &State{Model: m, Opts: opts, results: map[*Pass]any{}, done: map[*Pass]bool{}}
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

func (s *State) run(p *Pass) error {
	for _, r := range p.Requires {
		_, cached := s.results[r]
		if !cached && !s.done[r] {
			if err := s.run(r); err != nil {
				return err
			}
		}
	}
	if err := s.Opts.interrupted(); err != nil {
		return fmt.Errorf("%s: %w", p.Name, err)
	}
	start := time.Now()
	res, err := p.Run(s)
	s.Timings = append(s.Timings, Timing{p.Name, time.Since(start)})
	if err != nil {
		return fmt.Errorf("%s: %w", p.Name, err)
	}
	if p.Mutates {
		s.results = map[*Pass]any{}
		s.done[p] = true
	} else {
		s.results[p] = res
	}
	if s.Check {
		if err := ir.Verify(s.Model); err != nil {
			return fmt.Errorf("after pass %s: %w", p.Name, err)
		}
	}
	if s.DumpAfter == p.Name && s.DumpTo != nil {
		fmt.Fprintf(s.DumpTo, "# after %s\n", p.Name)
		if err := ir.Dump(s.DumpTo, s.Model.Graph); err != nil {
			return err
		}
	}
	return nil
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
