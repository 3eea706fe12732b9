package memory

import (
	"fmt"

	"github.com/tsplit/tsplit/ir"
	"github.com/tsplit/tsplit/kernels"
)

// Alignment of every device allocation (cudaMalloc's granularity).
const Alignment = 256

// Align rounds n up to a multiple of Alignment.
func Align(n int64) int64 { return (n + Alignment - 1) / Alignment * Alignment }

// Kind classifies device memory for reports.
type Kind uint8

// Kinds of memory.
const (
	Weight     Kind = iota // initializers
	Input                  // graph inputs
	Activation             // op outputs
	Workspace              // kernel scratch
)

func (k Kind) String() string {
	return [...]string{"weight", "input", "activation", "workspace"}[k]
}

// Interval is one device allocation: a value, or an op's workspace.
type Interval struct {
	Value *ir.Value // nil for a workspace
	Op    *ir.Op    // for a workspace: its op
	Kind  Kind
	Bytes int64 // aligned
	// Start and End are op positions (inclusive). Start -1: resident
	// before the first op. End == len(order): kept after the last op.
	Start, End int
}

// Evictable reports whether a policy may evict the interval's value
// (swap it out, recompute it, split it): an activation or a graph input
// that is not pinned as a compile-time constant (ir.Value.Pinned).
// Weights and workspaces stay. Every policy's candidate selection asks
// this one question.
func (iv *Interval) Evictable() bool {
	return iv.Value != nil && (iv.Kind == Activation || iv.Kind == Input) && !iv.Value.Pinned()
}

// Name describes the interval in messages.
func (iv *Interval) Name() string {
	if iv.Value != nil {
		return fmt.Sprintf("%q", iv.Value.Name)
	}
	return fmt.Sprintf("workspace of %s", iv.Op.Describe())
}

// Model is the memory model of one schedule.
type Model struct {
	Order     []*ir.Op
	Intervals []Interval
	// ByValue maps a ValueID to its interval index (-1: not on device).
	ByValue []int
	// WorkspaceAt maps an op position to its workspace interval (-1: none).
	WorkspaceAt []int
	// Live is M_i: the bytes live on the device while op i runs.
	Live   []int64
	Peak   int64
	PeakAt int // position of the first op at the peak (-1: no ops)
	// Resident is the bytes live before the first op (weights, inputs).
	Resident int64
	// HostPeak is the most host memory swapped-out tensors and
	// host-resident weights occupy at once.
	HostPeak int64
	// HostState is the bytes of the host-resident weights (HostResident):
	// parameters and optimizer state the plan keeps on the host.
	HostState int64
	// Events is the exact sequence of allocations and frees the runtime
	// performs, in order; Need and the executor both replay it.
	Events []Event
}

// Event is one allocation or free in the runtime's sequence. Pos is the
// op position it happens at (-1: setup before the first op); allocations
// at Pos happen before the op runs, frees after it.
type Event struct {
	Pos      int
	Free     bool
	Interval int
}

// OnHost reports whether a value lives in host memory: the output of a
// swap-out or of a host-placed op.
func OnHost(v *ir.Value) bool {
	if v.Def == nil {
		return false
	}
	k := ir.CopyOf(v.Def)
	return k == ir.ToHost || k == ir.OnHost
}

// Resident reports whether a value is a weight: an initializer, or a
// graph input marked Param (parameters, optimizer state, running
// statistics). A weight stays on the device all step unless the plan
// offloaded it (HostResident).
func Resident(v *ir.Value) bool {
	return v.Kind == ir.KindInit || (v.Def == nil && v.Param)
}

// HostResident reports whether a weight lives in host memory for the
// whole step: one that only swap-ins and host-placed ops read, at least
// one swap-in or, for state the step replaces (Value.Next), none: its
// update runs on the host. A plan that offloads state
// (passes.OffloadState) brings such a weight to the device before each
// of its device uses, so the device holds a restored copy while that
// use needs it, never the weight itself. (A constant that only host ops
// read — a split's Slice bounds — is not state: it keeps its device
// interval, as before.) Since the rule is read off the graph, the
// planner, the simulator, the static layout and every runtime agree on
// it without a flag of their own.
func HostResident(v *ir.Value) bool {
	if !Resident(v) {
		return false
	}
	uses := v.Uses()
	swapped := false
	for _, u := range uses {
		switch ir.CopyOf(u.Op) {
		case ir.ToDevice:
			swapped = true
		case ir.OnHost:
		default:
			return false
		}
	}
	return len(uses) > 0 && (swapped || v.Next != nil)
}

// Options tune the model.
type Options struct {
	// Workspace gives the scratch bytes of an op; nil uses the reference
	// kernels' declaration (kernels.WorkspaceBytes).
	Workspace func(*ir.Op) int64
}

// Analyze builds the memory model of g in its current order.
func Analyze(g *ir.Graph, opts Options) (*Model, error) {
	ws := opts.Workspace
	if ws == nil {
		ws = kernels.WorkspaceBytes
	}
	order := g.Order()
	n := len(order)
	pos := g.Position()
	// Every value has at most one interval and every op at most one
	// workspace: with room for both, the intervals are never copied as
	// they grow (the planner analyzes every round of every variant).
	m := &Model{Order: order, ByValue: make([]int, g.NumValueIDs()), WorkspaceAt: make([]int, n), PeakAt: -1,
		Intervals: make([]Interval, 0, g.NumValueIDs()+n)}
	for i := range m.WorkspaceAt {
		m.WorkspaceAt[i] = -1
	}
	for i := range m.ByValue {
		m.ByValue[i] = -1
	}
	isOutput := make([]bool, g.NumValueIDs())
	for _, v := range g.Outputs {
		isOutput[v.ID] = true
	}
	onHost := OnHost

	// lastUse: the last position that reads v on the device; a ToHost
	// reader extends it by its release window (ir.SwapOutRelease) so
	// the copy overlaps compute.
	lastUse := func(v *ir.Value) int {
		end := -1
		for _, u := range v.Uses() {
			p := pos[u.Op.ID]
			if ir.CopyOf(u.Op) == ir.ToHost {
				p = min(p+ir.SwapOutRelease(u.Op), n)
			}
			end = max(end, p)
		}
		return end
	}
	// weightEnd: a weight stays to the end of the step, unless the step
	// computes its replacement (Value.Next): then the old value is dead
	// after its last read, as when an optimizer updates in place.
	weightEnd := func(v *ir.Value) int {
		if v.Next == nil || isOutput[v.ID] {
			return n
		}
		return max(lastUse(v), 0)
	}
	add := func(iv Interval) {
		if iv.Value != nil {
			m.ByValue[iv.Value.ID] = len(m.Intervals)
		}
		m.Intervals = append(m.Intervals, iv)
	}
	sized := func(v *ir.Value) (int64, error) {
		b, err := v.Shape.Bytes(v.DType)
		if err != nil {
			return 0, fmt.Errorf("memory: value %q: %v", v.Name, err)
		}
		return Align(b), nil
	}

	// hostLive is a difference array of the host bytes held at each
	// position. An in-place merge's pieces are parts of its buffer,
	// which lives from the first piece's swap-out to the last read of
	// the merge or of any piece. A host-resident weight is held all step.
	hostLive := make([]int64, n+2)
	onHostAllStep := func(v *ir.Value) (bool, error) {
		if isOutput[v.ID] || !HostResident(v) {
			return false, nil
		}
		b, err := sized(v)
		if err != nil {
			return false, err
		}
		hostLive[0] += b
		hostLive[n+1] -= b
		m.HostState += b
		return true, nil
	}

	// Setup: graph inputs then weights, in declaration order.
	for _, v := range g.Inputs {
		if v.Kind == ir.KindInit {
			continue
		}
		b, err := sized(v)
		if err != nil {
			return nil, err
		}
		if v.Param {
			// A parameter fed as an input is a weight: resident all step,
			// on the device or on the host.
			if host, err := onHostAllStep(v); err != nil || host {
				if err != nil {
					return nil, err
				}
				continue
			}
			add(Interval{Value: v, Kind: Weight, Bytes: b, Start: -1, End: weightEnd(v)})
			continue
		}
		end := lastUse(v)
		if isOutput[v.ID] || end < 0 {
			end = max(end, 0)
			if isOutput[v.ID] {
				end = n
			}
		}
		add(Interval{Value: v, Kind: Input, Bytes: b, Start: -1, End: end})
	}
	for _, v := range g.Inits {
		if host, err := onHostAllStep(v); err != nil || host {
			if err != nil {
				return nil, err
			}
			continue
		}
		b, err := sized(v)
		if err != nil {
			return nil, err
		}
		add(Interval{Value: v, Kind: Weight, Bytes: b, Start: -1, End: weightEnd(v)})
	}
	mergeOf := map[ir.ValueID]bool{}
	for _, op := range order {
		if ir.InPlaceConcat(op) {
			for _, v := range op.Inputs() {
				mergeOf[v.ID] = true
			}
		}
	}
	// A host op that writes over its input (ir.InPlaceHost) holds no
	// buffer of its own: the input's buffer lives on to the last read
	// of the output, down the chain (chainEnd, filled from the back).
	overwrites := map[ir.ValueID]bool{}
	chainEnd := map[ir.ValueID]int{}
	for i := n - 1; i >= 0; i-- {
		op := order[i]
		j := ir.InPlaceHost(op)
		if j < 0 {
			continue
		}
		y := op.Output(0)
		overwrites[y.ID] = true
		end := max(lastUse(y), i)
		if isOutput[y.ID] {
			end = n
		}
		if e, ok := chainEnd[y.ID]; ok {
			end = max(end, e)
		}
		chainEnd[op.Input(j).ID] = end
	}
	for i, op := range order {
		for _, v := range op.Outputs() {
			if v == nil {
				continue
			}
			b, err := sized(v)
			if err != nil {
				return nil, err
			}
			end := max(lastUse(v), i)
			if isOutput[v.ID] {
				end = n
			}
			if onHost(v) {
				if _, view := ir.ViewOf(op); view || mergeOf[v.ID] || overwrites[v.ID] {
					continue // a view of its input, part of a merge, or written over its input
				}
				if e, ok := chainEnd[v.ID]; ok {
					end = max(end, e)
				}
				start := i
				if ir.InPlaceConcat(op) {
					for _, w := range op.Inputs() {
						start = min(start, pos[w.Def.ID])
						end = max(end, lastUse(w))
					}
				}
				hostLive[start] += b
				hostLive[min(end, n)+1] -= b
				continue
			}
			add(Interval{Value: v, Kind: Activation, Bytes: b, Start: i, End: end})
		}
		if w := ws(op); w > 0 && ir.CopyOf(op) == ir.NoCopy {
			m.WorkspaceAt[i] = len(m.Intervals)
			add(Interval{Op: op, Kind: Workspace, Bytes: Align(w), Start: i, End: i})
		}
	}
	var h int64
	for _, d := range hostLive {
		h += d
		m.HostPeak = max(m.HostPeak, h)
	}

	// M_i by a difference array over positions.
	m.Live = make([]int64, n)
	diff := make([]int64, n+1)
	for _, iv := range m.Intervals {
		if iv.Start < 0 {
			m.Resident += iv.Bytes
		}
		s, e := max(iv.Start, 0), min(iv.End, n-1)
		if n == 0 || s > e {
			continue
		}
		diff[s] += iv.Bytes
		diff[e+1] -= iv.Bytes
	}
	var run int64
	for i := 0; i < n; i++ {
		run += diff[i]
		m.Live[i] = run
		if run > m.Peak {
			m.Peak, m.PeakAt = run, i
		}
	}
	if n == 0 {
		m.Peak = m.Resident
	}
	m.Events = events(m, n)
	return m, nil
}

// events lays out the allocation sequence: setup allocations, then per
// op its allocations (outputs, then workspace) and, after it, the frees
// of everything whose life ends there (in interval order).
func events(m *Model, n int) []Event {
	// A counting sort by position, stable in interval order: the
	// intervals starting (ending) at i are startIdx[startOff[i]:startOff[i+1]]
	// (endIdx likewise); one slice each instead of one per position.
	startOff := make([]int, n+1)
	endOff := make([]int, n+1)
	frees := 0
	for _, iv := range m.Intervals {
		if iv.Start >= 0 {
			startOff[iv.Start+1]++
		}
		if iv.End < n && iv.End >= 0 {
			endOff[iv.End+1]++
			frees++
		}
	}
	for i := 0; i < n; i++ {
		startOff[i+1] += startOff[i]
		endOff[i+1] += endOff[i]
	}
	startIdx := make([]int, startOff[n])
	endIdx := make([]int, endOff[n])
	nextStart := append([]int(nil), startOff[:n]...)
	nextEnd := append([]int(nil), endOff[:n]...)
	ev := make([]Event, 0, len(m.Intervals)+frees)
	for idx, iv := range m.Intervals {
		if iv.Start < 0 {
			ev = append(ev, Event{Pos: -1, Interval: idx})
		} else {
			startIdx[nextStart[iv.Start]] = idx
			nextStart[iv.Start]++
		}
		if iv.End < n && iv.End >= 0 {
			endIdx[nextEnd[iv.End]] = idx
			nextEnd[iv.End]++
		}
	}
	for i := 0; i < n; i++ {
		for _, idx := range startIdx[startOff[i]:startOff[i+1]] {
			ev = append(ev, Event{Pos: i, Interval: idx})
		}
		for _, idx := range endIdx[endOff[i]:endOff[i+1]] {
			ev = append(ev, Event{Pos: i, Free: true, Interval: idx})
		}
	}
	return ev
}
