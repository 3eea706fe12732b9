package passes

import (
	"fmt"
	"slices"

	"github.com/tsplit/tsplit/ir"
	"github.com/tsplit/tsplit/memory"
)

// Fused-tiled forward execution of a segment (SFT §3, Fig. 5): the
// segment's ops are replaced, for every cell of the tiling's grid in
// turn, by
//
//	x_c  = Slice(x, input region of cell c)        per input checkpoint
//	y1_c = Op1(x_c) … yk_c = Opk(…)                every op of the segment on the tile,
//	                                               sliding windows with the padding of
//	                                               the cell (Range.PadLo/PadHi)
//	y_c  = Slice(yk_c, output tile of cell c)      where a halo consumer widened it
//
// and each output checkpoint is the Concat of its tiles, along the last
// tiled dimension within a row of the grid, then along the earlier ones.
// All are standard ONNX ops, so any runtime executes the rewritten
// model. Ops are placed cell after cell, so a cell's intermediate tiles
// die before the next cell starts and the segment's full intermediate
// activations never exist: the memory model's peak drops from the
// largest activation to a tile's working set beside the checkpoints.
//
// This is the forward pass. The training step's backward through a
// segment recomputes each cell from the input checkpoint
// (RecomputeTiles, tileback.go), which needs the ops of each cell: the
// FusedTiles record.

// FusedTiles records what InsertFusedTiles made of a segment.
type FusedTiles struct {
	Tiling *Tiling
	// Cells lists the ops of each cell of the grid in the order they
	// run: the Slices of the input checkpoints, the segment's ops on the
	// tile, the Slices that trim halos.
	Cells [][]*ir.Op
	// Merges are the Concats that assemble the outputs from their tiles.
	Merges []*ir.Op
}

// InsertFusedTiles rewrites the segment of tl as fused tiles.
func InsertFusedTiles(m *ir.Model, tl *Tiling) (*FusedTiles, error) {
	ft := &FusedTiles{Tiling: tl}
	err := insertFusedTiles(m, tl, ft)
	if err != nil {
		return nil, err
	}
	return ft, nil
}

func insertFusedTiles(m *ir.Model, tl *Tiling, ft *FusedTiles) error {
	g := m.Graph
	seg := tl.Seg
	inSeg := map[*ir.Op]bool{}
	for _, op := range seg.Ops {
		inSeg[op] = true
		for _, fd := range tl.Dims {
			if _, ok := fd.Maps[op]; !ok {
				return fmt.Errorf("fusetile: %s has no split along dimension %d of the segment", op.Describe(), fd.In)
			}
		}
	}
	grid := 1
	for _, n := range tl.Counts {
		grid *= n
	}
	merging := false // the ops inserted from here on are the output merges
	pos := g.Position()
	at := pos[seg.Ops[0].ID]
	if at < 0 {
		return fmt.Errorf("fusetile: %s is not in the graph", seg.Ops[0].Describe())
	}
	insert := func(typ, name string, in []*ir.Value, outs []string, attrs []ir.Attr, phase ir.Phase) (*ir.Op, error) {
		o, err := g.InsertOp(at, typ, "", name, in, outs, attrs)
		if err != nil {
			return nil, err
		}
		at++
		o.Phase, o.Origin = phase, "fusetile"
		if err := ir.InferAndSet(o, m.Opset("")); err != nil {
			return nil, fmt.Errorf("fusetile: %s: %w", o.Describe(), err)
		}
		if merging {
			ft.Merges = append(ft.Merges, o)
		} else {
			ft.Cells[len(ft.Cells)-1] = append(ft.Cells[len(ft.Cells)-1], o)
		}
		return o, nil
	}
	// slice cuts v (a tile whose ranges are have) to want on every tiled
	// dimension where they differ, one Slice per dimension: their
	// bounds are then shared by the tiles of a row or a column, and the
	// resident constants stay few (Tiling.sliceBounds counts them).
	slice := func(v *ir.Value, have, want []Span, name string, phase ir.Phase) (*ir.Value, error) {
		orig := v // the value the tiled dimensions are known for
		for i, fd := range tl.Dims {
			if have[i] == want[i] {
				continue
			}
			if want[i].Lo < have[i].Lo || want[i].Hi > have[i].Hi {
				return nil, fmt.Errorf("fusetile: the tile of %q covers [%d, %d), [%d, %d) is needed", v.Name, have[i].Lo, have[i].Hi, want[i].Lo, want[i].Hi)
			}
			s, err1 := splitConst(g, []int64{want[i].Lo - have[i].Lo})
			e, err2 := splitConst(g, []int64{want[i].Hi - have[i].Lo})
			a, err3 := splitConst(g, []int64{int64(fd.Of[orig])})
			if err := firstErr(err1, err2, err3); err != nil {
				return nil, err
			}
			o, err := insert("Slice", g.FreshName(name+"/tile_slice"), []*ir.Value{v, s, e, a}, []string{g.FreshName(name)}, nil, phase)
			if err != nil {
				return nil, err
			}
			v = o.Output(0)
		}
		return v, nil
	}

	pieces := make(map[*ir.Value][]*ir.Value, len(seg.Outputs))
	cell := make([]int, len(tl.Dims))
	for c := 0; c < grid; c++ {
		ft.Cells = append(ft.Cells, nil)
		r := c
		for i := len(cell) - 1; i >= 0; i-- {
			cell[i] = r % tl.Counts[i]
			r /= tl.Counts[i]
		}
		ranges := func(i int) TileRanges { return tl.Tiles[i][cell[i]] }
		tile := map[*ir.Value]*ir.Value{}
		have := map[*ir.Value][]Span{}
		for _, x := range seg.Inputs {
			tile[x] = x
			full := make([]Span, len(tl.Dims))
			for i, fd := range tl.Dims {
				full[i] = Span{0, x.Shape[fd.Of[x]]}
			}
			have[x] = full
		}
		for _, op := range seg.Ops {
			ins := slices.Clone(op.Inputs())
			for j, v := range ins {
				if v == nil || memory.Resident(v) {
					continue
				}
				want := make([]Span, len(tl.Dims))
				for i := range tl.Dims {
					rg := ranges(i).In[op][j]
					want[i] = Span{rg.Start, rg.End}
				}
				t, err := slice(tile[v], have[v], want, fmt.Sprintf("%s/t%d", v.Name, c), op.Phase)
				if err != nil {
					return err
				}
				ins[j] = t
			}
			attrs, err := tileAttrs(op, tl, ranges)
			if err != nil {
				return err
			}
			outs := make([]string, len(op.Outputs()))
			for k, v := range op.Outputs() {
				if v != nil {
					outs[k] = g.FreshName(fmt.Sprintf("%s/t%d", v.Name, c))
				}
			}
			o, err := insert(op.Type, g.FreshName(fmt.Sprintf("%s/t%d", op.Name, c)), ins, outs, attrs, op.Phase)
			if err != nil {
				return err
			}
			o.Domain = op.Domain
			for k, v := range op.Outputs() {
				if v == nil {
					continue
				}
				sp := make([]Span, len(tl.Dims))
				for i := range tl.Dims {
					sp[i] = ranges(i).Iter[op]
				}
				tile[v], have[v] = o.Output(k), sp
			}
		}
		for _, v := range seg.Outputs {
			want := make([]Span, len(tl.Dims))
			for i, fd := range tl.Dims {
				p := Parts(v.Shape[fd.Of[v]], tl.Counts[i])[cell[i]]
				want[i] = Span{p[0], p[1]}
			}
			t, err := slice(tile[v], have[v], want, fmt.Sprintf("%s/t%d", v.Name, c), seg.Ops[len(seg.Ops)-1].Phase)
			if err != nil {
				return err
			}
			pieces[v] = append(pieces[v], t)
		}
	}

	// Merge each output's tiles: the grid is row-major, so the last
	// dimension's tiles are adjacent.
	merging = true
	for _, v := range seg.Outputs {
		ps := pieces[v]
		for i := len(tl.Dims) - 1; i >= 0; i-- {
			n := tl.Counts[i]
			if n == 1 {
				continue
			}
			var merged []*ir.Value
			for k := 0; k < len(ps); k += n {
				o, err := insert("Concat", g.FreshName(v.Name+"/tile_merge"), ps[k:k+n], []string{g.FreshName(v.Name + "/tiled")},
					[]ir.Attr{{Name: "axis", Type: ir.AttrInt, Int: int64(tl.Dims[i].Of[v])}}, v.Def.Phase)
				if err != nil {
					return err
				}
				merged = append(merged, o.Output(0))
			}
			ps = merged
		}
		if len(ps) != 1 {
			return fmt.Errorf("fusetile: %d merged tiles of %q", len(ps), v.Name)
		}
		v.ReplaceAllUsesWith(ps[0])
		pieces[v] = ps
	}
	for k := len(seg.Ops) - 1; k >= 0; k-- {
		op := seg.Ops[k]
		if err := g.RemoveOp(op); err != nil {
			return fmt.Errorf("fusetile: %w", err)
		}
	}
	outputs := map[*ir.Value]bool{}
	for _, v := range g.Outputs {
		outputs[v] = true
	}
	for _, v := range seg.Outputs {
		if w := pieces[v][0]; outputs[w] {
			if err := g.Rename(w, v.Name); err != nil {
				return err
			}
		}
	}
	return nil
}

// tileAttrs are the attributes of op's tile: a sliding window gets
// explicit pads, those of the tile's input 0 range on each tiled
// spatial dimension and the op's own elsewhere.
func tileAttrs(op *ir.Op, tl *Tiling, ranges func(int) TileRanges) ([]ir.Attr, error) {
	attrs := slices.Clone(op.Attrs)
	windowed := false
	for _, fd := range tl.Dims {
		windowed = windowed || fd.Maps[op].Rewrite == RewritePads
	}
	if !windowed {
		return attrs, nil
	}
	win, err := ir.WindowOf(op)
	if err != nil {
		return nil, fmt.Errorf("fusetile: %w", err)
	}
	n := len(win.Kernel)
	pads := slices.Clone(win.Pads)
	for i, fd := range tl.Dims {
		dm := fd.Maps[op]
		if dm.Rewrite != RewritePads {
			continue
		}
		sd := dm.OutDim - 2
		if sd < 0 || sd >= n {
			return nil, fmt.Errorf("fusetile: %s: dimension %d is not spatial", op.Describe(), dm.OutDim)
		}
		r := ranges(i).In[op][0]
		pads[sd], pads[sd+n] = r.PadLo, r.PadHi
	}
	kept := attrs[:0]
	for _, a := range attrs {
		if a.Name != "auto_pad" && a.Name != "pads" {
			kept = append(kept, a)
		}
	}
	return append(kept, ir.Attr{Name: "pads", Type: ir.AttrInts, Ints: pads}), nil
}
