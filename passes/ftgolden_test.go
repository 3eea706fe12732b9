package passes

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tsplit/tsplit/compiler"
	"github.com/tsplit/tsplit/ir"
	"github.com/tsplit/tsplit/memory"
	"github.com/tsplit/tsplit/zoo"
)

// darknet19 is the zoo's DarkNet-19-like model (no batch
// normalization) on one n×n image, 1000 classes, weights as inputs
// without data.
func darknet19(t *testing.T, n int64) *ir.Model {
	mp, err := zoo.Build("darknet19", zoo.Config{Batch: 1, ImageSize: n, Classes: 1000, WeightsAsInputs: true})
	if err != nil {
		t.Fatal(err)
	}
	m, err := compiler.FromProto(mp, "", compiler.Options{Batch: 1})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// describeTiling writes seg's partition facts and ChooseTiles' tiling:
// per tiled dimension the output tiles, and per op the range of its
// output each tile computes with the range of input 0 it reads and the
// padding the tile adds there (SFT's computeTileSize, reverse
// propagation with halos).
func describeTiling(w *strings.Builder, seg *FTSegment, tl *Tiling) {
	var dims, grid []string
	for i, d := range tl.Dims {
		dims = append(dims, fmt.Sprint(d.In))
		grid = append(grid, fmt.Sprint(tl.Counts[i]))
	}
	var all []string
	for _, d := range seg.Dims {
		all = append(all, fmt.Sprint(d.In))
	}
	fmt.Fprintf(w, "segment %s … %s: %d ops, %d must-tile, in %s, out %s, tileable dims %s\n",
		seg.Ops[0].Name, seg.Ops[len(seg.Ops)-1].Name, len(seg.Ops), seg.MustTile, shapesOf(seg.Inputs), shapesOf(seg.Outputs), strings.Join(all, ","))
	fmt.Fprintf(w, "  tiles %s along dims %s, working set %d bytes\n", strings.Join(grid, "×"), strings.Join(dims, ","), tl.WorkingSet())
	for _, op := range seg.Ops {
		for i, d := range tl.Dims {
			var cells []string
			for _, tr := range tl.Tiles[i] {
				it := tr.Iter[op]
				cell := fmt.Sprintf("[%d,%d)", it.Lo, it.Hi)
				if ins := tr.In[op]; len(ins) > 0 {
					r := ins[0]
					cell += fmt.Sprintf("<[%d,%d)", r.Start, r.End)
					if r.PadLo != 0 || r.PadHi != 0 {
						cell += fmt.Sprintf("p%d,%d", r.PadLo, r.PadHi)
					}
				}
				cells = append(cells, cell)
			}
			fmt.Fprintf(w, "  %-24s d%d→%d %s\n", op.Name, d.In, d.Of[op.Output(0)], strings.Join(cells, " "))
		}
	}
}

func shapesOf(vs []*ir.Value) string {
	var s []string
	for _, v := range vs {
		s = append(s, fmt.Sprint(v.Shape))
	}
	return strings.Join(s, " ")
}

// The segment partition and the tile-size propagation of VGG-16's conv
// body and the DarkNet-19-like zoo model on one image at the issue's
// 10 GiB budget (gtx-1080ti), with the reference kernels' scratch,
// pinned in testdata/ftsegments.golden (go test -run TestFTGolden
// -update rewrites it). Each line of a segment is one op: per tile of a
// tiled dimension, the output range the tile computes < the input range
// it reads, and the padding the tile adds (p lo,hi).
func TestFTGolden(t *testing.T) {
	const budget = 10 << 30
	var w strings.Builder
	for _, c := range []struct {
		name  string
		n     int64
		build func(*testing.T, int64) *ir.Model
	}{
		{"vgg16 conv body", 8192, vgg16Body},
		{"vgg16 conv body", 20480, vgg16Body},
		{"darknet19", 8192, darknet19},
		{"darknet19", 20480, darknet19},
	} {
		m := c.build(t, c.n)
		fmt.Fprintf(&w, "== %s, %d², budget %d bytes\n", c.name, c.n, int64(budget))
		segs, err := FindSegments(m, AnalyzeFT(m), SegmentOptions{Budget: budget})
		if err != nil {
			fmt.Fprintf(&w, "error: %v\n", err)
			continue
		}
		var weights int64
		for _, v := range m.Graph.Values() {
			if memory.Resident(v) {
				weights += memory.Align(v.Bytes())
			}
		}
		for _, seg := range segs {
			tl, err := ChooseTiles(seg, budget-weights)
			if err != nil {
				t.Fatalf("%s %d²: %v", c.name, c.n, err)
			}
			describeTiling(&w, seg, tl)
		}
	}
	path := filepath.Join("testdata", "ftsegments.golden")
	got := []byte(w.String())
	if ftUpdate() {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -run TestFTGolden -update writes it; ftUpdate, ftcompat_test.go)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("the segments or tile ranges differ from %s (rerun with -update if intended):\n%s", path, got)
	}
}
