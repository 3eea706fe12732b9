package passes

import (
	"fmt"
	"slices"

	"github.com/tsplit/tsplit/ir"
	"github.com/tsplit/tsplit/kernels"
	"github.com/tsplit/tsplit/memory"
)

// FT segments (SFT §4.2): runs of consecutive forward ops that execute
// fused and tiled between two checkpoints. An op must be tiled when its
// working set (the activations it reads and writes) does not fit the
// budget beside the weights; such an op cannot run whole, so it runs tile
// by tile, and so must every op next to it that reads or writes a value
// too large to be a checkpoint. A segment starts at a must-tile op and
// grows:
//
//   - forward, over every op that is itself must-tile or that a value of
//     the segment too large to checkpoint flows into;
//   - forward to the immediate post-dominator of each of its ops, so
//     that branches leaving the segment meet again before it ends and its
//     outputs are read at one place (SFT Listing 3, lines 10–18);
//   - backward to the immediate dominator of an op whose input is too
//     large to checkpoint, so the segment is entered through one place.
//
// Ops are taken in the graph's order and a segment is a contiguous range
// of it, so a segment's inputs are computed before it and its outputs
// are read after it. The dimensions along which the whole segment tiles
// are the FT-compatible dimensions of its first input followed through
// every op (FTdimsIntersect, Listing 3 lines 25–40), read from the one
// FT-compatibility analysis (AnalyzeFT).
//
// The analysis reasons on the forward graph (SFT: backward ops tile like
// their forward ops); run it on the model before the training step is
// built, or it considers only the Forward-phase ops.

// FTSegment is one fused-tiled segment.
type FTSegment struct {
	// Ops are the segment's ops in graph order: a contiguous range of it.
	Ops []*ir.Op
	// Inputs are the activations the segment reads from before it (its
	// input checkpoints), in order of first use; weights are not listed.
	Inputs []*ir.Value
	// Outputs are the values the segment defines that are read after it
	// or are graph outputs (its output checkpoints).
	Outputs []*ir.Value
	// Dims are the dimensions of Inputs[0] along which every op of the
	// segment tiles, each followed through the segment.
	Dims []FTDim
	// MustTile counts the segment's must-tile ops.
	MustTile int
	// Workspace gives an op's scratch bytes, which a tile needs in
	// proportion to the part of the output it computes; nil: none.
	Workspace func(*ir.Op) int64
}

// FTDim is one dimension along which a whole segment tiles.
type FTDim struct {
	// In is the dimension of the segment's first input.
	In int
	// Of gives, for every activation the segment reads or defines, the
	// dimension that follows In.
	Of map[*ir.Value]int
	// Maps gives, for every op of the segment, its concat split along
	// that dimension (from AnalyzeFT).
	Maps map[*ir.Op]DimMap
}

// SegmentOptions parameterize FindSegments.
type SegmentOptions struct {
	// Budget is the device memory in bytes.
	Budget int64
	// Workspace gives an op's scratch bytes, which count in its working
	// set; nil uses the reference kernels' (kernels.WorkspaceBytes), as
	// the memory model does.
	Workspace func(*ir.Op) int64
}

// FindSegments partitions the forward ops of m that cannot run whole
// within the budget into FT segments, using ft (AnalyzeFT(m)) for the
// per-op split maps. A must-tile op whose segment cannot have a
// checkpoint small enough on either side, or that tiles along no
// dimension, is an error naming it.
func FindSegments(m *ir.Model, ft *FTResult, opts SegmentOptions) ([]*FTSegment, error) {
	g := m.Graph
	var order []*ir.Op
	for _, op := range g.Order() {
		if op.Phase == ir.Forward {
			order = append(order, op)
		}
	}
	pos := make([]int, g.NumOpIDs())
	for i := range pos {
		pos[i] = -1
	}
	for i, op := range order {
		pos[op.ID] = i
	}
	var weights int64
	for _, v := range g.Values() {
		if memory.Resident(v) {
			weights += memory.Align(v.Bytes())
		}
	}
	// fits: a value can be a checkpoint (held whole beside the weights).
	fits := func(v *ir.Value) bool { return weights+memory.Align(v.Bytes()) <= opts.Budget }
	workspace := opts.Workspace
	if workspace == nil {
		workspace = kernels.WorkspaceBytes
	}
	must := make([]bool, len(order))
	for i, op := range order {
		ws := workspace(op)
		for _, v := range op.Inputs() {
			if v != nil && !memory.Resident(v) {
				ws += v.Bytes()
			}
		}
		for _, v := range op.Outputs() {
			if v != nil {
				ws += v.Bytes()
			}
		}
		must[i] = weights+ws > opts.Budget
	}
	doms, pdoms := ir.Dominators(g), ir.PostDominators(g)

	var segs []*FTSegment
	for i := 0; i < len(order); i++ {
		if !must[i] {
			continue
		}
		start, end := i, i+1
		var grown error // why the segment last took the next op: no tiling fit
		for changed := true; changed; {
			changed = false
			for k := start; k < end; k++ {
				op := order[k]
				// Exit: the post-dominator reads what the branches from
				// op leave, so everything before it joins.
				if pd := pdoms[op.ID]; pd != nil && pos[pd.ID] > end {
					end, changed = pos[pd.ID], true
				}
				// A value too large to checkpoint read after the segment
				// pulls its reader in.
				for _, v := range op.Outputs() {
					if v == nil || fits(v) {
						continue
					}
					for _, u := range v.Uses() {
						if p := pos[u.Op.ID]; p >= end {
							end, changed = p+1, true
						}
					}
				}
				// Entry: an input too large to checkpoint is computed
				// inside the segment, which then starts at the reading
				// op's dominator.
				for _, v := range op.Inputs() {
					if v == nil || memory.Resident(v) || fits(v) || v.Def == nil || pos[v.Def.ID] < 0 || pos[v.Def.ID] >= start {
						continue
					}
					s := pos[v.Def.ID]
					if d := doms[op.ID]; d != nil && pos[d.ID] >= 0 && pos[d.ID] < s {
						s = pos[d.ID]
					}
					start, changed = s, true
				}
			}
			for end < len(order) && must[end] {
				end, changed = end+1, true
			}
			// The checkpoints on both sides are on the device together
			// with a tile's working set: when no tiling fits, the segment
			// takes the next op, whose output is usually smaller (SFT's
			// checkMemCapacity, which reports an error instead).
			if !changed && end < len(order) {
				if _, err := tileable(g, ft, order[start:end], must[start:end], fits, workspace, opts.Budget-weights); err != nil {
					end, changed, grown = end+1, true, err
				}
			}
		}
		// An earlier segment that the growth reached joins this one.
		for len(segs) > 0 && pos[segs[len(segs)-1].Ops[len(segs[len(segs)-1].Ops)-1].ID] >= start {
			last := segs[len(segs)-1]
			start = min(start, pos[last.Ops[0].ID])
			segs = segs[:len(segs)-1]
		}
		seg, err := tileable(g, ft, order[start:end], must[start:end], fits, workspace, opts.Budget-weights)
		if err != nil && grown != nil {
			return nil, fmt.Errorf("ftsegment: no fused tiling fits the tile budget of %d bytes (the budget of %d less %d bytes of weights): %v; taking the following ops did not help: %w",
				opts.Budget-weights, opts.Budget, weights, grown, err)
		}
		if err != nil {
			return nil, err
		}
		segs = append(segs, seg)
		i = end - 1
	}
	return segs, nil
}

// tileable builds the segment of ops and checks that some tiling of it
// fits avail bytes.
func tileable(g *ir.Graph, ft *FTResult, ops []*ir.Op, must []bool, fits func(*ir.Value) bool, workspace func(*ir.Op) int64, avail int64) (*FTSegment, error) {
	seg, err := newSegment(g, ft, ops, must, fits)
	if err != nil {
		return nil, err
	}
	seg.Workspace = workspace
	if _, err := ChooseTiles(seg, avail); err != nil {
		return nil, err
	}
	return seg, nil
}

// newSegment fills a segment's checkpoints and tiled dimensions and
// checks its checkpoints fit.
func newSegment(g *ir.Graph, ft *FTResult, ops []*ir.Op, must []bool, fits func(*ir.Value) bool) (*FTSegment, error) {
	seg := &FTSegment{Ops: slices.Clone(ops)} // not the caller's slice, which may be the graph's order
	in := map[*ir.Op]bool{}
	for k, op := range ops {
		in[op] = true
		if must[k] {
			seg.MustTile++
		}
	}
	seen := map[*ir.Value]bool{}
	outputs := map[*ir.Value]bool{}
	for _, v := range g.Outputs {
		outputs[v] = true
	}
	for _, op := range ops {
		for _, v := range op.Inputs() {
			if v == nil || memory.Resident(v) || seen[v] || (v.Def != nil && in[v.Def]) {
				continue
			}
			seen[v] = true
			seg.Inputs = append(seg.Inputs, v)
		}
		for _, v := range op.Outputs() {
			if v == nil {
				continue
			}
			out := outputs[v]
			for _, u := range v.Uses() {
				out = out || !in[u.Op]
			}
			if out {
				seg.Outputs = append(seg.Outputs, v)
			}
		}
	}
	first := ops[0]
	for _, v := range append(append([]*ir.Value(nil), seg.Inputs...), seg.Outputs...) {
		if !fits(v) {
			return nil, fmt.Errorf("ftsegment: the segment %s … %s has a checkpoint %q of %d bytes that does not fit the budget beside the weights",
				first.Describe(), ops[len(ops)-1].Describe(), v.Name, v.Bytes())
		}
	}
	if len(seg.Inputs) == 0 {
		return nil, fmt.Errorf("ftsegment: the segment starting at %s reads no activation", first.Describe())
	}
	seg.Dims = ftDimsIntersect(ft, seg, in)
	if len(seg.Dims) == 0 {
		return nil, fmt.Errorf("ftsegment: the segment %s … %s tiles along no common dimension", first.Describe(), ops[len(ops)-1].Describe())
	}
	return seg, nil
}

// ftDimsIntersect follows each dimension of the segment's first input
// through its ops (SFT's FTdimsIntersect): an op continues the
// dimension when one of its concat splits maps every tracked input to
// the dimension it carries and reads every other activation whole or
// along a dimension seen for the first time; the split's output
// dimensions are then tracked. Splits that draw random masks, shift
// indices, or rewrite shape inputs or group counts are not fused: the
// tiles would have to agree on more than their ranges.
func ftDimsIntersect(ft *FTResult, seg *FTSegment, in map[*ir.Op]bool) []FTDim {
	x := seg.Inputs[0]
	var dims []FTDim
next:
	for d := range x.Shape {
		fd := FTDim{In: d, Of: map[*ir.Value]int{x: d}, Maps: map[*ir.Op]DimMap{}}
		for _, op := range seg.Ops {
			found := false
		maps:
			for _, dm := range ft.Of(op) {
				if dm.Merge != MergeConcat || dm.Random || (dm.Rewrite != RewriteNone && dm.Rewrite != RewritePads) {
					continue
				}
				for _, o := range dm.Outputs {
					if o.IndexStride != 0 {
						continue maps
					}
				}
				for j, v := range op.Inputs() {
					if v == nil || memory.Resident(v) {
						if v != nil && dm.Inputs[j].Dim >= 0 {
							continue maps // a weight sliced per tile: not along a spatial walk
						}
						continue
					}
					if e, ok := fd.Of[v]; ok && e != dm.Inputs[j].Dim {
						continue maps
					}
					if _, ok := fd.Of[v]; !ok && v.Def != nil && in[v.Def] {
						continue maps // defined inside but not tracked
					}
				}
				for j, v := range op.Inputs() {
					if v != nil && !memory.Resident(v) {
						fd.Of[v] = dm.Inputs[j].Dim
					}
				}
				for k, v := range op.Outputs() {
					if v != nil {
						fd.Of[v] = dm.Outputs[k].Dim
					}
				}
				fd.Maps[op] = dm
				found = true
				break
			}
			if !found {
				continue next
			}
		}
		for _, e := range fd.Of {
			if e < 0 {
				continue next // an activation read whole: not tiled
			}
		}
		dims = append(dims, fd)
	}
	return dims
}
