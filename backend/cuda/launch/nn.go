package launch

import (
	"encoding/binary"

	"github.com/tsplit/tsplit/ir"
	"github.com/tsplit/tsplit/kernels"
)

// ---- reductions and normalisation ----

var reduceModes = map[string]int64{"ReduceSum": 0, "ReduceMean": 1, "ReduceMax": 2, "ReduceMin": 3, "ReduceSumSquare": 4}

// axesInput is the opset from which a reduction reads its axes from
// input 1 instead of the axes attribute.
func axesInput(typ string) int64 {
	if typ == "ReduceSum" {
		return 13
	}
	return 18
}

// reduceKernel reduces x over the axes marked in red into y.
func reduceKernel(o *Op, mode int64, x, y *Tensor, red []bool) ([]Step, error) {
	if len(x.Shape) > MaxR {
		return nil, o.errorf("rank %d is over %d", len(x.Shape), MaxR)
	}
	k := kernel("ts_reduce_f32", numel(y.Shape))
	k.Args.P[0], k.Args.P[1] = y.Addr, x.Addr
	k.Args.I[0] = mode
	xs := x.Shape.Strides()
	var nk, nr int64
	for d, r := range red {
		if r {
			k.Args.I[19+nr], k.Args.I[27+nr] = x.Shape[d], xs[d]
			nr++
		} else {
			k.Args.I[2+nk], k.Args.I[10+nk] = x.Shape[d], xs[d]
			nk++
		}
	}
	k.Args.I[1], k.Args.I[18] = nk, nr
	nOut, cnt := k.Args.N, numel(x.Shape)/max(1, numel(y.Shape))
	parts := reduceParts(nOut, cnt, o.ScratchBytes)
	if parts < 2 {
		return one(k), nil
	}
	k.Args.N = nOut * parts
	k.Args.P[2], k.Args.I[35] = o.Scratch, parts
	m := kernel("ts_reduce_merge_f32", nOut)
	m.Args.P[0], m.Args.P[1] = y.Addr, o.Scratch
	m.Args.I[0], m.Args.I[1], m.Args.I[2] = mode, parts, cnt
	return []Step{{Kernel: k}, {Kernel: m}}, nil
}

// Split reductions: each part reduces about reducePart elements, and
// the parts of all outputs make at most reduceThreads work items (an
// H100 runs 270 336 threads at once).
const (
	reducePart    = 256
	reduceThreads = 1 << 18
)

// reduceParts is how many parts each of nOut outputs, reducing cnt
// elements each, is split into (ts_reduce_f32's split form): 1 when
// one thread per output already fills the GPU, the reduction is short,
// or there is no scratch for the partials (8 bytes each).
func reduceParts(nOut, cnt, scratchBytes int64) int64 {
	if nOut <= 0 || nOut >= reduceThreads/8 || cnt < 2*reducePart {
		return 1
	}
	parts := min((cnt+reducePart-1)/reducePart, reduceThreads/nOut, scratchBytes/(8*nOut))
	return max(parts, 1)
}

func reducePlan(mode int64) func(*Op) ([]Step, error) {
	return func(o *Op) ([]Step, error) {
		x, y := o.in(0), o.out(0)
		if x.DType != ir.Float {
			return nil, o.errorf("the kernel is float32 only")
		}
		axes := o.Op.AttrInts("axes", nil)
		if o.Opset >= axesInput(o.Op.Type) {
			var err error
			if axes, _, err = o.hostInts(1); err != nil {
				return nil, err
			}
		}
		red := make([]bool, len(x.Shape))
		if len(axes) == 0 {
			if o.Op.AttrInt("noop_with_empty_axes", 0) == 1 {
				return copyFlat(x, y), nil
			}
			for d := range red {
				red[d] = true
			}
		}
		for _, a := range axes {
			d, err := normAxis(o, a, len(x.Shape))
			if err != nil {
				return nil, err
			}
			red[d] = true
		}
		return reduceKernel(o, mode, x, y, red)
	}
}

func globalPoolPlan(mode int64) func(*Op) ([]Step, error) {
	return func(o *Op) ([]Step, error) {
		x, y := o.in(0), o.out(0)
		if x.DType != ir.Float || len(x.Shape) < 2 {
			return nil, o.errorf("needs float32 (N, C, ...)")
		}
		red := make([]bool, len(x.Shape))
		for d := 2; d < len(red); d++ {
			red[d] = true
		}
		return reduceKernel(o, mode, x, y, red)
	}
}

func softmaxPlan(log bool) func(*Op) ([]Step, error) {
	return func(o *Op) ([]Step, error) {
		x, y := o.in(0), o.out(0)
		if x.DType != ir.Float {
			return nil, o.errorf("the kernel is float32 only")
		}
		r := len(x.Shape)
		def := int64(-1)
		if o.Opset < 13 {
			def = 1
		}
		ax, err := normAxis(o, o.Op.AttrInt("axis", def), r)
		if err != nil {
			return nil, err
		}
		outer, n, inner := numel(x.Shape[:ax]), x.Shape[ax], numel(x.Shape[ax+1:])
		if o.Opset < 13 { // coerced to 2-D at axis
			n, inner = numel(x.Shape[ax:]), 1
		}
		k := kernel("ts_softmax_f32", outer*inner)
		k.Args.P[0], k.Args.P[1] = y.Addr, x.Addr
		k.Args.I[0], k.Args.I[1] = n, inner
		if log {
			k.Args.I[2] = 1
		}
		return one(k), nil
	}
}

func planLayerNorm(o *Op) ([]Step, error) {
	x, y := o.in(0), o.out(0)
	if x.DType != ir.Float {
		return nil, o.errorf("the kernel is float32 only")
	}
	ax, err := normAxis(o, o.Op.AttrInt("axis", -1), len(x.Shape))
	if err != nil {
		return nil, err
	}
	inner := numel(x.Shape[ax:])
	k := kernel("ts_layernorm_f32", numel(x.Shape[:ax]))
	k.Args.P[0], k.Args.P[1] = y.Addr, x.Addr
	for j := 1; j <= 2; j++ {
		if t := o.in(j); t != nil {
			if numel(t.Shape) != inner || t.DType != ir.Float {
				return nil, o.errorf("input %d %v%v is not one float32 per normalised element (%d)", j, t.DType, t.Shape, inner)
			}
			k.Args.P[1+j] = t.Addr
		}
	}
	for j := 1; j <= 2; j++ {
		if t := o.out(j); t != nil {
			if t.DType != ir.Float {
				return nil, o.errorf("statistics output %d is %v, want float32", j, t.DType)
			}
			k.Args.P[3+j] = t.Addr
		}
	}
	k.Args.I[0] = inner
	k.Args.F[0] = float64(o.Op.AttrFloat("epsilon", 1e-5))
	return one(k), nil
}

func planBatchNorm(o *Op) ([]Step, error) {
	x, y := o.in(0), o.out(0)
	if x.DType != ir.Float || len(x.Shape) < 2 {
		return nil, o.errorf("needs float32 (N, C, ...)")
	}
	k := kernel("ts_batchnorm_f32", x.Shape[1])
	k.Args.P[0], k.Args.P[1] = y.Addr, x.Addr
	for j := 1; j <= 4; j++ {
		t := o.in(j)
		if t == nil || t.DType != ir.Float {
			return nil, o.errorf("input %d must be float32", j)
		}
		k.Args.P[1+j] = t.Addr
	}
	for j := 1; j <= 4; j++ {
		if t := o.out(j); t != nil {
			k.Args.P[5+j] = t.Addr
		}
	}
	k.Args.I[0], k.Args.I[1], k.Args.I[2] = x.Shape[0], x.Shape[1], numel(x.Shape[2:])
	if ir.BatchNormTraining(o.Op) {
		k.Args.I[3] = 1
	}
	k.Args.F[0] = float64(o.Op.AttrFloat("epsilon", 1e-5))
	k.Args.F[1] = float64(o.Op.AttrFloat("momentum", 0.9))
	// Split: per-channel partial statistics, their merge, then y one
	// element per thread (ts_batchnorm_f32's comment). The scratch holds
	// two partials per part and channel plus two doubles per channel.
	ch, per := x.Shape[1], x.Shape[0]*numel(x.Shape[2:])
	parts := reduceParts(ch, per, o.ScratchBytes-16*ch) / 2
	if parts < 2 {
		return one(k), nil
	}
	sums, sq, ab := o.Scratch, o.Scratch+uint64(8*ch*parts), o.Scratch+uint64(16*ch*parts)
	var steps []Step
	if k.Args.I[3] == 1 {
		for _, pass := range []struct{ out, sums uint64 }{{sums, 0}, {sq, sums}} {
			pk := kernel("ts_bn_partial", ch*parts)
			pk.Args.P[0], pk.Args.P[1], pk.Args.P[2] = pass.out, x.Addr, pass.sums
			pk.Args.I[0], pk.Args.I[1], pk.Args.I[2], pk.Args.I[3] = x.Shape[0], ch, numel(x.Shape[2:]), parts
			steps = append(steps, Step{Kernel: pk})
		}
	}
	k.Args.I[4], k.Args.I[5], k.Args.I[6], k.Args.I[7] = parts, int64(sums), int64(sq), int64(ab)
	ap := kernel("ts_bn_apply", numel(x.Shape))
	ap.Args.P[0], ap.Args.P[1], ap.Args.P[2] = y.Addr, x.Addr, ab
	ap.Args.I[0], ap.Args.I[1] = ch, numel(x.Shape[2:])
	return append(steps, Step{Kernel: k}, Step{Kernel: ap}), nil
}

// ---- windows ----

// geometry is a window op's spatial layout, up to three dims with
// leading ones (ts.h's window layout).
type geometry struct {
	in, out, k, s, pb, pe, d [3]int64
}

func (g *geometry) put(a *Args) {
	for j := 0; j < 3; j++ {
		a.I[1+j], a.I[4+j], a.I[7+j], a.I[10+j] = g.in[j], g.out[j], g.k[j], g.s[j]
		a.I[13+j], a.I[16+j], a.I[19+j] = g.pb[j], g.pe[j], g.d[j]
	}
}

func (g *geometry) inVol() int64  { return g.in[0] * g.in[1] * g.in[2] }
func (g *geometry) outVol() int64 { return g.out[0] * g.out[1] * g.out[2] }
func (g *geometry) kVol() int64   { return g.k[0] * g.k[1] * g.k[2] }

// unit is a 1×1, stride-1, unpadded window: the input is its own column
// matrix.
func (g *geometry) unit() bool {
	for j := 0; j < 3; j++ {
		if g.k[j] != 1 || g.s[j] != 1 || g.pb[j] != 0 || g.pe[j] != 0 || g.in[j] != g.out[j] {
			return false
		}
	}
	return true
}

// windowGeometry reads kernel, strides, dilations and pads (or
// auto_pad) of a Conv or pool; in and out are the spatial dims of the
// input and of the (inferred) output.
func windowGeometry(o *Op, in, out, kernel ir.Shape) (geometry, error) {
	var g geometry
	n := len(in)
	if n < 1 || n > 3 || len(out) != n || len(kernel) != n {
		return g, o.errorf("%d spatial dims, the kernels take 1 to 3", n)
	}
	st := o.Op.AttrInts("strides", nil)
	dil := o.Op.AttrInts("dilations", nil)
	pads := o.Op.AttrInts("pads", nil)
	if st != nil && len(st) != n || dil != nil && len(dil) != n || pads != nil && len(pads) != 2*n {
		return g, o.errorf("strides %v, dilations %v or pads %v do not match %d spatial dims", st, dil, pads, n)
	}
	off := 3 - n
	for j := 0; j < 3; j++ {
		g.in[j], g.out[j], g.k[j], g.s[j], g.d[j] = 1, 1, 1, 1, 1
	}
	for j := 0; j < n; j++ {
		g.in[off+j], g.out[off+j], g.k[off+j] = in[j], out[j], kernel[j]
		if st != nil {
			g.s[off+j] = st[j]
		}
		if dil != nil {
			g.d[off+j] = dil[j]
		}
		if pads != nil {
			g.pb[off+j], g.pe[off+j] = pads[j], pads[j+n]
		}
	}
	switch ap := o.Op.AttrString("auto_pad", "NOTSET"); ap {
	case "NOTSET", "":
	case "VALID":
		g.pb, g.pe = [3]int64{}, [3]int64{}
	case "SAME_UPPER", "SAME_LOWER":
		for j := off; j < 3; j++ {
			ek := (g.k[j]-1)*g.d[j] + 1
			total := max(0, (g.out[j]-1)*g.s[j]+ek-g.in[j])
			small := total / 2
			if ap == "SAME_UPPER" {
				g.pb[j], g.pe[j] = small, total-small
			} else {
				g.pb[j], g.pe[j] = total-small, small
			}
		}
	default:
		return g, o.errorf("auto_pad %q is not supported", ap)
	}
	return g, nil
}

func poolPlan(mode int64) func(*Op) ([]Step, error) {
	return func(o *Op) ([]Step, error) {
		x, y := o.in(0), o.out(0)
		if x.DType != ir.Float || len(x.Shape) < 3 {
			return nil, o.errorf("needs float32 (N, C, spatial...)")
		}
		if o.Op.AttrInt("storage_order", 0) != 0 {
			return nil, o.errorf("storage_order 1 has no kernel")
		}
		g, err := windowGeometry(o, x.Shape[2:], y.Shape[2:], o.Op.AttrInts("kernel_shape", nil))
		if err != nil {
			return nil, err
		}
		k := kernel("ts_pool_f32", numel(y.Shape))
		k.Args.P[0], k.Args.P[1] = y.Addr, x.Addr
		if idx := o.out(1); idx != nil {
			k.Args.P[2] = idx.Addr
		}
		k.Args.I[0] = mode
		g.put(&k.Args)
		k.Args.I[22] = o.Op.AttrInt("count_include_pad", 0)
		return one(k), nil
	}
}

// convShapes checks Conv's and ConvTranspose's operands.
func convShapes(o *Op) (x, w, y *Tensor, grp int64, err error) {
	x, w, y = o.in(0), o.in(1), o.out(0)
	if x == nil || w == nil || x.DType != ir.Float || w.DType != ir.Float || len(x.Shape) < 3 || len(w.Shape) != len(x.Shape) {
		return nil, nil, nil, 0, o.errorf("needs float32 X (N, C, spatial...) and W of the same rank")
	}
	grp = o.Op.AttrInt("group", 1)
	if grp < 1 || x.Shape[1]%grp != 0 || y.Shape[1]%grp != 0 {
		return nil, nil, nil, 0, o.errorf("group %d does not divide the channels", grp)
	}
	return x, w, y, grp, nil
}

func planConv(o *Op) ([]Step, error) {
	x, w, y, grp, err := convShapes(o)
	if err != nil {
		return nil, err
	}
	g, err := windowGeometry(o, x.Shape[2:], y.Shape[2:], w.Shape[2:])
	if err != nil {
		return nil, err
	}
	n, c, m := x.Shape[0], x.Shape[1], y.Shape[1]
	cg, mg := c/grp, m/grp
	if w.Shape[1] != cg {
		return nil, o.errorf("W %v does not have %d channels per group", w.Shape, cg)
	}
	bias := o.in(2)
	kk, outVol, inVol := cg*g.kVol(), g.outVol(), g.inVol()
	kb := o.WorkspaceBytes / (4 * outVol)
	// A grouped convolution of few outputs over long sums (a depthwise
	// convolution's weight gradient: one group per channel, each with
	// the images as its channels) would be a pair of launches per group
	// on the im2col path; the direct kernel, split, is two launches.
	longSums := grp > 1 && reduceParts(numel(y.Shape), kk, o.ScratchBytes) > 1
	if !g.unit() && (kb < 1 || cg == 1 && grp > 1 || longSums) {
		// depthwise, long grouped sums, or no room for an im2col block:
		// direct loops
		k := kernel("ts_conv_f32", numel(y.Shape))
		k.Args.P[0], k.Args.P[1], k.Args.P[2] = y.Addr, x.Addr, w.Addr
		if bias != nil {
			k.Args.P[3] = bias.Addr
		}
		g.put(&k.Args)
		k.Args.I[24], k.Args.I[25], k.Args.I[26], k.Args.I[27] = n, c, m, grp
		nOut := k.Args.N
		parts := reduceParts(nOut, kk, o.ScratchBytes)
		if parts < 2 {
			return one(k), nil
		}
		// split: ts_conv_f32's comment; the parts summed as a reduction's
		k.Args.N, k.Args.P[4], k.Args.I[28] = nOut*parts, o.Scratch, parts
		mk := kernel("ts_reduce_merge_f32", nOut)
		mk.Args.P[0], mk.Args.P[1] = y.Addr, o.Scratch
		mk.Args.I[1], mk.Args.I[2] = parts, kk
		return []Step{{Kernel: k}, {Kernel: mk}}, nil
	}
	var steps []Step
	for gi := int64(0); gi < grp; gi++ {
		wAddr := w.Addr + uint64(4*gi*mg*kk)
		if g.unit() {
			// Y[n, group] (mg × outVol) = W_g (mg × cg) · X[n, group] (cg × outVol), all images at once
			steps = append(steps, Step{Gemm: &Gemm{M: mg, N: outVol, K: cg, Alpha: 1,
				A: wAddr, LDA: kk, B: x.Addr + uint64(4*gi*cg*inVol), LDB: outVol,
				C: y.Addr + uint64(4*gi*mg*outVol), LDC: outVol,
				Batch: n, StrideB: c * inVol, StrideC: m * outVol}})
			continue
		}
		kb := min(kb, kk)
		// Several images at once where the scratch holds their whole
		// column matrices: a convolution's weight gradient is a
		// convolution whose images are the input's channels (hundreds)
		// and whose outputs are the k·k taps, so one im2col and one
		// thin GEMM per image was most of a ResNet's GPU step.
		// Not for very long sums: cuBLAS splits a lone product's K
		// across the GPU but not a batched one's, and ResNet-18's first
		// weight gradients at 224² and batch 32 (K = 100 352, N = 9)
		// took 2.7× longer batched (docs/cuda.md).
		nb := o.ScratchBytes / (4 * kk * outVol)
		if kk > batchedMaxK {
			nb = 0
		}
		for ni := int64(0); nb >= 2 && ni < n; ni += nb {
			nj := min(nb, n-ni)
			ic := kernel("ts_im2col_f32", nj*kk*outVol)
			ic.Args.P[0], ic.Args.P[1] = o.Scratch, x.Addr+uint64(4*(ni*c+gi*cg)*inVol)
			g.put(&ic.Args)
			ic.Args.I[28], ic.Args.I[29], ic.Args.I[31] = 0, kk, c*inVol
			steps = append(steps, Step{Kernel: ic}, Step{Gemm: &Gemm{M: mg, N: outVol, K: kk, Alpha: 1,
				A: wAddr, LDA: kk, B: o.Scratch, LDB: outVol,
				C: y.Addr + uint64(4*(ni*m+gi*mg)*outVol), LDC: outVol,
				Batch: nj, StrideB: kk * outVol, StrideC: m * outVol}})
		}
		for ni := int64(0); nb < 2 && ni < n; ni++ {
			for k0 := int64(0); k0 < kk; k0 += kb {
				rows := min(kb, kk-k0)
				ic := kernel("ts_im2col_f32", rows*outVol)
				ic.Args.P[0], ic.Args.P[1] = o.Workspace, x.Addr+uint64(4*(ni*c+gi*cg)*inVol)
				g.put(&ic.Args)
				ic.Args.I[28], ic.Args.I[29] = k0, rows
				beta := float32(1)
				if k0 == 0 {
					beta = 0
				}
				steps = append(steps, Step{Kernel: ic}, Step{Gemm: &Gemm{M: mg, N: outVol, K: rows, Alpha: 1, Beta: beta,
					A: wAddr + uint64(4*k0), LDA: kk, B: o.Workspace, LDB: outVol,
					C: y.Addr + uint64(4*(ni*m+gi*mg)*outVol), LDC: outVol, Batch: 1}})
			}
		}
	}
	if bias != nil {
		k := kernel("ts_bias_f32", numel(y.Shape))
		k.Args.P[0], k.Args.P[1] = y.Addr, bias.Addr
		k.Args.I[0], k.Args.I[1] = m, outVol
		steps = append(steps, Step{Kernel: k})
	}
	return steps, nil
}

// planConvTranspose runs the direct (gather) kernel; the padding must
// come from the pads attribute (output_shape and auto_pad SAME_* split
// the padding by rules this launch does not reproduce).
func planConvTranspose(o *Op) ([]Step, error) {
	x, w, y, grp, err := convShapes(o)
	if err != nil {
		return nil, err
	}
	if o.Op.Attr("output_shape") != nil || o.Op.AttrString("auto_pad", "NOTSET") != "NOTSET" {
		return nil, o.errorf("ConvTranspose with output_shape or auto_pad has no kernel (pads only)")
	}
	if w.Shape[0] != x.Shape[1] || w.Shape[1]*grp != y.Shape[1] {
		return nil, o.errorf("W %v does not fit %d input and %d output channels in %d groups", w.Shape, x.Shape[1], y.Shape[1], grp)
	}
	g, err := windowGeometry(o, x.Shape[2:], y.Shape[2:], w.Shape[2:])
	if err != nil {
		return nil, err
	}
	if grp == 1 {
		if steps := convTransposeGemm(o, x, w, y, g); steps != nil {
			return steps, nil
		}
	}
	k := kernel("ts_conv_transpose_f32", numel(y.Shape))
	k.Args.P[0], k.Args.P[1], k.Args.P[2] = y.Addr, x.Addr, w.Addr
	if b := o.in(2); b != nil {
		k.Args.P[3] = b.Addr
	}
	g.put(&k.Args)
	k.Args.I[24], k.Args.I[25], k.Args.I[26], k.Args.I[27] = x.Shape[0], x.Shape[1], y.Shape[1], grp
	return one(k), nil
}

// batchedMaxK is the longest sum a batched im2col product takes
// (planConv).
const batchedMaxK = 32 << 10

// convTransposeGemm is an ungrouped ConvTranspose as cuBLAS products
// and a gather (nil when the scratch holds no block): for a block of
// images and output channels, cols = Wᵀ·x (rows (channel, tap), one
// column per input position, all input channels summed by the GEMM),
// then ts_col2im_f32 sums each output element's taps. The direct
// kernel instead makes each thread loop over every input channel and
// tap: a convolution's data gradient at 224² took 0.5 s of a ResNet-18
// step that way (docs/cuda.md).
func convTransposeGemm(o *Op, x, w, y *Tensor, g geometry) []Step {
	n, c, m := x.Shape[0], x.Shape[1], y.Shape[1]
	kVol, inVol, outVol := g.kVol(), g.inVol(), g.outVol()
	per := 4 * kVol * inVol // cols bytes per (image, output channel)
	mb := min(m, o.ScratchBytes/per)
	if mb < 1 {
		return nil
	}
	nb := int64(1)
	if mb == m {
		nb = min(n, o.ScratchBytes/(m*per))
	}
	var bias uint64
	if b := o.in(2); b != nil {
		bias = b.Addr
	}
	var steps []Step
	for n0 := int64(0); n0 < n; n0 += nb {
		nj := min(nb, n-n0)
		for m0 := int64(0); m0 < m; m0 += mb {
			mj := min(mb, m-m0)
			// cols[j] (mj·kVol × inVol) = W[:, m0:m0+mj]ᵀ (mj·kVol × c) · x[n0+j] (c × inVol)
			steps = append(steps, Step{Gemm: &Gemm{TransA: true, M: mj * kVol, N: inVol, K: c, Alpha: 1,
				A: w.Addr + uint64(4*m0*kVol), LDA: m * kVol,
				B: x.Addr + uint64(4*n0*c*inVol), LDB: inVol,
				C: o.Scratch, LDC: inVol,
				Batch: nj, StrideB: c * inVol, StrideC: mj * kVol * inVol}})
			k := kernel("ts_col2im_f32", nj*mj*outVol)
			k.Args.P[0], k.Args.P[1] = y.Addr+uint64(4*(n0*m+m0)*outVol), o.Scratch
			if bias != 0 {
				k.Args.P[3] = bias + uint64(4*m0)
			}
			g.put(&k.Args)
			k.Args.I[24], k.Args.I[25], k.Args.I[26] = m, nj, mj
			steps = append(steps, Step{Kernel: k})
		}
	}
	return steps
}

// ---- matrix products ----

func planGemm(o *Op) ([]Step, error) {
	a, b, y := o.in(0), o.in(1), o.out(0)
	if a.DType != ir.Float || b.DType != ir.Float || len(a.Shape) != 2 || len(b.Shape) != 2 {
		return nil, o.errorf("needs float32 matrices")
	}
	ta, tb := o.Op.AttrInt("transA", 0) != 0, o.Op.AttrInt("transB", 0) != 0
	m, n := y.Shape[0], y.Shape[1]
	kk := a.Shape[1]
	if ta {
		kk = a.Shape[0]
	}
	alpha, beta := o.Op.AttrFloat("alpha", 1), o.Op.AttrFloat("beta", 1)
	var steps []Step
	if c := o.in(2); c != nil && beta != 0 {
		k, err := copyStrided(y.Addr, c.Addr, 4, y.Shape, bcastStrides(c.Shape, y.Shape), y.Shape.Strides(), 0, 0)
		if err != nil {
			return nil, o.errorf("%v", err)
		}
		steps = append(steps, Step{Kernel: k})
	} else {
		beta = 0
	}
	return append(steps, Step{Gemm: &Gemm{TransA: ta, TransB: tb, M: m, N: n, K: kk, Alpha: alpha, Beta: beta,
		A: a.Addr, LDA: a.Shape[1], B: b.Addr, LDB: b.Shape[1], C: y.Addr, LDC: n, Batch: 1}}), nil
}

func planMatMul(o *Op) ([]Step, error) {
	a, b, y := o.in(0), o.in(1), o.out(0)
	if a.DType != ir.Float || b.DType != ir.Float {
		return nil, o.errorf("the kernel is float32 only")
	}
	as, bs := a.Shape, b.Shape
	if len(as) == 1 {
		as = ir.Shape{1, as[0]}
	}
	if len(bs) == 1 {
		bs = ir.Shape{bs[0], 1}
	}
	m, kk, n := as[len(as)-2], as[len(as)-1], bs[len(bs)-1]
	if bs[len(bs)-2] != kk {
		return nil, o.errorf("inner dims %v and %v differ", a.Shape, b.Shape)
	}
	batch, err := ir.Broadcast(as[:len(as)-2], bs[:len(bs)-2])
	if err != nil {
		return nil, o.errorf("%v", err)
	}
	if numel(batch)*m*n != numel(y.Shape) {
		return nil, o.errorf("output %v does not hold %v × %d × %d", y.Shape, batch, m, n)
	}
	sa := bcastStrides(as[:len(as)-2], batch)
	sb := bcastStrides(bs[:len(bs)-2], batch)
	nb := numel(batch)
	offA := func(t int64) int64 { return ts(t, batch, sa) * m * kk }
	offB := func(t int64) int64 { return ts(t, batch, sb) * kk * n }
	// one strided batch when the offsets are arithmetic, else one
	// product per batch element
	arith := true
	for t := int64(0); t < nb && arith; t++ {
		arith = offA(t) == t*offA(min(1, nb-1)) && offB(t) == t*offB(min(1, nb-1))
	}
	if arith {
		var stA, stB int64
		if nb > 1 {
			stA, stB = offA(1), offB(1)
		}
		return []Step{{Gemm: &Gemm{M: m, N: n, K: kk, Alpha: 1, A: a.Addr, LDA: kk, B: b.Addr, LDB: n,
			C: y.Addr, LDC: n, Batch: nb, StrideA: stA, StrideB: stB, StrideC: m * n}}}, nil
	}
	steps := make([]Step, 0, nb)
	for t := int64(0); t < nb; t++ {
		steps = append(steps, Step{Gemm: &Gemm{M: m, N: n, K: kk, Alpha: 1,
			A: a.Addr + uint64(4*offA(t)), LDA: kk, B: b.Addr + uint64(4*offB(t)), LDB: n,
			C: y.Addr + uint64(4*t*m*n), LDC: n, Batch: 1}})
	}
	return steps, nil
}

// ts is ts_offset in Go: the offset of row-major index t over dims.
func ts(t int64, dims, st []int64) int64 {
	var off int64
	for d := len(dims) - 1; d >= 0; d-- {
		off += (t % dims[d]) * st[d]
		t /= dims[d]
	}
	return off
}

// ---- host-computed constants ----

// planHost makes the outputs of ops that do not depend on device data:
// Shape and Size from the shapes, ConstantOfShape (whose output shape is
// known) with a fill, Constant with the reference kernel on the host,
// uploaded.
func planHost(o *Op) ([]Step, error) {
	switch o.Op.Type {
	case "Shape":
		return planShape(o)
	case "Size":
		var b []byte
		b = binary.LittleEndian.AppendUint64(b, uint64(numel(o.in(0).Shape)))
		return []Step{{Upload: &Upload{Dst: o.out(0).Addr, Data: b}}}, nil
	case "ConstantOfShape":
		// filled on the device: computing it on the host and uploading it
		// synchronously took 13 ms for one of ResNet-18's gradient
		// accumulators at batch 32 (100 MB of zeros)
		y := o.out(0)
		es := esize(y.DType)
		var bits uint64
		if a := o.Op.Attr("value"); a != nil && a.Tensor != nil {
			if int64(len(a.Tensor.Raw)) != es || es > 8 {
				return nil, o.errorf("value has %d bytes for one %s", len(a.Tensor.Raw), y.DType)
			}
			bits = littleEndian(a.Tensor.Raw)
		}
		return fill(y.Addr, es, numel(y.Shape), bits), nil
	}
	ins := make([]*kernels.Tensor, len(o.In))
	for j, t := range o.In {
		if t == nil {
			continue
		}
		kt := &kernels.Tensor{DType: t.DType, Shape: t.Shape}
		ins[j] = kt
	}
	outs, err := kernels.EvalOpset(o.Op, o.Opset, ins, 0)
	if err != nil {
		return nil, o.errorf("computing on the host: %v", err)
	}
	var steps []Step
	for j, t := range outs {
		if y := o.out(j); y != nil && t != nil {
			steps = append(steps, Step{Upload: &Upload{Dst: y.Addr, Data: t.Data}})
		}
	}
	return steps, nil
}

// littleEndian reads up to 8 bytes as an unsigned integer.
func littleEndian(b []byte) uint64 {
	var v uint64
	for i := len(b) - 1; i >= 0; i-- {
		v = v<<8 | uint64(b[i])
	}
	return v
}

// planShape uploads the input's dims (start and end: opset 15).
func planShape(o *Op) ([]Step, error) {
	dims := o.in(0).Shape
	r := int64(len(dims))
	clamp := func(v int64) int64 {
		if v < 0 {
			v += r
		}
		return max(0, min(v, r))
	}
	start, end := clamp(o.Op.AttrInt("start", 0)), clamp(o.Op.AttrInt("end", r))
	var b []byte
	for d := start; d < end; d++ {
		b = binary.LittleEndian.AppendUint64(b, uint64(dims[d]))
	}
	if int64(len(b)) != 8*numel(o.out(0).Shape) {
		return nil, o.errorf("output %v does not hold dims %d..%d of %v", o.out(0).Shape, start, end, dims)
	}
	return []Step{{Upload: &Upload{Dst: o.out(0).Addr, Data: b}}}, nil
}
