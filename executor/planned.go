package executor

import (
	"github.com/tsplit/tsplit/ir"
	"github.com/tsplit/tsplit/memory"
)

// PlannedOptions reads a planned model's static layout (its
// memory.LayoutKey metadata) into executor options and returns the pool
// size it needs. A model without a layout gets the best-fit allocator
// and the pool its memory model needs.
func PlannedOptions(m *ir.Model) (Options, int64, error) {
	mem, err := memory.Analyze(m.Graph, memory.Options{})
	if err != nil {
		return Options{}, 0, err
	}
	s, ok := m.Meta[memory.LayoutKey]
	if !ok {
		return Options{}, mem.Need(), nil
	}
	l, err := memory.DecodeLayout(s)
	if err != nil {
		return Options{}, 0, err
	}
	place, err := mem.Placement(l)
	if err != nil {
		return Options{}, 0, err
	}
	return Options{Placement: place}, l.Pool, nil
}
