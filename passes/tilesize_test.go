package passes

import (
	"fmt"
	"strings"
	"testing"

	"github.com/tsplit/tsplit/internal/plantest"
	"github.com/tsplit/tsplit/ir"
	. "github.com/tsplit/tsplit/ir/irtest"
)

// sftChain is a window chain on an odd-sized 1×2×13×11 input:
//
//	dil   Conv 3×3, dilation 2, pads 2   → 13×11
//	relu                                  → 13×11
//	s2    Conv 3×3, stride 2, pads 1     → 7×6
//	pool  MaxPool 2×2, stride 2          → 3×3
//
// taken whole as one segment.
func sftChain(t *testing.T) (*ir.Model, *FTSegment) {
	b := New(t)
	x := b.Input("x", ir.Float, 1, 2, 13, 11)
	name := func(v *ir.Value, n string) *ir.Value { v.Def.Name = n; return v }
	h := name(b.Op("Conv", V(x, plantest.Weight(b, "w1", 2, 2, 3, 3)), Ints("dilations", 2, 2), Ints("pads", 2, 2, 2, 2)), "dil")
	h = name(b.Op("Relu", V(h)), "relu")
	h = name(b.Op("Conv", V(h, plantest.Weight(b, "w2", 2, 2, 3, 3), plantest.Weight(b, "b2", 2)), Ints("strides", 2, 2), Ints("pads", 1, 1, 1, 1)), "s2")
	h = name(b.Op("MaxPool", V(h), Ints("kernel_shape", 2, 2), Ints("strides", 2, 2)), "pool")
	m := b.Return(h)
	ops := m.Graph.Order()
	seg, err := newSegment(m.Graph, AnalyzeFT(m), ops, make([]bool, len(ops)), func(*ir.Value) bool { return true })
	if err != nil {
		t.Fatal(err)
	}
	return m, seg
}

// tileString prints, for each tile along dimension i, the range of
// every op's input 0 with its padding, from the segment's input to its
// output tile.
func tileString(tl *Tiling, i int) string {
	var sb strings.Builder
	for t, tr := range tl.Tiles[i] {
		fmt.Fprintf(&sb, "tile %d:", t)
		for _, op := range tl.Seg.Ops {
			r := tr.In[op][0]
			fmt.Fprintf(&sb, " %s[%d,%d)", op.Name, r.Start, r.End)
			if r.PadLo != 0 || r.PadHi != 0 {
				fmt.Fprintf(&sb, "+%d/%d", r.PadLo, r.PadHi)
			}
		}
		last := tl.Seg.Ops[len(tl.Seg.Ops)-1]
		fmt.Fprintf(&sb, " out[%d,%d)\n", tr.Iter[last].Lo, tr.Iter[last].Hi)
	}
	return sb.String()
}

// The regions by hand, output 3×3 → input 13×11. For an output range
// [lo, hi) a window of effective size ek = (k−1)·d + 1, stride s and
// begin pad pb reads [s·lo − pb, s·(hi−1) − pb + ek), clamped to the
// input, what is cut off being the tile's padding.
//
// Height, 2 tiles of the 3 output rows: [0,2) and [2,3).
//
//	pool (k2 s2):       [0,4)          [4,6)
//	s2 (k3 s2 p1):      [−1,8)→[0,8)+1 [7,12)
//	relu:               [0,8)          [7,12)
//	dil (ek5 s1 p2):    [−2,10)→[0,10)+2  [5,14)→[5,13)+0/1
//
// Width, 3 tiles of the 3 output columns: [0,1), [1,2), [2,3).
//
//	pool:               [0,2)    [2,4)    [4,6)
//	s2:                 [0,4)+1  [3,8)    [7,12)→[7,11)+0/1
//	dil:                [0,6)+2  [1,10)   [5,13)→[5,11)+0/2
func TestComputeTileSizeWindows(t *testing.T) {
	_, seg := sftChain(t)
	if len(seg.Dims) != 2 || seg.Dims[0].In != 2 || seg.Dims[1].In != 3 {
		t.Fatalf("segment dims %v, want height and width", seg.Dims)
	}
	tl, err := ComputeTileSize(seg, seg.Dims, []int{2, 3})
	if err != nil {
		t.Fatal(err)
	}
	wantH := "tile 0: dil[0,10)+2/0 relu[0,8) s2[0,8)+1/0 pool[0,4) out[0,2)\n" +
		"tile 1: dil[5,13)+0/1 relu[7,12) s2[7,12) pool[4,6) out[2,3)\n"
	wantW := "tile 0: dil[0,6)+2/0 relu[0,4) s2[0,4)+1/0 pool[0,2) out[0,1)\n" +
		"tile 1: dil[1,10) relu[3,8) s2[3,8) pool[2,4) out[1,2)\n" +
		"tile 2: dil[5,11)+0/2 relu[7,11) s2[7,11)+0/1 pool[4,6) out[2,3)\n"
	if got := tileString(tl, 0); got != wantH {
		t.Errorf("height:\n%swant:\n%s", got, wantH)
	}
	if got := tileString(tl, 1); got != wantW {
		t.Errorf("width:\n%swant:\n%s", got, wantW)
	}
	// The weights are read whole; their ranges are not listed.
	for _, tr := range tl.Tiles[0] {
		for v := range tr.Value {
			if v.Kind == ir.KindInit {
				t.Errorf("weight %q has a tile range", v.Name)
			}
		}
	}
	// More tiles than output positions is refused.
	if _, err := ComputeTileSize(seg, seg.Dims[:1], []int{4}); err == nil {
		t.Error("4 tiles of 3 rows accepted")
	}
}

// ChooseTiles adds one tile at a time along the widest dimension until
// a tile's working set fits: counts that are not powers of two.
func TestChooseTiles(t *testing.T) {
	_, seg := sftChain(t)
	whole, err := ComputeTileSize(seg, tileDims(seg), []int{1, 1})
	if err != nil {
		t.Fatal(err)
	}
	// Checkpoints: x (1144 B) and the 72-byte output. The largest op
	// working set, untiled: dil's 1144 B of input and 12 of its 13 rows
	// of output (1056 B): the pool reads 6 of s2's 7 rows, which read 12.
	if got := whole.WorkingSet(); got != 1144+72+1144+1056 {
		t.Fatalf("untiled working set %d, want %d", got, 1144+72+1144+1056)
	}
	// 1100 bytes per tile beside the checkpoints: two tiles per
	// dimension leave 1312, a third row of tiles 1040.
	const ck, avail = 1144 + 72, 1100
	tl, err := ChooseTiles(seg, ck+avail)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(tl.Counts) != "[3 2]" || tl.WorkingSet() != ck+1040 {
		t.Errorf("counts %v (working set %d), want [3 2] with %d", tl.Counts, tl.WorkingSet()-ck, 1040)
	}
	fewer, err := ComputeTileSize(seg, tl.Dims, []int{2, 2})
	if err != nil || fewer.WorkingSet() != ck+1312 {
		t.Errorf("2×2 tiles: %v, working set %d, want %d", err, fewer.WorkingSet()-ck, 1312)
	}
	// Even 3×3 tiles (the output's positions) need 848 bytes.
	if _, err := ChooseTiles(seg, ck+800); err == nil || !strings.Contains(err.Error(), "finest tiling") {
		t.Errorf("800 bytes per tile: %v, want refused", err)
	}
}
