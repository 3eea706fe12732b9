package passes

import (
	"fmt"
	"strings"
	"testing"

	"github.com/tsplit/tsplit/internal/plantest"
	"github.com/tsplit/tsplit/ir"
	. "github.com/tsplit/tsplit/ir/irtest"
)

// sftChain is a window chain on a 1×2×h×w input, here 13×11:
//
//	dil   Conv 3×3, dilation 2, pads 2   → 13×11
//	relu                                  → 13×11
//	s2    Conv 3×3, stride 2, pads 1     → 7×6
//	pool  MaxPool 2×2, stride 2          → 3×3
//
// taken whole as one segment.
func sftChain(t *testing.T, height, width int64) (*ir.Model, *FTSegment) {
	b := New(t)
	x := b.Input("x", ir.Float, 1, 2, height, width)
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
	_, seg := sftChain(t, 13, 11)
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

// ChooseTiles adds one tile at a time along the dimension whose input
// tiles are widest until the segment fits: counts that are not powers
// of two. On the 13×11 chain, tiling does not pay: every tile and slice
// bound takes at least the allocator's 256 bytes. On 131×111 it does.
func TestChooseTiles(t *testing.T) {
	_, small := sftChain(t, 13, 11)
	whole, err := ComputeTileSize(small, small.Dims, []int{1, 1})
	if err != nil {
		t.Fatal(err)
	}
	// The input checkpoint (1144 B), the output's one tile and its merge
	// (72 B each) and dil's working set: the input, and 12 of its 13 rows
	// of output (1056 B; the pool reads 6 of s2's 7 rows, which read 12),
	// each aligned to 256 bytes.
	if got, want := whole.WorkingSet(), int64(1280+256+1280+1280); got != want {
		t.Fatalf("untiled working set %d, want %d", got, want)
	}
	if two, _ := ComputeTileSize(small, small.Dims, []int{2, 2}); two.WorkingSet() <= whole.WorkingSet() {
		t.Errorf("2×2 tiles of 13×11 need %d bytes, no more than untiled (%d)", two.WorkingSet(), whole.WorkingSet())
	}

	_, seg := sftChain(t, 131, 111)
	const avail = 170000
	tl, err := ChooseTiles(seg, avail)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(tl.Counts) != "[3 2]" || tl.WorkingSet() > avail {
		t.Errorf("counts %v (working set %d), want [3 2] within %d", tl.Counts, tl.WorkingSet(), avail)
	}
	// The step before, 2×2, does not fit.
	if fewer, err := ComputeTileSize(seg, tl.Dims, []int{2, 2}); err != nil || fewer.WorkingSet() <= avail {
		t.Errorf("2×2 tiles: %v, working set %d within %d", err, fewer.WorkingSet(), avail)
	}
	// No tiling fits 100000 bytes: the 116 KiB input checkpoint alone
	// does not.
	if _, err := ChooseTiles(seg, 100000); err == nil || !strings.Contains(err.Error(), "for its checkpoints") {
		t.Errorf("100000 bytes: %v, want refused", err)
	}
}
