package passes

import (
	"fmt"
	"strings"
	"testing"

	"github.com/tsplit/tsplit/internal/plantest"
	"github.com/tsplit/tsplit/ir"
	. "github.com/tsplit/tsplit/ir/irtest"
	"github.com/tsplit/tsplit/memory"
)

// sftVGG is a small VGG-like stack on a 1×3×32×32 image:
//
//	conv1 3→8 3×3 p1 (32 KiB out) → relu1 → conv2 8→8 → relu2 → pool1 2×2/2 (8 KiB)
//	→ conv3 8→16 (16 KiB) → relu3 → pool2 2×2/2 (4 KiB) → gap
//
// Its weights take 7.9 KiB (2016 floats).
func sftVGG(t *testing.T) *ir.Model {
	b := New(t)
	x := b.Input("x", ir.Float, 1, 3, 32, 32)
	conv := func(name string, x *ir.Value, cin, cout int64) *ir.Value {
		w := plantest.Weight(b, name+".w", cout, cin, 3, 3)
		bias := plantest.Weight(b, name+".b", cout)
		y := b.Op("Conv", V(x, w, bias), Ints("pads", 1, 1, 1, 1))
		y.Def.Name = name
		r := b.Op("Relu", V(y))
		r.Def.Name = strings.Replace(name, "conv", "relu", 1)
		return r
	}
	pool := func(name string, x *ir.Value) *ir.Value {
		p := b.Op("MaxPool", V(x), Ints("kernel_shape", 2, 2), Ints("strides", 2, 2))
		p.Def.Name = name
		return p
	}
	h := pool("pool1", conv("conv2", conv("conv1", x, 3, 8), 8, 8))
	h = pool("pool2", conv("conv3", h, 8, 16))
	y := b.Op("GlobalAveragePool", V(h))
	y.Def.Name = "gap"
	return b.Return(y)
}

func segNames(seg *FTSegment) string {
	var ns []string
	for _, op := range seg.Ops {
		ns = append(ns, op.Name)
	}
	return strings.Join(ns, " ")
}

func valueNames(vs []*ir.Value) string {
	var ns []string
	for _, v := range vs {
		ns = append(ns, v.Name)
	}
	return strings.Join(ns, " ")
}

// The must-tile ops of sftVGG at a 40 KiB budget and the segments grown
// from them, first counting activations only. The weights take 8.5 KiB
// at the allocator's 256-byte alignment. An op is must-tile when its
// activations and the weights exceed the budget: conv1 (12 + 32 KiB)
// through pool1 (32 + 8 KiB), and relu3 (16 + 16 KiB); conv3 (8 + 16
// KiB) fits and its output is the second segment's input checkpoint.
// relu3's 16 KiB output would fit as a checkpoint, but not merge beside
// its tiles and conv3's output, so the second segment takes pool2 too.
// The first tiles along height and width only (the batch has one sample
// and the convolutions read every channel), the second along channels
// too.
func TestFTSegmentsVGG(t *testing.T) {
	m := sftVGG(t)
	noScratch := func(*ir.Op) int64 { return 0 }
	segs, err := FindSegments(m, AnalyzeFT(m), SegmentOptions{Budget: 40 << 10, Workspace: noScratch})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range segs {
		var dims []string
		for _, d := range s.Dims {
			dims = append(dims, fmt.Sprint(d.In))
		}
		got = append(got, fmt.Sprintf("[%s] in=%s out=%s must=%d dims=%s", segNames(s), valueNames(s.Inputs), valueNames(s.Outputs), s.MustTile, strings.Join(dims, ",")))
	}
	if len(segs) != 2 {
		t.Fatalf("segments:\n%s\nwant 2", strings.Join(got, "\n"))
	}
	want := []string{
		"[conv1 relu1 conv2 relu2 pool1] in=x out=" + segs[0].Outputs[0].Name + " must=5 dims=2,3",
		"[relu3 pool2] in=" + segs[1].Inputs[0].Name + " out=" + segs[1].Outputs[0].Name + " must=1 dims=1,2,3",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("segments:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if segs[1].Inputs[0].Def.Name != "conv3" || segs[0].Outputs[0].Def.Name != "pool1" {
		t.Errorf("checkpoints: %s and %s", segs[1].Inputs[0].Def.Name, segs[0].Outputs[0].Def.Name)
	}
	// With the convolutions' im2col scratch (conv2: 288 KiB, conv3:
	// 72 KiB) every convolution is must-tile. At 64 KiB one segment runs
	// from the image to conv3: no tiling of a shorter one fits beside its
	// checkpoints (ending at pool1, the 8 KiB output merges beside its
	// 64 tiles of 256 bytes or more each, the allocator's alignment). At
	// 56 KiB none does, and the segment grows into the global pool,
	// which tiles along nothing.
	segs, err = FindSegments(m, AnalyzeFT(m), SegmentOptions{Budget: 64 << 10})
	if err != nil || len(segs) != 1 || segNames(segs[0]) != "conv1 relu1 conv2 relu2 pool1 conv3" {
		t.Errorf("with scratch at 64 KiB: %d segments, %v", len(segs), err)
	}
	if _, err := FindSegments(m, AnalyzeFT(m), SegmentOptions{Budget: 56 << 10}); err == nil || !strings.Contains(err.Error(), "no common dimension") ||
		!strings.Contains(err.Error(), "tile budget of 48640 bytes") || !strings.Contains(err.Error(), "needs 55296 bytes at its best tiling") {
		t.Errorf("with scratch at 56 KiB: %v, want no tiling, naming the tile budget and what the best tiling needs", err)
	}
	// A budget the whole model fits in has nothing to tile.
	segs, err = FindSegments(m, AnalyzeFT(m), SegmentOptions{Budget: 1 << 20})
	if err != nil || len(segs) != 0 {
		t.Errorf("1 MiB: %d segments, %v", len(segs), err)
	}
	// Below the input image and the weights no checkpoint fits.
	if _, err := FindSegments(m, AnalyzeFT(m), SegmentOptions{Budget: 16 << 10}); err == nil || !strings.Contains(err.Error(), "does not fit") {
		t.Errorf("16 KiB: %v, want a checkpoint that does not fit", err)
	}
}

// Two branches leave a pool and meet at an Add. The 3×3 convolution
// before the pool is must-tile (8 + 16 KiB and 72 KiB of im2col
// scratch at a 32 KiB budget); its 16 KiB output would fit as a
// checkpoint but cannot merge beside its tiles and the stem's 8 KiB, so
// the segment takes the pool, and then grows to the pool's
// post-dominator, the Add: both branches run on tiles and the Add reads
// their outputs as checkpoints.
func TestFTSegmentsBranches(t *testing.T) {
	m := sftBranches(t)
	stem, a, c := m.Graph.Lookup("stem_out"), m.Graph.Lookup("a_out"), m.Graph.Lookup("b_out")
	segs, err := FindSegments(m, AnalyzeFT(m), SegmentOptions{Budget: 32 << 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(segs) != 1 || segNames(segs[0]) != "wide pool a b" || valueNames(segs[0].Inputs) != stem.Name ||
		valueNames(segs[0].Outputs) != a.Name+" "+c.Name || len(segs[0].Dims) != 2 {
		for _, s := range segs {
			t.Logf("segment [%s] in=%s out=%s dims=%d", segNames(s), valueNames(s.Inputs), valueNames(s.Outputs), len(s.Dims))
		}
		t.Fatal("want one segment [wide pool a b] from the stem's output to both branches, tiled along 2 dimensions")
	}
}

// sftBranches: a stem, a 3×3 convolution, a pool, two branches from the
// pool and their sum, on a 1×4×16×16 input; op X's output is "X_out".
func sftBranches(t *testing.T) *ir.Model {
	b := New(t)
	x := b.Input("x", ir.Float, 1, 4, 16, 16) // 4 KiB
	name := func(v *ir.Value, n string) *ir.Value {
		v.Def.Name = n
		if err := v.Graph().Rename(v, n+"_out"); err != nil {
			t.Fatal(err)
		}
		return v
	}
	stem := name(b.Op("Conv", V(x, plantest.Weight(b, "w0", 8, 4, 1, 1))), "stem")                               // 8 KiB
	wide := name(b.Op("Conv", V(stem, plantest.Weight(b, "w1", 16, 8, 3, 3)), Ints("pads", 1, 1, 1, 1)), "wide") // 16 KiB
	pool := name(b.Op("MaxPool", V(wide), Ints("kernel_shape", 2, 2), Ints("strides", 2, 2)), "pool")            // 4 KiB
	a := name(b.Op("Relu", V(pool)), "a")
	c := name(b.Op("Sigmoid", V(pool)), "b")
	return b.Return(name(b.Op("Add", V(a, c)), "add"))
}

// vgg16Body is torchvision's VGG-16 conv body and a global average pool
// on one n×n image, the weights as parameter inputs (no data).
func vgg16Body(t *testing.T, n int64) *ir.Model {
	b := New(t)
	h := b.Input("x", ir.Float, 1, 3, n, n)
	cin := int64(3)
	for i, c := range []int64{64, 64, 0, 128, 128, 0, 256, 256, 256, 0, 512, 512, 512, 0, 512, 512, 512, 0} {
		if c == 0 {
			h = b.Op("MaxPool", V(h), Ints("kernel_shape", 2, 2), Ints("strides", 2, 2))
			h.Def.Name = fmt.Sprintf("pool%d", i)
			continue
		}
		w := b.Input(fmt.Sprintf("w%d", i), ir.Float, c, cin, 3, 3)
		bias := b.Input(fmt.Sprintf("b%d", i), ir.Float, c)
		w.Param, bias.Param = true, true
		h = b.Op("Conv", V(h, w, bias), Ints("pads", 1, 1, 1, 1))
		h.Def.Name = fmt.Sprintf("conv%d", i)
		h = b.Op("Relu", V(h))
		h.Def.Name = fmt.Sprintf("relu%d", i)
		cin = c
	}
	h = b.Op("GlobalAveragePool", V(h))
	h.Def.Name = "gap"
	return b.Return(h)
}

// The partition of VGG-16's conv body at a 10 GiB budget (the issue's
// gtx-1080ti setting), with the reference kernels' scratch. At 2048²
// everything fits. At 8192² the first two blocks (a 16 GiB activation)
// are one segment from the image to pool5 and the third block another,
// up to pool9. At 20480² (a 100 GiB activation) one segment runs from
// the image to the last pool, whose 0.8 GiB output fits, on 9×9 tiles.
func TestFTSegmentsVGG16(t *testing.T) {
	for _, c := range []struct {
		n    int64
		want string
	}{
		{2048, ""},
		{8192, "[conv0 … pool5] 3×3; [conv7 … pool9] 2×2"},
		{20480, "[conv0 … pool17] 9×9"},
	} {
		m := vgg16Body(t, c.n)
		const budget = 10 << 30
		segs, err := FindSegments(m, AnalyzeFT(m), SegmentOptions{Budget: budget})
		if err != nil {
			t.Fatalf("%d²: %v", c.n, err)
		}
		var weights int64
		for _, v := range m.Graph.Inputs {
			if v.Param {
				weights += memory.Align(v.Bytes())
			}
		}
		var got []string
		for _, s := range segs {
			tl, err := ChooseTiles(s, budget-weights)
			if err != nil {
				t.Fatalf("%d²: %v", c.n, err)
			}
			got = append(got, fmt.Sprintf("[%s … %s] %d×%d", s.Ops[0].Name, s.Ops[len(s.Ops)-1].Name, tl.Counts[0], tl.Counts[1]))
		}
		if g := strings.Join(got, "; "); g != c.want {
			t.Errorf("%d²: %q, want %q", c.n, g, c.want)
		}
	}
}
