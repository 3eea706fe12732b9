package kernels

import (
	"fmt"

	"github.com/tsplit/tsplit/ir"
	ownblas "github.com/tsplit/tsplit/kernels/internal/sgemm"
)

// Conv: im2col + GEMM. Group-1 convolutions multiply the weights by the
// column matrices of a group of images at once (nn_conv_batch.go: a
// small output per image would make poor products), and where package
// sgemm computes float32 products the column matrix is packed straight
// from the image, never written out (nn_conv_implicit.go). Otherwise,
// and for grouped convolutions, one image and one group at a time. The
// GEMM's inner dimension K = (C/group)·prod(kernel) (the im2col rows) is
// cut into blocks of at most kb rows (nnBlock under nnDefaultCap,
// nn_generic.go): im2col builds one block, kb × prod(output spatial)
// floats, and the GEMM accumulates it into the output (beta = 1 after the
// first block). That block is the scratch (Kernel.Workspace), independent
// of the batch and bounded even where K is huge, as in the weight
// gradients autodiff emits (a Conv whose "kernel" is dY, K = N·prod(dY
// spatial)). Two cases need no scratch: a 1×1, stride-1, unpadded
// convolution multiplies the input directly, and a depthwise-style one
// (one input channel per group, group > 1) is computed by direct loops.

func init() {
	nnReg("Conv", 2, 1, convKernel(nnDefaultCap), nil)
}

// convKernel is Conv's kernel with its scratch bounded by bound.
func convKernel(bound nnScratchCap) Kernel {
	return Kernel{
		Run:       func(c *Ctx) error { return runConv(c, bound) },
		Workspace: func(op *ir.Op) int64 { return convWorkspace(op, bound) },
	}
}

// convPlan is everything Conv's Run and Workspace derive from the op.
type convPlan struct {
	g              nnGeom
	n, c, m, group int
	cg, mg         int  // input and output channels per group
	direct         bool // one input channel per group: direct loops
	noCol          bool // 1×1 identity window: the input is its own column matrix
	kb             int  // im2col rows per block (0 with direct or noCol)
}

func planConv(op *ir.Op, bound nnScratchCap) (*convPlan, error) {
	x, w, y := op.Input(0), op.Input(1), op.Output(0)
	if x == nil || w == nil || y == nil || len(w.Shape) != len(x.Shape) || len(x.Shape) < 3 {
		return nil, fmt.Errorf("%s: Conv needs X (N, C, D...) and W (M, C/group, k...)", op.Describe())
	}
	g, err := nnWindowGeom(op, w.Shape[2:])
	if err != nil {
		return nil, err
	}
	p := &convPlan{g: g, n: int(x.Shape[0]), c: int(x.Shape[1]), m: int(w.Shape[0]), group: int(op.AttrInt("group", 1))}
	if p.group <= 0 || p.c%p.group != 0 || p.m%p.group != 0 || int(w.Shape[1])*p.group != p.c {
		return nil, fmt.Errorf("%s: channels %d, filters %v and group %d do not fit", op.Describe(), p.c, w.Shape, p.group)
	}
	p.cg, p.mg = p.c/p.group, p.m/p.group
	p.direct = p.cg == 1 && p.group > 1
	p.noCol = !p.direct && g.unit()
	if !p.direct && !p.noCol {
		es, outVol := nnESize(op), int64(g.outVol())
		p.kb = nnBlock(p.cg*g.kVol(), es*outVol, bound(es*int64(p.mg)*outVol))
	}
	return p, nil
}

// colFloats is the size of one block of the column matrix (0 when none).
func (p *convPlan) colFloats() int { return p.kb * p.g.outVol() }

func convWorkspace(op *ir.Op, bound nnScratchCap) int64 {
	p, err := planConv(op, bound)
	if err != nil {
		return 0
	}
	return nnESize(op) * int64(p.colFloats())
}

func runConv(c *Ctx, bound nnScratchCap) error {
	p, err := planConv(c.Op, bound)
	if err != nil {
		return err
	}
	return nnFloat(c).conv(c, p)
}

func (floatK[T]) conv(c *Ctx, p *convPlan) error {
	x, w, y := viewAs[T](c.In[0]), viewAs[T](c.In[1]), viewAs[T](c.Out[0])
	var bias []T
	if len(c.In) > 2 && c.In[2] != nil {
		bias = viewAs[T](c.In[2])
	}
	g := &p.g
	inVol, outVol, kVol := g.inVol(), g.outVol(), g.kVol()
	if len(y) == 0 {
		return nil
	}
	if p.direct {
		convDirect(p, x, w, bias, y)
		return nil
	}
	kg := p.cg * kVol // GEMM inner dimension
	var col []T
	if !p.noCol {
		es := int(nnESize(c.Op))
		need := p.colFloats()
		if len(c.Workspace) < es*need {
			return c.Errorf("workspace has %d bytes, Conv needs %d", len(c.Workspace), es*need)
		}
		col = viewAs[T](&Tensor{Data: c.Workspace[:es*need]})
		if p.group == 1 && nnIs32[T]() && ownblas.Enabled {
			ic := implicitConv{g: p.g, n: p.n, c: p.c, m: p.m, a: ownblas.Operand{Data: nnAs[float32](w), Stride: kg}}
			ic.run(nnAs[float32](x), nnAs[float32](y), nnAs[float32](col))
			if bias != nil {
				addChannelBias(y, bias, p.n, p.m, outVol)
			}
			return nil
		}
		if p.group == 1 {
			convBatched(p, x, w, y, col)
			if bias != nil {
				addChannelBias(y, bias, p.n, p.m, outVol)
			}
			return nil
		}
	}
	for n := 0; n < p.n; n++ {
		for gi := 0; gi < p.group; gi++ {
			xg := x[(n*p.c+gi*p.cg)*inVol:][:p.cg*inVol]
			wg := w[gi*p.mg*kg:][:p.mg*kg]
			yg := y[(n*p.m+gi*p.mg)*outVol:][:p.mg*outVol]
			if p.noCol {
				nnGemm(false, false, p.mg, outVol, kg, 1, wg, kg, xg, outVol, 0, yg, outVol)
				continue
			}
			// Y = Σ over row blocks [r0, r1) of W[:, r0:r1]·col[r0:r1, :].
			var beta T
			for r0 := 0; r0 < kg; r0 += p.kb {
				r1 := min(r0+p.kb, kg)
				im2col(g, xg, 0, 1, r0, r1, col, outVol)
				nnGemm(false, false, p.mg, outVol, r1-r0, 1, wg[r0:], kg, col, outVol, beta, yg, outVol)
				beta = 1
			}
		}
	}
	if bias != nil {
		addChannelBias(y, bias, p.n, p.m, outVol)
	}
	return nil
}

// addChannelBias adds bias[ch] to every element of channel ch of an
// (n, m, vol) tensor.
func addChannelBias[T elemFloat](y, bias []T, n, m, vol int) {
	Parallel(n*m, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			b := bias[i%m]
			row := y[i*vol : (i+1)*vol]
			for j := range row {
				row[j] += b
			}
		}
	})
}

// im2col writes rows [r0, r1) of the column matrices of images [0, imgs)
// of x (image i at x[i·imgStride:], channels of g.in) into col: row r of
// image i at col[(r-r0)·ld + i·P:], P = g.outVol(). Row (c, kd, kh, kw)
// holds, for every output position, the input element that kernel tap
// meets there (zero in the padding).
func im2col[T elemFloat](g *nnGeom, x []T, imgStride, imgs, r0, r1 int, col []T, ld int) {
	kVol, inVol, outVol := g.kVol(), g.inVol(), g.outVol()
	OD, OH, OW := g.out[0], g.out[1], g.out[2]
	ID, IH, IW := g.in[0], g.in[1], g.in[2]
	parRange((r1-r0)*imgs, outVol, func(lo, hi int) {
		for it := lo; it < hi; it++ {
			r, img := r0+it/imgs, it%imgs
			ci, t := r/kVol, r%kVol
			kd, kh, kw := t/(g.k[1]*g.k[2]), t/g.k[2]%g.k[1], t%g.k[2]
			xc := x[img*imgStride+ci*inVol:][:inVol]
			dst := col[(r-r0)*ld+img*outVol:][:outVol]
			offW := kw*g.d[2] - g.pb[2]
			wlo, whi := nnRange(offW, g.s[2], IW, OW)
			sw := g.s[2]
			for od := 0; od < OD; od++ {
				id := od*g.s[0] - g.pb[0] + kd*g.d[0]
				for oh := 0; oh < OH; oh++ {
					ih := oh*g.s[1] - g.pb[1] + kh*g.d[1]
					row := dst[(od*OH+oh)*OW : (od*OH+oh+1)*OW]
					if id < 0 || id >= ID || ih < 0 || ih >= IH || wlo >= whi {
						clear(row)
						continue
					}
					src := xc[(id*IH+ih)*IW:]
					clear(row[:wlo])
					if sw == 1 {
						copy(row[wlo:whi], src[wlo+offW:whi+offW])
					} else {
						iw := wlo*sw + offW
						for ow := wlo; ow < whi; ow++ {
							row[ow] = src[iw]
							iw += sw
						}
					}
					clear(row[whi:])
				}
			}
		}
	})
}

// convDirect computes a convolution with one input channel per group
// (depthwise, possibly with a channel multiplier) by direct loops,
// parallel over (image, output channel).
func convDirect[T elemFloat](p *convPlan, x, w, bias, y []T) {
	g := &p.g
	kVol, inVol, outVol := g.kVol(), g.inVol(), g.outVol()
	OD, OH, OW := g.out[0], g.out[1], g.out[2]
	ID, IH, IW := g.in[0], g.in[1], g.in[2]
	sw := g.s[2]
	Parallel(p.n*p.m, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			n, m := i/p.m, i%p.m
			xc := x[(n*p.c+m/p.mg)*inVol:][:inVol] // cg == 1: channel m/mg
			yc := y[i*outVol : (i+1)*outVol]
			var b T
			if bias != nil {
				b = bias[m]
			}
			for j := range yc {
				yc[j] = b
			}
			wm := w[m*kVol : (m+1)*kVol]
			for t, wv := range wm {
				kd, kh, kw := t/(g.k[1]*g.k[2]), t/g.k[2]%g.k[1], t%g.k[2]
				offW := kw*g.d[2] - g.pb[2]
				wlo, whi := nnRange(offW, sw, IW, OW)
				if wlo >= whi {
					continue
				}
				for od := 0; od < OD; od++ {
					id := od*g.s[0] - g.pb[0] + kd*g.d[0]
					if id < 0 || id >= ID {
						continue
					}
					for oh := 0; oh < OH; oh++ {
						ih := oh*g.s[1] - g.pb[1] + kh*g.d[1]
						if ih < 0 || ih >= IH {
							continue
						}
						src := xc[(id*IH+ih)*IW:][:IW]
						row := yc[(od*OH+oh)*OW:][:OW]
						if sw == 1 {
							s := src[wlo+offW : whi+offW]
							r := row[wlo:whi]
							for j := range r {
								r[j] += wv * s[j]
							}
						} else {
							iw := wlo*sw + offW
							for ow := wlo; ow < whi; ow++ {
								row[ow] += wv * src[iw]
								iw += sw
							}
						}
					}
				}
			}
		}
	})
}
