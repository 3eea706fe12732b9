package passes

import (
	"fmt"

	"github.com/tsplit/tsplit/ir"
	"github.com/tsplit/tsplit/memory"
)

// Tile sizes of a fused-tiled segment (SFT §4.3, computeTileSize). The
// segment's outputs are cut into near-equal tiles (Parts) along each
// tiled dimension; walking the segment's ops backwards, each op's
// iteration range is the union of what its consumers need of its
// outputs, and each input's range follows from it through the op's map
// (InputMap.Range: σ = stride, δ = the window's halo, clamped to the
// input, what falls outside being the op's own padding). A tile's input
// region therefore carries exactly the halo its windows read: a 3×3
// convolution widens a tile by one on each side, a 2×2 stride-2 pool
// doubles it, an odd extent gives the last tile one position less.
//
// The ranges serve the backward pass as they are. A tile recomputed
// from its input region and back-propagated from its output tile's
// gradient yields, for every value of the segment, a gradient
// contribution supported on the value's forward range of that tile; the
// contributions of all tiles add up to the whole gradient (the output
// tiles partition the output, and each tile computes the output tile
// exactly). So the recompute needs no range beyond the forward one, and
// the gradients of the segment's input and of every value in it
// accumulate over the same ranges (overlap-add on the halos), and the
// weight gradients over the tiles. SFT's Fig. 7 instead widens the
// gradient tiles by the halo (a 64-wide output tile needs a 66-wide
// forward one) and writes disjoint gradient tiles; both read the same
// forward regions.
//
// The dimensions tile independently (the maps are separable), so a
// tiling of several dimensions is a grid whose cell (t1, t2, …) has, on
// each dimension, the ranges of tile ti of that dimension.

// Span is the half-open range [Lo, Hi) of one dimension.
type Span struct{ Lo, Hi int64 }

// Len is Hi − Lo.
func (s Span) Len() int64 { return s.Hi - s.Lo }

func (s Span) union(t Span) Span {
	if s.Len() <= 0 {
		return t
	}
	return Span{min(s.Lo, t.Lo), max(s.Hi, t.Hi)}
}

// Tiling is the tile sizes of one segment.
type Tiling struct {
	Seg *FTSegment
	// Dims are the tiled dimensions and Counts the number of tiles along
	// each.
	Dims   []FTDim
	Counts []int
	// Tiles has, per tiled dimension and per tile along it, the ranges.
	Tiles [][]TileRanges
}

// TileRanges are the ranges of one tile along one dimension.
type TileRanges struct {
	// Value is the range of each activation of the segment the tile
	// needs (its inputs) or computes (its ops' outputs), on the
	// dimension that follows the tiled one.
	Value map[*ir.Value]Span
	// Iter is the range of each op's output 0 the tile computes.
	Iter map[*ir.Op]Span
	// In is, for each op, the range of each input it reads with the
	// padding it adds (zero for inputs read whole).
	In map[*ir.Op][]Range
}

// ComputeTileSize propagates the tiles of seg's outputs, counts[i]
// along dims[i], back through the segment.
func ComputeTileSize(seg *FTSegment, dims []FTDim, counts []int) (*Tiling, error) {
	if len(dims) != len(counts) || len(dims) == 0 {
		return nil, fmt.Errorf("tilesize: %d dimensions and %d tile counts", len(dims), len(counts))
	}
	tl := &Tiling{Seg: seg, Dims: dims, Counts: counts, Tiles: make([][]TileRanges, len(dims))}
	for i, fd := range dims {
		n := counts[i]
		if n < 1 {
			return nil, fmt.Errorf("tilesize: %d tiles along dimension %d", n, fd.In)
		}
		for t := 0; t < n; t++ {
			tr := TileRanges{Value: map[*ir.Value]Span{}, Iter: map[*ir.Op]Span{}, In: map[*ir.Op][]Range{}}
			for _, v := range seg.Outputs {
				e := fd.Of[v]
				parts := Parts(v.Shape[e], n)
				if len(parts) < n {
					return nil, fmt.Errorf("tilesize: %q has %d positions on dimension %d, fewer than %d tiles", v.Name, v.Shape[e], e, n)
				}
				tr.Value[v] = Span{parts[t][0], parts[t][1]}
			}
			for k := len(seg.Ops) - 1; k >= 0; k-- {
				op := seg.Ops[k]
				dm := fd.Maps[op]
				var it Span
				for _, v := range op.Outputs() {
					if s, ok := tr.Value[v]; ok {
						it = it.union(s)
					}
				}
				if it.Len() <= 0 {
					return nil, fmt.Errorf("tilesize: nothing of %s's outputs is needed by tile %d", op.Describe(), t)
				}
				tr.Iter[op] = it
				rs := make([]Range, len(op.Inputs()))
				for j, v := range op.Inputs() {
					im := dm.Inputs[j]
					if v == nil || im.Dim < 0 {
						continue
					}
					r := im.Range(it.Lo, it.Hi, v.Shape[im.Dim])
					rs[j] = r
					if !memory.Resident(v) {
						tr.Value[v] = tr.Value[v].union(Span{r.Start, r.End})
					}
				}
				tr.In[op] = rs
			}
			tl.Tiles[i] = append(tl.Tiles[i], tr)
		}
	}
	return tl, nil
}

// MaxSpan is the largest range of v over the tiles of dimension i.
func (tl *Tiling) MaxSpan(i int, v *ir.Value) int64 {
	var m int64
	for _, tr := range tl.Tiles[i] {
		m = max(m, tr.Value[v].Len())
	}
	return m
}

// tileBytes is the largest tile of v over the grid, aligned as the
// device allocates it: its bytes scaled by the largest range on each
// tiled dimension.
func (tl *Tiling) tileBytes(v *ir.Value) int64 {
	b := v.Bytes()
	for i, fd := range tl.Dims {
		e := fd.Of[v]
		if n := v.Shape[e]; n > 0 {
			b = b * tl.MaxSpan(i, v) / n
		}
	}
	return memory.Align(b)
}

// cells is the number of tiles of the grid.
func (tl *Tiling) cells() int64 {
	n := int64(1)
	for _, c := range tl.Counts {
		n *= int64(c)
	}
	return n
}

// sliceBounds counts the distinct one-element constants the rewrite's
// Slices read (InsertFusedTiles): for every tile along every dimension,
// the start and end, relative to the tile it cuts, of each input an op
// reads narrower than its producer computed it, and of each output tile
// cut from a wider one, and the axes.
func (tl *Tiling) sliceBounds() int {
	seen := map[int64]bool{}
	for i, fd := range tl.Dims {
		for t, tr := range tl.Tiles[i] {
			have := func(v *ir.Value) Span {
				if v.Def != nil {
					if it, ok := tr.Iter[v.Def]; ok {
						return it
					}
				}
				return Span{0, v.Shape[fd.Of[v]]}
			}
			add := func(v *ir.Value, want Span) {
				if h := have(v); h != want {
					seen[want.Lo-h.Lo], seen[want.Hi-h.Lo], seen[int64(fd.Of[v])] = true, true, true
				}
			}
			for _, op := range tl.Seg.Ops {
				for j, v := range op.Inputs() {
					if v != nil && !memory.Resident(v) {
						r := tr.In[op][j]
						add(v, Span{r.Start, r.End})
					}
				}
			}
			for _, v := range tl.Seg.Outputs {
				e := fd.Of[v]
				p := Parts(v.Shape[e], tl.Counts[i])[t]
				add(v, Span{p[0], p[1]})
			}
		}
	}
	return len(seen)
}

// WorkingSet estimates the device bytes the segment needs beside the
// weights, at the device's alignment: the segment's input checkpoints,
// the Slice bounds of the rewrite, and the larger of what is live while
// a tile runs (every tile of the outputs, the largest working set of
// one op on a tile: its activation inputs and outputs and its scratch)
// and while the tiles merge (every tile of the outputs and the merged
// outputs).
func (tl *Tiling) WorkingSet() int64 {
	in := int64(tl.sliceBounds()) * memory.Align(8)
	for _, v := range tl.Seg.Inputs {
		in += memory.Align(v.Bytes())
	}
	var pieces, merged int64
	for _, v := range tl.Seg.Outputs {
		pieces += tl.cells() * tl.tileBytes(v)
		merged += memory.Align(v.Bytes())
	}
	var op int64
	for _, o := range tl.Seg.Ops {
		var ws int64
		for _, v := range o.Inputs() {
			if v != nil && !memory.Resident(v) {
				ws += tl.tileBytes(v)
			}
		}
		for _, v := range o.Outputs() {
			if v != nil {
				ws += tl.tileBytes(v)
			}
		}
		if tl.Seg.Workspace != nil {
			// Scratch grows with the output a tile computes (im2col).
			w, y := tl.Seg.Workspace(o), o.Output(0)
			for i, fd := range tl.Dims {
				if n := y.Shape[fd.Maps[o].OutDim]; n > 0 {
					var it int64
					for _, tr := range tl.Tiles[i] {
						it = max(it, tr.Iter[o].Len())
					}
					w = w * it / n
				}
			}
			ws += memory.Align(w)
		}
		op = max(op, ws)
	}
	return in + pieces + max(op, merged)
}

// ChooseTiles picks the tile counts of a segment for a budget of
// avail bytes beside the weights: it tiles the segment's two largest
// dimensions of its first input that have a window (the spatial ones,
// else the largest two) and, starting from one tile each, adds one tile
// (any count, not only powers of two; an eighth more past 8) along
// the dimension whose input tiles are widest until the working set
// fits. It fails when the checkpoints alone do not fit, when every
// dimension is cut to single positions of an output, or when 8 steps
// in a row did not improve on the best tiling.
func ChooseTiles(seg *FTSegment, avail int64) (*Tiling, error) {
	dims := tileDims(seg)
	counts := make([]int, len(dims))
	for i := range counts {
		counts[i] = 1
	}
	fail := func(ws int64, why string) error {
		return fmt.Errorf("tilesize: the segment %s … %s needs %d bytes %s, %d are available",
			seg.Ops[0].Describe(), seg.Ops[len(seg.Ops)-1].Describe(), ws, why, avail)
	}
	// The input checkpoints and the merged outputs are there whatever
	// the tiling.
	var fixed int64
	for _, v := range seg.Inputs {
		fixed += memory.Align(v.Bytes())
	}
	for _, v := range seg.Outputs {
		fixed += memory.Align(v.Bytes())
	}
	if fixed > avail {
		return nil, fail(fixed, "for its checkpoints")
	}
	x := seg.Inputs[0]
	bestWS, worse := int64(-1), 0
	for {
		tl, err := ComputeTileSize(seg, dims, counts)
		if err != nil {
			return nil, err
		}
		ws := tl.WorkingSet()
		if ws <= avail {
			return tl, nil
		}
		// Past some count, the aligned tiles and slice bounds grow
		// faster than the op working set shrinks.
		if bestWS < 0 || ws < bestWS {
			bestWS, worse = ws, 0
		} else if worse++; worse >= 8 {
			return nil, fail(bestWS, "at its best tiling")
		}
		best, wide := -1, int64(0)
		for i, fd := range dims {
			limit := int64(-1)
			for _, v := range seg.Outputs {
				if e := v.Shape[fd.Of[v]]; limit < 0 || e < limit {
					limit = e
				}
			}
			if int64(counts[i]) >= limit {
				continue
			}
			if w := tl.MaxSpan(i, x); w > wide {
				best, wide = i, w
			}
		}
		if best < 0 {
			return nil, fail(bestWS, "at its best tiling")
		}
		// One more tile, or an eighth more for large counts, so a
		// segment needing hundreds of tiles is tiled in tens of steps.
		counts[best] += max(1, counts[best]/8)
	}
}

// tileDims picks the dimensions ChooseTiles tiles.
func tileDims(seg *FTSegment) []FTDim {
	var win, all []FTDim
	for _, fd := range seg.Dims {
		all = append(all, fd)
		for _, dm := range fd.Maps {
			if dm.Rewrite == RewritePads {
				win = append(win, fd)
				break
			}
		}
	}
	pick := win
	if len(pick) == 0 {
		pick = all
	}
	x := seg.Inputs[0]
	// The two largest, kept in dimension order.
	for len(pick) > 2 {
		small := 0
		for i, fd := range pick {
			if x.Shape[fd.In] < x.Shape[pick[small].In] {
				small = i
			}
		}
		pick = append(pick[:small:small], pick[small+1:]...)
	}
	return pick
}
