package memory

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
)

// Layout is a static placement: an offset in one pool for every device
// tensor and workspace, fixed before run time, so fragmentation is
// settled by the compiler and the runtime's peak is the plan's.
type Layout struct {
	Pool int64 `json:"pool"`
	// Values maps a value name to its offset.
	Values map[string]int64 `json:"values"`
	// Workspace maps an op position (as a decimal string) to the offset
	// of its scratch.
	Workspace map[string]int64 `json:"workspace,omitempty"`
}

// LayoutKey is the model metadata key holding a Layout as JSON.
const LayoutKey = "tsplit.layout"

// MakeLayout places the model's intervals. It takes the better of two
// placements: the runtime's best-fit replay, and greedy-by-size (largest
// tensors first, each at the lowest offset free during its lifetime),
// which packs the big long-lived tensors of training graphs tighter.
func (m *Model) MakeLayout() *Layout {
	offs, reach := m.Replay()
	if len(m.Intervals) <= 4000 { // greedy is quadratic
		if g, gr := m.greedyBySize(); gr < reach {
			offs, reach = g, gr
		}
	}
	l := &Layout{Pool: reach, Values: map[string]int64{}, Workspace: map[string]int64{}}
	for idx, iv := range m.Intervals {
		if iv.Value != nil {
			l.Values[iv.Value.Name] = offs[idx]
		} else {
			l.Workspace[strconv.Itoa(iv.Start)] = offs[idx]
		}
	}
	return l
}

func (m *Model) greedyBySize() ([]int64, int64) {
	iv := m.Intervals
	idx := make([]int, len(iv))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		if c := cmp.Compare(iv[b].Bytes, iv[a].Bytes); c != 0 {
			return c
		}
		return cmp.Compare(iv[a].Start, iv[b].Start)
	})
	offs := make([]int64, len(iv))
	// placed holds the blocks placed so far ordered by offset, with
	// their lifetimes inline so the scan below touches one array. Keeping
	// it ordered as blocks are inserted replaces sorting the blocks busy
	// during each tensor's lifetime (a sort per tensor).
	type block struct {
		off, end   int64
		start, die int // lifetime, inclusive positions
	}
	placed := make([]block, 0, len(iv))
	var reach int64
	for _, k := range idx {
		n, start, die := iv[k].Bytes, iv[k].Start, iv[k].End
		// First fit in offset order among the blocks live at the same
		// time: the lowest offset whose gap up to the next such block
		// holds n bytes. Blocks of equal offset may come in any order:
		// once one of them does not leave room below it, none does.
		off := int64(0)
		for _, b := range placed {
			if off+n <= b.off {
				break // every later block starts at or above b: the gap holds
			}
			if b.start <= die && start <= b.die {
				off = max(off, b.end)
			}
		}
		offs[k] = off
		reach = max(reach, off+n)
		at, _ := slices.BinarySearchFunc(placed, off, func(b block, off int64) int { return cmp.Compare(b.off, off) })
		placed = slices.Insert(placed, at, block{off, off + n, start, die})
	}
	return offs, reach
}

func overlaps(a, b *Interval) bool { return a.Start <= b.End && b.Start <= a.End }

// Placement maps a layout onto the model's intervals, checking that
// every interval has an offset inside the pool and that no two tensors
// live at the same time share bytes.
func (m *Model) Placement(l *Layout) ([]int64, error) {
	offs := make([]int64, len(m.Intervals))
	for idx, iv := range m.Intervals {
		var off int64
		var ok bool
		if iv.Value != nil {
			off, ok = l.Values[iv.Value.Name]
		} else {
			off, ok = l.Workspace[strconv.Itoa(iv.Start)]
		}
		if !ok {
			return nil, fmt.Errorf("memory: layout has no offset for %s", iv.Name())
		}
		// off+Bytes could wrap past 2^63 for a crafted offset; compare
		// without the sum.
		if off < 0 || iv.Bytes > l.Pool || off > l.Pool-iv.Bytes {
			return nil, fmt.Errorf("memory: layout puts %s at %d+%d, outside the %d-byte pool", iv.Name(), off, iv.Bytes, l.Pool)
		}
		offs[idx] = off
	}
	// Sweep by address: intervals sorted by offset; any pair overlapping
	// in bytes must not overlap in time.
	order := make([]int, len(offs))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return cmp.Or(cmp.Compare(offs[a], offs[b]), cmp.Compare(a, b)) })
	for a := 0; a < len(order); a++ {
		i := order[a]
		if m.Intervals[i].Bytes == 0 {
			continue // an empty tensor occupies nothing
		}
		for b := a + 1; b < len(order) && offs[order[b]] < offs[i]+m.Intervals[i].Bytes; b++ {
			j := order[b]
			if m.Intervals[j].Bytes > 0 && overlaps(&m.Intervals[i], &m.Intervals[j]) {
				return nil, fmt.Errorf("memory: layout overlaps %s and %s, which are live at the same time", m.Intervals[i].Name(), m.Intervals[j].Name())
			}
		}
	}
	return offs, nil
}

// Encode renders a layout as JSON (keys sorted: deterministic).
func (l *Layout) Encode() string {
	b, _ := json.Marshal(l)
	return string(b)
}

// DecodeLayout parses a layout.
func DecodeLayout(s string) (*Layout, error) {
	var l Layout
	if err := json.Unmarshal([]byte(s), &l); err != nil {
		return nil, fmt.Errorf("memory: layout metadata is not valid: %v", err)
	}
	if l.Pool < 0 {
		return nil, fmt.Errorf("memory: layout metadata is not valid: pool of %d bytes", l.Pool)
	}
	return &l, nil
}
