package passes

import (
	"bytes"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tsplit/tsplit/compiler"
	"github.com/tsplit/tsplit/ir"
	. "github.com/tsplit/tsplit/ir/irtest"
	"github.com/tsplit/tsplit/kernels"
)

// The -update flag regenerates golden files. Another test file of the
// package may define it; it is then reused, not defined twice.
func init() {
	if flag.Lookup("update") == nil {
		flag.Bool("update", false, "rewrite golden files")
	}
}

func ftUpdate() bool {
	f := flag.Lookup("update")
	return f != nil && f.Value.String() == "true"
}

// ftRun runs the analysis through a State, verifying the IR before and
// after and that the analysis left the graph as it was.
func ftRun(t *testing.T, m *ir.Model) *FTResult {
	t.Helper()
	if err := ir.Verify(m); err != nil {
		t.Fatalf("before: %v", err)
	}
	var before, after bytes.Buffer
	if err := ir.Dump(&before, m.Graph); err != nil {
		t.Fatal(err)
	}
	s := NewState(m, nil)
	s.Check = true
	res, err := typed[*FTResult](s, FTCompat)
	if err != nil {
		t.Fatal(err)
	}
	if err := ir.Verify(m); err != nil {
		t.Fatalf("after: %v", err)
	}
	if err := ir.Dump(&after, m.Graph); err != nil {
		t.Fatal(err)
	}
	if before.String() != after.String() {
		t.Fatal("the analysis changed the graph")
	}
	return res
}

// ---- tensors ----

func ftElemBytes(dt ir.DType) int { return max(1, dt.Bits()/8) }

func ftStrideOf(s ir.Shape, d int) (outer, n, inner int) {
	outer, inner = 1, 1
	for i := 0; i < d; i++ {
		outer *= int(s[i])
	}
	for i := d + 1; i < len(s); i++ {
		inner *= int(s[i])
	}
	return outer, int(s[d]), inner
}

// ftSlice copies elements [a, b) of dimension d.
func ftSlice(t *kernels.Tensor, d int, a, b int64) *kernels.Tensor {
	sh := t.Shape.Clone()
	sh[d] = b - a
	out, _ := kernels.NewTensor(t.DType, sh)
	eb := ftElemBytes(t.DType)
	outer, n, inner := ftStrideOf(t.Shape, d)
	row := int(b-a) * inner * eb
	for o := 0; o < outer; o++ {
		src := (o*n + int(a)) * inner * eb
		copy(out.Data[o*row:(o+1)*row], t.Data[src:src+row])
	}
	return out
}

// ftPlace copies src into dst at offset a of dimension d.
func ftPlace(dst, src *kernels.Tensor, d int, a int64) {
	eb := ftElemBytes(dst.DType)
	outer, n, inner := ftStrideOf(dst.Shape, d)
	m := int(src.Shape[d])
	row := m * inner * eb
	for o := 0; o < outer; o++ {
		at := (o*n + int(a)) * inner * eb
		copy(dst.Data[at:at+row], src.Data[o*row:(o+1)*row])
	}
}

func ftFloats(t *kernels.Tensor) []float64 {
	switch t.DType {
	case ir.Double:
		return t.F64()
	case ir.Float:
		f := t.F32()
		out := make([]float64, len(f))
		for i, v := range f {
			out[i] = float64(v)
		}
		return out
	}
	return nil
}

func ftAdd(dst, src *kernels.Tensor) {
	switch dst.DType {
	case ir.Double:
		d, s := dst.F64(), src.F64()
		for i := range d {
			d[i] += s[i]
		}
	case ir.Float:
		d, s := dst.F32(), src.F32()
		for i := range d {
			d[i] += s[i]
		}
	}
}

// ftSame compares a merged result with the whole op's output: floats
// within tol relative to the output's magnitude, anything else exactly.
func ftSame(got, want *kernels.Tensor, tol float64) error {
	if got.DType != want.DType || !got.Shape.Equal(want.Shape) {
		return fmt.Errorf("got %v%v, want %v%v", got.DType, got.Shape, want.DType, want.Shape)
	}
	if g, w := ftFloats(got), ftFloats(want); w != nil {
		scale := 1.0
		for _, v := range w {
			scale = max(scale, math.Abs(v))
		}
		for i := range w {
			if math.IsNaN(w[i]) != math.IsNaN(g[i]) || math.Abs(g[i]-w[i]) > tol*scale {
				return fmt.Errorf("element %d: got %v, want %v", i, g[i], w[i])
			}
		}
		return nil
	}
	if !bytes.Equal(got.Data, want.Data) {
		return fmt.Errorf("data differs")
	}
	return nil
}

func ftFeeds(m *ir.Model, rng *rand.Rand, fixed map[string]*kernels.Tensor) map[string]*kernels.Tensor {
	feeds := map[string]*kernels.Tensor{}
	for _, v := range m.Graph.Inputs {
		if v.Kind == ir.KindInit {
			continue
		}
		if t, ok := fixed[v.Name]; ok {
			feeds[v.Name] = t
			continue
		}
		t, _ := kernels.NewTensor(v.DType, v.Shape)
		switch v.DType {
		case ir.Double:
			for i := range t.F64() {
				t.F64()[i] = rng.Float64()*2 - 1
			}
		case ir.Float:
			for i := range t.F32() {
				t.F32()[i] = float32(rng.Float64()*2 - 1)
			}
		case ir.Bool:
			for i := range t.Data {
				t.Data[i] = byte(rng.IntN(2))
			}
		}
		feeds[v.Name] = t
	}
	return feeds
}

func ftInts(shape ir.Shape, vals ...int64) *kernels.Tensor {
	return kernels.FromIR(ir.TensorFromInt64s(ir.Int64, shape, vals))
}

// ---- the property: a split computes the op ----

// ftParts cuts [0, n) into p nearly equal ranges.
func ftParts(n int64, p int) [][2]int64 { return Parts(n, p) }

// ftMicroOp builds micro-op k of a split of op, covering [lo, hi) of the
// split dimension, in a graph of its own, and returns it with its input
// tensors.
func ftMicroOp(t *testing.T, m *ir.Model, op *ir.Op, dm DimMap, k int, lo, hi int64, vals []*kernels.Tensor) (*ir.Op, *ir.Model, []*kernels.Tensor, error) {
	t.Helper()
	b := New(t)
	b.M.Opsets = m.Opsets
	ins := make([]*ir.Value, len(op.Inputs()))
	data := make([]*kernels.Tensor, len(op.Inputs()))
	for j, x := range op.Inputs() {
		if x == nil {
			continue
		}
		im := dm.Inputs[j]
		if im.Once && k > 0 {
			continue
		}
		d := vals[x.ID]
		if d == nil {
			return nil, nil, nil, fmt.Errorf("no value for input %d", j)
		}
		if im.Dim >= 0 {
			r := im.Range(lo, hi, x.Shape[im.Dim])
			d = ftSlice(d, im.Dim, r.Start, r.End)
		}
		if j == 1 && dm.Rewrite == RewriteShape {
			shape := dm.MicroShape(op, lo, hi)
			ins[j] = b.Ints(fmt.Sprintf("in%d", j), shape...)
			data[j] = ftInts(ir.Shape{int64(len(shape))}, shape...)
			continue
		}
		if x.Kind == ir.KindInit || x.Const != nil {
			ins[j] = b.Init(fmt.Sprintf("in%d", j), &ir.Tensor{DType: d.DType, Shape: d.Shape.Clone(), Raw: append([]byte(nil), d.Data...)})
		} else {
			ins[j] = b.Input(fmt.Sprintf("in%d", j), d.DType, d.Shape...)
		}
		data[j] = d
	}
	attrs, err := dm.MicroAttrs(op, lo, hi)
	if err != nil {
		return nil, nil, nil, err
	}
	names := make([]string, len(op.Outputs()))
	for i, v := range op.Outputs() {
		if v != nil {
			names[i] = fmt.Sprintf("out%d", i)
		}
	}
	mop, err := b.G.NewOp(op.Type, op.Domain, op.Name, ins, names, attrs)
	if err != nil {
		return nil, nil, nil, err
	}
	if err := ir.InferAndSet(mop, b.M.Opset(op.Domain)); err != nil {
		return nil, nil, nil, err
	}
	return mop, b.M, data, nil
}

// ftCheckSplits checks every split the analysis claims for every op of m:
// it slices the inputs per the split's maps, runs the micro-ops with the
// reference kernels, merges their outputs and compares with the whole
// op's. It returns how many splits it checked.
func ftCheckSplits(t *testing.T, m *ir.Model, res *FTResult, feeds map[string]*kernels.Tensor, tol float64, ps []int) int {
	t.Helper()
	const step = 3
	vals, err := kernels.Interpret(m, feeds, step)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, op := range m.Graph.Order() {
		for _, dm := range res.Of(op) {
			if err := ftCheckSplit(t, m, op, dm, vals, tol, ps, step); err != nil {
				t.Errorf("%s (%v) split %v: %v", op.Describe(), op.Output(0).Shape, dm, err)
			}
			n++
		}
	}
	return n
}

func ftCheckSplit(t *testing.T, m *ir.Model, op *ir.Op, dm DimMap, vals []*kernels.Tensor, tol float64, ps []int, step int64) error {
	t.Helper()
	tried := map[int]bool{}
	for _, p := range ps {
		if p <= 0 || int64(p) > dm.Extent {
			p = int(dm.Extent)
		}
		if tried[p] {
			continue
		}
		tried[p] = true
		acc := make([]*kernels.Tensor, len(op.Outputs()))
		for i, v := range op.Outputs() {
			if v != nil {
				acc[i], _ = kernels.NewTensor(v.DType, v.Shape)
			}
		}
		for k, pr := range ftParts(dm.Extent, p) {
			lo, hi := pr[0], pr[1]
			mop, mm, in, err := ftMicroOp(t, m, op, dm, k, lo, hi, vals)
			if err != nil {
				return fmt.Errorf("p=%d part [%d,%d): micro-op: %v", p, lo, hi, err)
			}
			out, err := kernels.EvalOpset(mop, mm.Opset(op.Domain), in, step)
			if err != nil {
				return fmt.Errorf("p=%d part [%d,%d): %v", p, lo, hi, err)
			}
			for i, v := range op.Outputs() {
				if v == nil {
					continue
				}
				if dm.Merge == MergeSum {
					if !out[i].Shape.Equal(v.Shape) {
						return fmt.Errorf("p=%d part [%d,%d): micro-output %d is %v, want %v", p, lo, hi, i, out[i].Shape, v.Shape)
					}
					ftAdd(acc[i], out[i])
					continue
				}
				d := dm.Outputs[i].Dim
				want := v.Shape.Clone()
				want[d] = hi - lo
				if !out[i].Shape.Equal(want) {
					return fmt.Errorf("p=%d part [%d,%d): micro-output %d is %v, want %v", p, lo, hi, i, out[i].Shape, want)
				}
				if s := dm.Outputs[i].IndexStride; s != 0 {
					x := op.Input(0)
					r := dm.Inputs[0].Range(lo, hi, x.Shape[dm.Inputs[0].Dim])
					for e, idx := range out[i].I64() {
						if idx >= 0 {
							out[i].I64()[e] = idx + r.Start*s
						}
					}
				}
				ftPlace(acc[i], out[i], d, lo)
			}
		}
		if dm.Random {
			if err := ftCheckDropout(op, vals, acc, tol); err != nil {
				return fmt.Errorf("p=%d: %v", p, err)
			}
			continue
		}
		for i, v := range op.Outputs() {
			if v == nil {
				continue
			}
			if err := ftSame(acc[i], vals[v.ID], tol); err != nil {
				return fmt.Errorf("p=%d, output %d: %v", p, i, err)
			}
		}
	}
	return nil
}

// ftCheckDropout checks a merged training-mode Dropout: its mask differs
// from the whole op's, but Y must be X·mask/(1−ratio) with the merged
// mask.
func ftCheckDropout(op *ir.Op, vals []*kernels.Tensor, acc []*kernels.Tensor, tol float64) error {
	if len(acc) < 2 || acc[1] == nil {
		return fmt.Errorf("a random split is checked through its mask output")
	}
	x := ftFloats(vals[op.Input(0).ID])
	ratio := ftFloats(vals[op.Input(1).ID])[0]
	y, mask := ftFloats(acc[0]), acc[1].Data
	kept := 0
	for i := range x {
		want := 0.0
		if mask[i] != 0 {
			want = x[i] / (1 - ratio)
			kept++
		}
		if math.Abs(y[i]-want) > tol*max(1, math.Abs(want)) {
			return fmt.Errorf("element %d: y %v, x %v, mask %d", i, y[i], x[i], mask[i])
		}
	}
	if kept == 0 || kept == len(x) {
		return fmt.Errorf("mask keeps %d of %d", kept, len(x))
	}
	return nil
}

// ---- expectations ----

// ftSplitsOf names the splits of op: "d<dim>" for a concat split with its
// kind's initial (s or p), "k" for a sum.
func ftSplitsOf(res *FTResult, op *ir.Op) string {
	var s []string
	for _, dm := range res.Of(op) {
		kind := string(dm.Kind[:1])
		if dm.Merge == MergeSum {
			s = append(s, "k"+kind)
		} else {
			s = append(s, fmt.Sprintf("d%d%s", dm.OutDim, kind))
		}
	}
	return strings.Join(s, " ")
}

type ftExpect struct {
	v    *ir.Value
	want string
}

func ftCheckExpect(t *testing.T, res *FTResult, ex []ftExpect) {
	t.Helper()
	for _, e := range ex {
		if got := ftSplitsOf(res, e.v.Def); got != e.want {
			t.Errorf("%s %v: splits %q, want %q", e.v.Def.Describe(), e.v.Shape, got, e.want)
		}
	}
}

func ftInit(b *B, name string, rng *rand.Rand, dims ...int64) *ir.Value {
	n := int64(1)
	for _, d := range dims {
		n *= d
	}
	f := make([]float64, n)
	for i := range f {
		f[i] = rng.Float64()*2 - 1
	}
	return b.Init(name, ir.TensorFromFloat64s(ir.Double, ir.Shape(dims), f))
}

func ftScalar(b *B, name string, v float64) *ir.Value {
	return b.Init(name, ir.TensorFromFloat64s(ir.Double, ir.Shape{}, []float64{v}))
}

// ---- property tests ----

// TestFTCompatWindows: Conv (strides, dilations, pads, auto_pad, 1-D,
// 3-D, depthwise and grouped), ConvTranspose, pools with ceil_mode and
// count_include_pad, MaxPool's Indices, global pools, normalisations,
// broadcasting elementwise ops and Dropout, all in float64.
func TestFTCompatWindows(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	b := New(t)
	D := ir.Double
	x := b.Input("x", D, 2, 4, 9, 10)
	c1 := b.Op("Conv", V(x, ftInit(b, "w1", rng, 6, 4, 3, 3), ftInit(b, "b1", rng, 6)), Ints("pads", 1, 1, 1, 1), Ints("strides", 2, 2))
	c2 := b.Op("Conv", V(x, ftInit(b, "w2", rng, 5, 4, 3, 3)), Ints("pads", 2, 0, 1, 1), Ints("strides", 2, 1), Ints("dilations", 2, 1))
	c3 := b.Op("Conv", V(x, ftInit(b, "w3", rng, 3, 4, 3, 3), ftInit(b, "b3", rng, 3)), String("auto_pad", "SAME_UPPER"), Ints("strides", 2, 2))
	c4 := b.Op("Conv", V(x, ftInit(b, "w4", rng, 3, 4, 2, 3)), Ints("strides", 3, 2))
	c5 := b.Op("Conv", V(x, ftInit(b, "w5", rng, 4, 1, 3, 3), ftInit(b, "b5", rng, 4)), Int("group", 4), Ints("pads", 1, 1, 1, 1))
	c6 := b.Op("Conv", V(x, ftInit(b, "w6", rng, 2, 2, 3, 3)), Int("group", 2), Ints("pads", 0, 1, 0, 1))
	c7 := b.Op("Conv", V(x, ftInit(b, "w7", rng, 4, 2, 1, 1)), Int("group", 2))
	c8 := b.Op("Conv", V(x, ftInit(b, "w8", rng, 3, 4, 3, 3)), String("auto_pad", "SAME_LOWER"), Ints("strides", 1, 3), Ints("dilations", 2, 1))
	x1 := b.Input("x1", D, 2, 3, 11)
	c9 := b.Op("Conv", V(x1, ftInit(b, "w9", rng, 5, 3, 4)), Ints("strides", 3), Ints("pads", 2, 1), Ints("dilations", 2))
	x3 := b.Input("x3", D, 2, 2, 5, 6, 4)
	c10 := b.Op("Conv", V(x3, ftInit(b, "w10", rng, 3, 2, 2, 3, 2)), Ints("pads", 1, 1, 0, 0, 1, 1), Ints("strides", 2, 1, 2))

	xt := b.Input("xt", D, 2, 4, 5, 5)
	ct := b.Op("ConvTranspose", V(xt, ftInit(b, "wt", rng, 4, 3, 3, 3), ftInit(b, "bt", rng, 3)), Ints("strides", 2, 2), Ints("pads", 1, 1, 1, 1))

	p1 := b.Op("MaxPool", V(x), Ints("kernel_shape", 3, 3), Ints("strides", 2, 2), Ints("pads", 1, 1, 1, 1))
	p2 := b.Op("MaxPool", V(x), Ints("kernel_shape", 3, 2), Ints("strides", 2, 2), Int("ceil_mode", 1))
	p3 := b.Op("MaxPool", V(x), Ints("kernel_shape", 2, 2), Ints("dilations", 2, 2), Ints("pads", 1, 1, 0, 1))
	p4 := b.Op("AveragePool", V(x), Ints("kernel_shape", 3, 3), Ints("strides", 2, 2), Ints("pads", 1, 1, 1, 1), Int("ceil_mode", 1), Int("count_include_pad", 1))
	p5 := b.Op("AveragePool", V(x), Ints("kernel_shape", 3, 3), Ints("strides", 2, 2), Ints("pads", 1, 0, 1, 1), Int("ceil_mode", 1))
	p6 := b.Op("AveragePool", V(x), Ints("kernel_shape", 3, 2), Ints("strides", 2, 3), String("auto_pad", "SAME_LOWER"), Int("count_include_pad", 1))
	p7 := b.OpN("MaxPool", 2, V(x), Ints("kernel_shape", 2, 2), Ints("strides", 2, 2))
	x1b := b.Input("x1b", D, 1, 4, 6, 6)
	p8 := b.OpN("MaxPool", 2, V(x1b), Ints("kernel_shape", 3, 3), Ints("strides", 2, 2), Ints("pads", 1, 1, 1, 1), Int("storage_order", 1))
	g1 := b.Op("GlobalAveragePool", V(c1))
	g2 := b.Op("GlobalMaxPool", V(x))

	bnp := func(n string, c int64) []*ir.Value {
		v := make([]float64, c)
		for i := range v {
			v[i] = 0.5 + rng.Float64()
		}
		return []*ir.Value{ftInit(b, n+"s", rng, c), ftInit(b, n+"b", rng, c), ftInit(b, n+"m", rng, c),
			b.Init(n+"v", ir.TensorFromFloat64s(D, ir.Shape{c}, v))}
	}
	bn1 := b.OpN("BatchNormalization", 3, append(V(c1), bnp("bn1", 6)...), Int("training_mode", 1), Float("momentum", 0.9))
	bn2 := b.Op("BatchNormalization", append(V(c1), bnp("bn2", 6)...))
	in1 := b.Op("InstanceNormalization", V(c1, ftInit(b, "ins", rng, 6), ftInit(b, "inb", rng, 6)))
	relu := b.Op("Relu", V(bn1[0]))
	add := b.Op("Add", V(relu, ftInit(b, "cb", rng, 1, 6, 1, 1)))
	mul := b.Op("Mul", V(add, ftInit(b, "lb", rng, 5)))
	prelu := b.Op("PRelu", V(c1, ftInit(b, "slope", rng, 6, 1, 1)))
	where := b.Op("Where", V(b.Input("cond", ir.Bool, 2, 1, 5, 5), c1, ftScalar(b, "zero", 0)))
	sum := b.Op("Sum", V(c1, ftInit(b, "s1", rng, 5, 1), ftInit(b, "s2", rng, 2, 6, 1, 5)))
	clip := b.Op("Clip", V(c1, ftScalar(b, "cmin", -0.2), ftScalar(b, "cmax", 0.3)))
	shrink := b.Op("Shrink", V(c1), Float("lambd", 0.2), Float("bias", 0.1)) // its split rule is the elementwise trait's
	drop1 := b.Op("Dropout", V(c1))
	drop2 := b.OpN("Dropout", 2, V(c1, ftScalar(b, "ratio", 0.3), b.Init("train", ir.TensorFromInt64s(ir.Bool, ir.Shape{}, []int64{1}))))
	m := b.Return(c1, c2, c3, c4, c5, c6, c7, c8, c9, c10, ct, p1, p2, p3, p4, p5, p6, p7[0], p7[1], p8[0], p8[1], g1, g2,
		bn1[0], bn1[1], bn1[2], bn2, in1, mul, prelu, where, sum, clip, shrink, drop1, drop2[0], drop2[1])

	res := ftRun(t, m)
	ftCheckExpect(t, res, []ftExpect{
		{c1, "d0s d1p d2s d3s kp"},
		{c2, "d0s d1p d2s d3s kp"},
		{c3, "d0s d1p d2s d3s kp"},
		{c4, "d0s d1p d2s d3s kp"},
		{c5, "d0s d1p d2s d3s"},         // depthwise: channels with group rewritten, no sum
		{c6, "d0s d1p d2s d3s"},         // group = output channels = 2, two input channels each
		{c7, "d0s d2s d3s"},             // two output channels per group: not split
		{c9, "d0s d1p d2s kp"},          // 1-D
		{c10, "d0s d1p d2s d3s d4s kp"}, // 3-D
		{ct, "d0s d1p kp"},              // ConvTranspose: no spatial split
		{p1, "d0s d1s d2s d3s"},
		{p7[0], "d0s"}, // Indices: the batch only
		{p8[0], "d1s"}, // N = 1: the channels, with shifted indices
		{g1, "d0s d1p"},
		{bn1[0], "d1p"},          // training: batch statistics, channels only
		{bn2, "d0s d1p d2s d3s"}, // inference: per-channel affine
		{in1, "d0s d1p"},
		{add, "d0s d1p d2s d3s"},
		{mul, "d0s d1p d2s d3p"}, // scaled by a weight along the width
		{shrink, "d0s d1p d2s d3s"},
		{drop2[0], "d0s d1p d2s d3s"},
	})
	for _, v := range []*ir.Value{c1, c2, c9} {
		dm, _ := res.Along(v.Def, 2)
		win, _ := ir.WindowOf(v.Def)
		in := dm.Inputs[0]
		ek := (win.Kernel[0]-1)*win.Dilations[0] + 1
		if in.Dim != 2 || in.Scale != win.Strides[0] || in.HaloLo != win.Pads[0] || in.HaloHi != ek-1-win.Pads[0] || dm.Rewrite != RewritePads {
			t.Errorf("%s: height split %v", v.Def.Describe(), dm)
		}
	}
	if dm, _ := res.Along(drop2[0].Def, 0); !dm.Random {
		t.Errorf("training Dropout: split not marked random")
	}
	if dm, _ := res.Along(drop1.Def, 0); dm.Random {
		t.Errorf("inference Dropout: split marked random")
	}
	feeds := ftFeeds(m, rng, nil)
	n := ftCheckSplits(t, m, res, feeds, 1e-12, []int{2, 3, 0})
	t.Logf("%d splits checked", n)
}

// TestFTCompatTensorOps: matrix products (Gemm with transposes and C
// broadcasting, batched MatMul with broadcasting and 1-D operands),
// LayerNormalization, Softmax, reshapes that split heads, and the
// tensor and index ops of forward and backward graphs.
func TestFTCompatTensorOps(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	b := New(t)
	D := ir.Double
	x := b.Input("x", D, 2, 5, 8)
	q := b.Op("MatMul", V(x, ftInit(b, "wq", rng, 8, 8)))
	qb := b.Op("Add", V(q, ftInit(b, "bq", rng, 8)))
	qh := b.Op("Reshape", V(qb, b.Ints("sh4", 2, 5, 2, 4)))
	qt := b.Op("Transpose", V(qh), Ints("perm", 0, 2, 1, 3))
	kt := b.Op("Transpose", V(qh), Ints("perm", 0, 2, 3, 1))
	sc := b.Op("MatMul", V(qt, kt))
	sm := b.Op("Softmax", V(sc), Int("axis", -1))
	ctx := b.Op("MatMul", V(sm, qt))
	back := b.Op("Transpose", V(ctx), Ints("perm", 0, 2, 1, 3))
	merged := b.Op("Reshape", V(back, b.Ints("sh3", 2, 5, 8)))
	ln := b.OpN("LayerNormalization", 3, V(merged, ftInit(b, "lns", rng, 8), ftInit(b, "lnb", rng, 8)), Int("axis", -1))
	ln1 := b.Op("LayerNormalization", V(x, ftInit(b, "ln1s", rng, 5, 8)), Int("axis", 1))
	lsm := b.Op("LogSoftmax", V(x), Int("axis", 1))
	hm := b.Op("Hardmax", V(x), Int("axis", 0))

	a2 := b.Input("a2", D, 6, 4)
	g1 := b.Op("Gemm", V(a2, ftInit(b, "gb1", rng, 7, 4), ftInit(b, "gc1", rng, 7)), Int("transB", 1), Float("alpha", 0.5), Float("beta", 2))
	g2 := b.Op("Gemm", V(ftInit(b, "ga2", rng, 4, 3), ftInit(b, "gb2", rng, 6, 4)), Int("transA", 1), Int("transB", 1))
	g3 := b.Op("Gemm", V(a2, ftInit(b, "gb3", rng, 4, 5), ftInit(b, "gc3", rng, 6, 1)))
	g4 := b.Op("Gemm", V(a2, ftInit(b, "gb4", rng, 4, 5), ftInit(b, "gc4", rng, 6, 5)), Float("beta", -1))
	mb1 := b.Op("MatMul", V(b.Input("ma", D, 3, 1, 4, 5), b.Input("mb", D, 2, 5, 6)))
	mb2 := b.Op("MatMul", V(b.Input("mv", D, 5), b.Input("mc", D, 2, 5, 3)))
	mb3 := b.Op("MatMul", V(b.Input("md", D, 2, 4, 5), b.Input("mw", D, 5)))
	mb4 := b.Op("MatMul", V(b.Input("mx", D, 5), b.Input("my", D, 5)))

	fl := b.Op("Flatten", V(qh), Int("axis", 1))
	fl2 := b.Op("Flatten", V(qh), Int("axis", 2))
	sq := b.Op("Unsqueeze", V(x, b.Ints("ax1", 1)))
	sq2 := b.Op("Squeeze", V(sq, b.Ints("ax1b", 1)))
	rs := b.Op("Reshape", V(x, b.Ints("sh5", 10, 2, 4)))
	rs2 := b.Op("Reshape", V(b.Input("r6", D, 6, 4), b.Ints("sh6", 3, 8)))
	cat := b.Op("Concat", V(x, b.Input("x2", D, 2, 3, 8)), Int("axis", 1))
	spl := b.OpN("Split", 3, V(x, b.Ints("splits", 2, 4, 2)), Int("axis", -1))
	sl := b.Op("Slice", V(x, b.Ints("st", 1, 0), b.Ints("en", 100, 8), b.Ints("axs", 1, 2), b.Ints("stp", 2, 1)))
	emb := b.Op("Gather", V(ftInit(b, "table", rng, 10, 8), b.Input("tok", ir.Int64, 2, 5)))
	ga := b.Op("Gather", V(x, b.Input("gi", ir.Int64, 3)), Int("axis", 1))
	ge := b.Op("GatherElements", V(x, b.Input("gei", ir.Int64, 2, 3, 8)), Int("axis", 1))
	se := b.Op("ScatterElements", V(b.Input("sd", D, 4, 6), b.Input("sei", ir.Int64, 4, 3), b.Input("seu", D, 4, 3)), Int("axis", 1), String("reduction", "add"))
	se2 := b.Op("ScatterElements", V(b.Input("sd2", D, 4, 6), b.Input("sei2", ir.Int64, 2, 6), b.Input("seu2", D, 2, 6)))
	rsum := b.Op("ReduceSum", V(x, b.Ints("rax", 1)), Int("keepdims", 0))
	rmean := b.Op("ReduceMean", V(x), Ints("axes", 0, 2))
	rmax := b.Op("ReduceMax", V(x), Ints("axes", -1), Int("keepdims", 0))
	rss := b.Op("ReduceSumSquare", V(x), Ints("axes", 0, 1))
	rnoop := b.Op("ReduceSum", V(x, b.Ints("noax")), Int("noop_with_empty_axes", 1))
	am := b.Op("ArgMax", V(x), Int("axis", 1), Int("keepdims", 0))
	ex := b.Op("Expand", V(b.Input("e", D, 5, 1), b.Ints("esh", 2, 5, 3)))
	ti := b.Op("Tile", V(x, b.Ints("reps", 1, 2, 1)))
	pd := b.Op("Pad", V(x, b.Ints("pads", 0, 0, 1, 0, 0, 2)))
	oh := b.Op("OneHot", V(b.Input("ohi", ir.Int64, 2, 5), b.Ints("depth", 4), ftInit(b, "ohv", rng, 2)), Int("axis", 1))
	ca := b.Op("Cast", V(x), Int("to", int64(ir.Float)))
	cl := b.Op("CastLike", V(ca, x))
	tr := b.Op("Transpose", V(x))
	m := b.Return(ln[0], ln[1], ln[2], ln1, lsm, hm, g1, g2, g3, g4, mb1, mb2, mb3, mb4, fl, fl2, sq2, rs, rs2, cat, spl[0], spl[1], spl[2], sl,
		emb, ga, ge, se, se2, rsum, rmean, rmax, rss, rnoop, am, ex, ti, pd, oh, cl, tr, kt)

	res := ftRun(t, m)
	ftCheckExpect(t, res, []ftExpect{
		{q, "d0s d1s d2p kp"},
		{qh, "d0s d1s d2p"},        // heads split off the hidden dimension, σ = head size
		{sc, "d0s d1p d2s d3s kp"}, // scores: batch, heads, queries, keys; K = head dim
		{sm, "d0s d1p d2s"},
		{ctx, "d0s d1p d2s d3p ks"},
		{merged, "d0s d1s"}, // heads merged back: not split
		{ln[0], "d0s d1s"},
		{ln1, "d0s"},
		{lsm, "d0s d2s"},
		{hm, "d1s d2s"},
		{g1, "d0s d1p kp"},
		{g2, "d0p d1p kp"},
		{mb1, "d0s d1s d2s d3s ks"},
		{mb2, "d0s d1s ks"},
		{mb3, "d0s d1s ks"},
		{mb4, "ks"},
		{fl, "d0s"},
		{fl2, ""},   // [2·5, 2·4]: merged dimensions do not split
		{rs, "d1s"}, // [2,5,8] → [10,2,4]: 2 is the outer half of the 8
		{rs2, "d0s"},
		{cat, "d0s d2s"},
		{spl[0], "d0s d1s"},
		{sl, "d0s d2s"},
		{emb, "d0s d1s d2p"},
		{ga, "d0s d1s d2s"},
		{ge, "d0s d2s"},
		{se, "d0s"},
		{se2, "d1s"},
		{rsum, "d0s d1s ks"},
		{rmean, "d1s"},
		{rmax, "d0s d1s"},
		{rss, "d2s ks ks"},
		{rnoop, "d0s d1s d2s"},
		{am, "d0s d1s"},
		{ex, "d1s"},
		{ti, "d0s d2s"},
		{pd, "d0s d1s"},
		{oh, "d0s d2s"},
		{cl, "d0s d1s d2s"},
		{tr, "d0s d1s d2s"},
	})
	if dm, _ := res.Along(qh.Def, 2); dm.Inputs[0].Scale != 4 || dm.Rewrite != RewriteShape {
		t.Errorf("heads split of %s: %v", qh.Def.Describe(), dm)
	}
	fixed := map[string]*kernels.Tensor{
		"tok": ftInts(ir.Shape{2, 5}, 3, 0, 9, 4, 4, 1, 7, 2, 8, 5),
		"gi":  ftInts(ir.Shape{3}, 4, 0, -2),
		"ohi": ftInts(ir.Shape{2, 5}, 0, 3, 1, 2, 2, 3, 0, -1, 1, 0),
	}
	idx := func(name string, shape ir.Shape, n int64) {
		c, _ := shape.NumElements()
		v := make([]int64, c)
		for i := range v {
			v[i] = rng.Int64N(n)
		}
		fixed[name] = ftInts(shape, v...)
	}
	idx("gei", ir.Shape{2, 3, 8}, 5)
	idx("sei", ir.Shape{4, 3}, 6)
	idx("sei2", ir.Shape{2, 6}, 4)
	feeds := ftFeeds(m, rng, fixed)
	n := ftCheckSplits(t, m, res, feeds, 1e-12, []int{2, 3, 0})
	t.Logf("%d splits checked", n)
}

// TestFTCompatSoftmaxOpset12: before opset 13 Softmax coerces its input
// to 2-D at axis, so only the dimensions before axis split.
func TestFTCompatSoftmaxOpset12(t *testing.T) {
	b := New(t)
	b.M.Opsets = map[string]int64{"": 12}
	x := b.Input("x", ir.Double, 2, 3, 4, 5)
	sm := b.Op("Softmax", V(x), Int("axis", 2))
	lsm := b.Op("LogSoftmax", V(x))
	m := b.Return(sm, lsm)
	res := ftRun(t, m)
	ftCheckExpect(t, res, []ftExpect{{sm, "d0s d1s"}, {lsm, "d0s"}})
	ftCheckSplits(t, m, res, ftFeeds(m, rand.New(rand.NewPCG(15, 16)), nil), 1e-12, []int{2, 0})
}

// TestFTCompatTraining checks every split the analysis claims on the
// training step of ResNet-18 (forward, loss, the backward ops autodiff
// emits, SGD update), in float32.
func TestFTCompatTraining(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a training step")
	}
	m, err := compiler.Import("../testdata/onnx/resnet18-small.onnx", compiler.Options{Batch: 2})
	if err != nil {
		t.Fatal(err)
	}
	ti, err := compiler.BuildTrainingStep(m, compiler.TrainOptions{})
	if err != nil {
		t.Fatal(err)
	}
	res := ftRun(t, m)
	rng := rand.New(rand.NewPCG(5, 6))
	fixed := map[string]*kernels.Tensor{}
	if ti.Labels != "" {
		v := m.Graph.Lookup(ti.Labels)
		c, _ := v.Shape.NumElements()
		l := make([]int64, c)
		for i := range l {
			l[i] = rng.Int64N(ti.Classes)
		}
		fixed[ti.Labels] = ftInts(v.Shape, l...)
	}
	feeds := ftFeeds(m, rng, fixed)
	n := ftCheckSplits(t, m, res, feeds, 1e-5, []int{2, 3})
	ops := 0
	for _, op := range m.Graph.Order() {
		if len(res.Of(op)) > 0 {
			ops++
		}
	}
	t.Logf("%d splits of %d of %d ops checked", n, ops, len(m.Graph.Order()))
}

// TestFTCompatCatchesWrongSplits makes sure the property check has
// teeth: splits the analysis must not claim, and claimed ones with a
// halo one short, fail it.
func TestFTCompatCatchesWrongSplits(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	b := New(t)
	D := ir.Double
	x := b.Input("x", D, 3, 4, 9, 10)
	conv := b.Op("Conv", V(x, ftInit(b, "w", rng, 5, 4, 3, 3)), Ints("pads", 1, 1, 1, 1), Ints("strides", 2, 2))
	bn := b.Op("BatchNormalization", V(x, ftInit(b, "s", rng, 4), ftInit(b, "bb", rng, 4), ftInit(b, "m", rng, 4),
		b.Init("v", ir.TensorFromFloat64s(D, ir.Shape{4}, []float64{1, 2, 3, 4}))), Int("training_mode", 1))
	sm := b.Op("Softmax", V(x), Int("axis", 2))
	ln := b.Op("LayerNormalization", V(x, ftInit(b, "lns", rng, 10)), Int("axis", -1))
	avg := b.Op("AveragePool", V(x), Ints("kernel_shape", 3, 3), Ints("strides", 2, 2), Ints("pads", 1, 1, 1, 1),
		Int("ceil_mode", 1), Int("count_include_pad", 1))
	m := b.Return(conv, bn, sm, ln, avg)
	res := ftRun(t, m)
	vals, err := kernels.Interpret(m, ftFeeds(m, rng, nil), 0)
	if err != nil {
		t.Fatal(err)
	}
	fails := func(what string, op *ir.Op, dm DimMap) {
		t.Helper()
		if err := ftCheckSplit(t, m, op, dm, vals, 1e-12, []int{2, 3, 0}, 0); err == nil {
			t.Errorf("%s: the wrong split %v passes the check", what, dm)
		}
	}
	whole := func(op *ir.Op, d int) DimMap {
		dm := DimMap{OutDim: d, Extent: op.Output(0).Shape[d], Merge: MergeConcat, Outputs: []OutputMap{{Dim: d}}}
		for range op.Inputs() {
			dm.Inputs = append(dm.Inputs, InputMap{Dim: -1})
		}
		dm.Inputs[0] = ftFollow(d)
		return dm
	}
	for _, c := range []struct {
		v *ir.Value
		d int
	}{{bn, 0}, {sm, 2}, {ln, 3}} {
		if _, ok := res.Along(c.v.Def, c.d); ok {
			t.Errorf("%s: split along %d claimed", c.v.Def.Describe(), c.d)
		}
		fails(c.v.Def.Type, c.v.Def, whole(c.v.Def, c.d))
	}
	// Conv height: one halo position short at either end.
	dm, _ := res.Along(conv.Def, 2)
	short := dm
	short.Inputs = append([]InputMap(nil), dm.Inputs...)
	short.Inputs[0].HaloHi--
	fails("conv, δhi-1", conv.Def, short)
	short.Inputs[0].HaloHi++
	short.Inputs[0].HaloLo--
	short.Inputs[0].PadLo--
	fails("conv, δlo-1", conv.Def, short)
	// AveragePool counting pads, ceil_mode window past the end padding:
	// the width split is not claimed, and would be wrong.
	if _, ok := res.Along(avg.Def, 3); ok {
		t.Errorf("AveragePool count_include_pad with a ceil_mode overhang: width split claimed")
	}
	if _, ok := res.Along(avg.Def, 2); !ok {
		t.Errorf("AveragePool: height split (no overhang) not claimed")
	}
	w := whole(avg.Def, 3)
	w.Inputs[0] = InputMap{Dim: 3, Scale: 2, HaloLo: 1, HaloHi: 1, PadLo: 1, PadHi: 2}
	w.Rewrite = RewritePads
	fails("AveragePool width", avg.Def, w)
}

func TestFTRange(t *testing.T) {
	// Conv k=3, stride 2, pads (1, 1) over 9 positions: 5 outputs.
	m := InputMap{Dim: 2, Scale: 2, HaloLo: 1, HaloHi: 1, PadLo: 1, PadHi: 1}
	for _, c := range []struct {
		lo, hi int64
		want   Range
	}{
		{0, 2, Range{Start: 0, End: 4, PadLo: 1}},
		{2, 4, Range{Start: 3, End: 8}},
		{4, 5, Range{Start: 7, End: 9, PadHi: 1}},
		{0, 5, Range{Start: 0, End: 9, PadLo: 1, PadHi: 1}},
	} {
		if got := m.Range(c.lo, c.hi, 9); got != c.want {
			t.Errorf("[%d,%d): %+v, want %+v", c.lo, c.hi, got, c.want)
		}
	}
	// Ceil mode, window running past the end padding: the pad is clamped.
	m = InputMap{Dim: 3, Scale: 2, HaloLo: 0, HaloHi: 2, PadLo: 0, PadHi: 0}
	if got := m.Range(4, 5, 10); got != (Range{Start: 8, End: 10}) {
		t.Errorf("ceil-mode tail: %+v", got)
	}
	if got := (InputMap{Dim: -1}).Range(1, 2, 7); got != (Range{Start: 0, End: 7}) {
		t.Errorf("whole: %+v", got)
	}
}

// ---- golden ----

func ftConvBlock(t *testing.T) *ir.Model {
	rng := rand.New(rand.NewPCG(7, 8))
	b := New(t)
	x := b.Input("x", ir.Float, 2, 3, 16, 16)
	f := func(n string, dims ...int64) *ir.Value {
		c := int64(1)
		for _, d := range dims {
			c *= d
		}
		v := make([]float64, c)
		for i := range v {
			v[i] = rng.Float64()
		}
		return b.Init(n, ir.TensorFromFloat64s(ir.Float, ir.Shape(dims), v))
	}
	c := b.Op("Conv", V(x, f("conv.w", 8, 3, 3, 3), f("conv.b", 8)), Ints("pads", 1, 1, 1, 1))
	bn := b.OpN("BatchNormalization", 3, V(c, f("bn.scale", 8), f("bn.bias", 8), f("bn.mean", 8), f("bn.var", 8)),
		Int("training_mode", 1), Float("epsilon", 1e-5), Float("momentum", 0.9))
	r := b.Op("Relu", V(bn[0]))
	p := b.Op("MaxPool", V(r), Ints("kernel_shape", 2, 2), Ints("strides", 2, 2))
	return b.Return(p, bn[1], bn[2])
}

func ftAttentionBlock(t *testing.T) *ir.Model {
	rng := rand.New(rand.NewPCG(9, 10))
	b := New(t)
	const B, S, H, NH = 2, 6, 16, 4
	x := b.Input("x", ir.Float, B, S, H)
	f := func(n string, dims ...int64) *ir.Value {
		c := int64(1)
		for _, d := range dims {
			c *= d
		}
		v := make([]float64, c)
		for i := range v {
			v[i] = rng.Float64() - 0.5
		}
		return b.Init(n, ir.TensorFromFloat64s(ir.Float, ir.Shape(dims), v))
	}
	heads := b.Ints("heads_shape", B, S, NH, H/NH)
	proj := func(n string) *ir.Value {
		mm := b.Op("MatMul", V(x, f(n+".w", H, H)))
		a := b.Op("Add", V(mm, f(n+".b", H)))
		return b.Op("Reshape", V(a, heads))
	}
	q := b.Op("Transpose", V(proj("q")), Ints("perm", 0, 2, 1, 3))
	k := b.Op("Transpose", V(proj("k")), Ints("perm", 0, 2, 3, 1))
	v := b.Op("Transpose", V(proj("v")), Ints("perm", 0, 2, 1, 3))
	s := b.Op("MatMul", V(q, k))
	s = b.Op("Div", V(s, b.Init("scale", ir.TensorFromFloat64s(ir.Float, ir.Shape{}, []float64{2}))))
	p := b.Op("Softmax", V(s), Int("axis", -1))
	d := b.OpN("Dropout", 2, V(p, b.Init("ratio", ir.TensorFromFloat64s(ir.Float, ir.Shape{}, []float64{0.1})),
		b.Init("training", ir.TensorFromInt64s(ir.Bool, ir.Shape{}, []int64{1}))))
	c := b.Op("MatMul", V(d[0], v))
	c = b.Op("Transpose", V(c), Ints("perm", 0, 2, 1, 3))
	c = b.Op("Reshape", V(c, b.Ints("hidden_shape", B, S, H)))
	o := b.Op("MatMul", V(c, f("o.w", H, H)))
	o = b.Op("Add", V(o, f("o.b", H)))
	o = b.Op("Add", V(o, x))
	ln := b.Op("LayerNormalization", V(o, f("ln.scale", H), f("ln.bias", H)), Int("axis", -1))
	return b.Return(ln)
}

func TestFTCompatGolden(t *testing.T) {
	for _, c := range []struct {
		name  string
		build func(t *testing.T) *ir.Model
	}{
		{"conv_block", ftConvBlock},
		{"attention", ftAttentionBlock},
		{"resnet18-small", func(t *testing.T) *ir.Model {
			m, err := compiler.Import("../testdata/onnx/resnet18-small.onnx", compiler.Options{Batch: 2})
			if err != nil {
				t.Fatal(err)
			}
			return m
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := c.build(t)
			res := ftRun(t, m)
			var buf bytes.Buffer
			if err := res.Dump(&buf, m.Graph); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("..", "testdata", "passes", "ftcompat", c.name+".golden")
			if ftUpdate() {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test ./passes -run FTCompat -update)", err)
			}
			if got := buf.String(); got != string(want) {
				gl, wl := strings.Split(got, "\n"), strings.Split(string(want), "\n")
				for i := 0; i < max(len(gl), len(wl)); i++ {
					var g, w string
					if i < len(gl) {
						g = gl[i]
					}
					if i < len(wl) {
						w = wl[i]
					}
					if g != w {
						t.Fatalf("%s differs at line %d:\ngot:  %s\nwant: %s", path, i+1, g, w)
					}
				}
			}
			if c.name != "resnet18-small" {
				// The golden graphs' splits hold too.
				feeds := ftFeeds(m, rand.New(rand.NewPCG(11, 12)), nil)
				ftCheckSplits(t, m, res, feeds, 1e-5, []int{2, 3, 0})
			}
		})
	}
}
