package native

import (
	"fmt"
	"maps"
	"slices"

	"github.com/tsplit/tsplit/backend/native/planpb"
	"github.com/tsplit/tsplit/executor"
	"github.com/tsplit/tsplit/ir"
	"github.com/tsplit/tsplit/kernels"
	"github.com/tsplit/tsplit/memory"
)

// Lower turns m into a native plan. A planned step keeps its static
// layout (memory.LayoutKey) and therefore its pool; a model without one
// is laid out here as the planner would (memory.Model.MakeLayout).
// m is not changed.
//
// The commands follow the schedule: each op's command goes to its
// stream in op order, after waits for what it needs from other streams
// — the commands that wrote its inputs, and the last uses of every
// block of the pool its outputs and workspace take over — unless an
// earlier wait of the stream already covers them. An event is recorded
// right after the command waited for, so no stream waits longer than
// the data and the layout require.
func Lower(m *ir.Model) (*planpb.Plan, error) {
	g := m.Graph
	mem, err := memory.Analyze(g, memory.Options{})
	if err != nil {
		return nil, fmt.Errorf("native: %w", err)
	}
	layout := mem.MakeLayout()
	if s, ok := m.Meta[memory.LayoutKey]; ok {
		if layout, err = memory.DecodeLayout(s); err != nil {
			return nil, fmt.Errorf("native: %w", err)
		}
	}
	place, err := mem.Placement(layout)
	if err != nil {
		return nil, fmt.Errorf("native: %w", err)
	}
	order := mem.Order
	for _, op := range order {
		if _, runs := streamOf(op); runs && (ir.CopyOf(op) == ir.NoCopy || ir.CopyOf(op) == ir.OnHost) {
			if err := kernels.Supported(op); err != nil {
				return nil, fmt.Errorf("native: %w", err)
			}
		}
	}

	p := &planpb.Plan{Producer: Producer, Source: m.Path, Pool: layout.Pool, Peak: mem.Peak, HostPeak: mem.HostPeak}
	for _, d := range slices.Sorted(maps.Keys(m.Opsets)) {
		p.Opsets = append(p.Opsets, &planpb.Opset{Domain: d, Version: m.Opsets[d]})
	}
	for _, d := range slices.Sorted(maps.Keys(m.Dims)) {
		p.Dims = append(p.Dims, &planpb.Dim{Name: d, Value: m.Dims[d]})
	}
	for _, k := range slices.Sorted(maps.Keys(m.Meta)) {
		if k != memory.LayoutKey { // the allocations carry the layout
			p.Meta = append(p.Meta, &planpb.Meta{Key: k, Value: m.Meta[k]})
		}
	}
	for idx, iv := range mem.Intervals {
		p.Allocations = append(p.Allocations, &planpb.Allocation{
			Offset: place[idx], Bytes: iv.Bytes, Start: int32(iv.Start), End: int32(iv.End), Kind: planpb.Allocation_Kind(iv.Kind)})
	}

	// Values: graph inputs, initializers, then op results in order.
	ref := make([]int32, g.NumValueIDs()) // 1-based index in p.Values
	var vals []*ir.Value
	add := func(v *ir.Value) error {
		if v == nil || ref[v.ID] != 0 {
			return nil
		}
		pv := &planpb.Value{Name: v.Name, Dtype: int32(v.DType), Shape: v.Shape, Param: v.Param}
		switch v.Kind {
		case ir.KindInput:
			pv.Kind = planpb.Value_INPUT
		case ir.KindInit:
			pv.Kind = planpb.Value_INIT
			t, err := v.Data()
			if err != nil || t == nil {
				return fmt.Errorf("native: weight %q has no data (%v)", v.Name, err)
			}
			pv.Data = t.Raw
		default:
			pv.Kind = planpb.Value_RESULT
		}
		if idx := mem.ByValue[v.ID]; idx >= 0 {
			pv.Allocation = int32(idx + 1)
		}
		p.Values = append(p.Values, pv)
		vals = append(vals, v)
		ref[v.ID] = int32(len(p.Values))
		return nil
	}
	for _, v := range g.Inputs {
		if err := add(v); err != nil {
			return nil, err
		}
	}
	for _, v := range g.Inits {
		if err := add(v); err != nil {
			return nil, err
		}
	}
	for _, op := range order {
		for _, v := range op.Outputs() {
			if err := add(v); err != nil {
				return nil, err
			}
		}
	}
	for _, v := range g.Inputs {
		p.Inputs = append(p.Inputs, ref[v.ID])
	}
	for _, v := range g.Outputs {
		if ref[v.ID] == 0 {
			return nil, fmt.Errorf("native: graph output %q is not a value of the graph", v.Name)
		}
		p.Outputs = append(p.Outputs, ref[v.ID])
	}
	if err := placeHost(p, order, ref); err != nil {
		return nil, err
	}

	for i, op := range order {
		po := &planpb.Op{Type: op.Type, Domain: op.Domain, Name: op.Name, Host: op.Host, Phase: int32(op.Phase), Origin: op.Origin}
		for _, v := range op.Inputs() {
			po.Inputs = append(po.Inputs, valueRef(ref, v))
		}
		for _, v := range op.Outputs() {
			po.Outputs = append(po.Outputs, valueRef(ref, v))
		}
		if w := mem.WorkspaceAt[i]; w >= 0 {
			po.Workspace = int32(w + 1)
		}
		for _, a := range op.Attrs {
			pa, err := attribute(a)
			if err != nil {
				return nil, fmt.Errorf("native: %s: %w", op.Describe(), err)
			}
			po.Attributes = append(po.Attributes, pa)
		}
		p.Ops = append(p.Ops, po)
	}
	schedule(p, mem, g)
	return p, nil
}

// Producer is what a plan's producer field says: a fixed name, so that
// the same model gives the same bytes whatever build lowered it.
const Producer = "tsplit"

func valueRef(ref []int32, v *ir.Value) int32 {
	if v == nil {
		return 0
	}
	return ref[v.ID]
}

// placeHost gives every host-resident value its place in a host buffer:
// its own buffer, a part of its input's (a view), its input's bytes (an
// op that writes over its input, ir.InPlaceHost), or a part of the
// merged buffer of an in-place merge it is a piece of. A constant that a
// host op reads gets a buffer too, filled before the streams start.
func placeHost(p *planpb.Plan, order []*ir.Op, ref []int32) error {
	at := func(v *ir.Value) *planpb.Value { return p.Values[ref[v.ID]-1] }
	newBuf := func(v *ir.Value) {
		p.HostBuffers = append(p.HostBuffers, &planpb.HostBuffer{Bytes: v.Bytes()})
		pv := at(v)
		pv.HostBuffer, pv.HostOffset = int32(len(p.HostBuffers)), 0
	}
	for _, op := range order {
		if !ir.InPlaceConcat(op) {
			continue
		}
		y := op.Output(0)
		newBuf(y)
		var off int64
		for _, v := range op.Inputs() {
			pv := at(v)
			pv.HostBuffer, pv.HostOffset = at(y).HostBuffer, off
			off += v.Bytes()
		}
	}
	for _, op := range order {
		switch ir.CopyOf(op) {
		case ir.ToDevice:
			// A weight kept on the host all step (memory.HostResident)
			// gets its own host buffer, filled at setup.
			if v := op.Input(0); memory.HostResident(v) && at(v).HostBuffer == 0 {
				newBuf(v)
			}
		case ir.ToHost:
			if out := op.Output(0); at(out).HostBuffer == 0 {
				newBuf(out)
			}
		case ir.OnHost:
			if ir.InPlaceConcat(op) {
				continue
			}
			for _, v := range op.Inputs() {
				if v != nil && (v.Kind == ir.KindInit || memory.HostResident(v)) && at(v).HostBuffer == 0 {
					newBuf(v)
				}
			}
			if off, view := ir.ViewOf(op); view {
				src, out := at(op.Input(0)), at(op.Output(0))
				if src.HostBuffer == 0 {
					return fmt.Errorf("native: %s: its input is not in host memory", op.Describe())
				}
				out.HostBuffer, out.HostOffset = src.HostBuffer, src.HostOffset+off
				continue
			}
			if j := ir.InPlaceHost(op); j >= 0 {
				// Written over its input: the input's bytes.
				src, out := at(op.Input(j)), at(op.Output(0))
				if src.HostBuffer == 0 {
					return fmt.Errorf("native: %s: its input is not in host memory", op.Describe())
				}
				out.HostBuffer, out.HostOffset = src.HostBuffer, src.HostOffset
				continue
			}
			for _, v := range op.Outputs() {
				if v != nil {
					newBuf(v)
				}
			}
		}
	}
	return nil
}

// schedule fills p.Streams and p.Events from the ops in order (see
// Lower).
func schedule(p *planpb.Plan, mem *memory.Model, g *ir.Graph) {
	type work struct {
		pos    int32
		waits  []int32
		record int32 // event recorded after it; -1: none
		clock  clock
	}
	var streams [executor.NumStreams][]work
	var now [executor.NumStreams]clock // what each stream has waited for
	// writers[v]: the commands whose completion makes v's data
	// available (several for an in-place merge, none for setup data).
	writers := make([][]cmdRef, g.NumValueIDs())
	// last[a][t]: the last command of stream t that used allocation a.
	last := make([][executor.NumStreams]int32, len(mem.Intervals))
	var own owners
	take := func(a int) []int {
		iv := &mem.Intervals[a]
		off := p.Allocations[a].Offset
		return own.take(off, off+iv.Bytes, a)
	}
	// Setup data is in place before the streams start; its bytes'
	// later users wait for its uses.
	for _, ev := range mem.Events {
		if ev.Pos < 0 && !ev.Free {
			take(ev.Interval)
		}
	}
	var events int32
	for i, op := range mem.Order {
		s, runs := streamOf(op)
		if !runs {
			inheritWriters(op, writers)
			continue
		}
		var need clock // per stream, the latest command this one needs
		needs := func(r cmdRef) {
			if r.s != s {
				need[r.s] = max(need[r.s], r.n)
			}
		}
		for _, v := range op.Inputs() {
			if v != nil {
				for _, w := range writers[v.ID] {
					needs(w)
				}
			}
		}
		// The blocks this op takes over: its outputs' and its workspace.
		var fresh []int
		for _, v := range op.Outputs() {
			if v != nil {
				if a := mem.ByValue[v.ID]; a >= 0 && mem.Intervals[a].Start == i {
					fresh = append(fresh, a)
				}
			}
		}
		if w := mem.WorkspaceAt[i]; w >= 0 {
			fresh = append(fresh, w)
		}
		for _, a := range fresh {
			for _, prev := range take(a) {
				for t, n := range last[prev] {
					needs(cmdRef{t, n})
				}
			}
		}
		w := work{pos: int32(i), record: -1}
		for t := range need {
			if need[t] <= now[s][t] {
				continue // an earlier wait of this stream covers it
			}
			src := &streams[t][need[t]-1]
			if src.record < 0 {
				src.record = events
				events++
			}
			w.waits = append(w.waits, src.record)
			now[s].join(src.clock)
		}
		now[s][s]++
		w.clock = now[s]
		streams[s] = append(streams[s], w)
		me := cmdRef{s, now[s][s]}
		for _, v := range op.Outputs() {
			if v != nil {
				writers[v.ID] = []cmdRef{me}
			}
		}
		touch := func(v *ir.Value) {
			if v != nil {
				if a := mem.ByValue[v.ID]; a >= 0 && !hostTensor(v) {
					last[a][s] = me.n
				}
			}
		}
		for _, v := range op.Inputs() {
			if ir.CopyOf(op) != ir.OnHost {
				touch(v)
			}
		}
		for _, v := range op.Outputs() {
			touch(v)
		}
		if w := mem.WorkspaceAt[i]; w >= 0 {
			last[w][s] = me.n
		}
	}
	p.Events = events
	for s, ws := range streams {
		st := &planpb.Stream{Name: executor.StreamNames[s]}
		for _, w := range ws {
			for _, e := range w.waits {
				st.Commands = append(st.Commands, &planpb.Command{Kind: &planpb.Command_Wait{Wait: e}})
			}
			st.Commands = append(st.Commands, &planpb.Command{Kind: &planpb.Command_Run{Run: w.pos}})
			if w.record >= 0 {
				st.Commands = append(st.Commands, &planpb.Command{Kind: &planpb.Command_Record{Record: w.record}})
			}
		}
		p.Streams = append(p.Streams, st)
	}
}

// attribute encodes an op attribute. Graph-valued and sparse attributes
// have no kernel in the runtime and are refused.
func attribute(a ir.Attr) (*planpb.Attribute, error) {
	pa := &planpb.Attribute{Name: a.Name, Type: int32(a.Type)}
	switch a.Type {
	case ir.AttrFloat:
		pa.F = a.Float
	case ir.AttrInt:
		pa.I = a.Int
	case ir.AttrString:
		pa.S = []byte(a.String)
	case ir.AttrTensor:
		if a.Tensor == nil {
			return nil, fmt.Errorf("attribute %q: no tensor", a.Name)
		}
		pa.T = tensor(a.Tensor)
	case ir.AttrFloats:
		pa.Floats = a.Floats
	case ir.AttrInts:
		pa.Ints = a.Ints
	case ir.AttrStrings:
		for _, s := range a.Strings {
			pa.Strings = append(pa.Strings, []byte(s))
		}
	default:
		return nil, fmt.Errorf("attribute %q of type %v cannot be lowered to a native plan", a.Name, a.Type)
	}
	return pa, nil
}

func tensor(t *ir.Tensor) *planpb.Tensor {
	return &planpb.Tensor{Dtype: int32(t.DType), Shape: t.Shape, Data: t.Raw}
}

// hostTensor reports whether a value lives in host memory in a plan: a
// swap-out's or host op's output (memory.OnHost), or a weight the plan
// keeps on the host all step (memory.HostResident).
func hostTensor(v *ir.Value) bool { return memory.OnHost(v) || memory.HostResident(v) }
