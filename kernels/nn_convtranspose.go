package kernels

import (
	"fmt"

	"github.com/tsplit/tsplit/ir"
	ownblas "github.com/tsplit/tsplit/kernels/internal/sgemm"
)

// ConvTranspose: GEMM + col2im, one image and one group at a time. For
// group gi the column matrix Wᵍᵀ·Xᵍ, ((M/group)·prod(kernel)) rows ×
// prod(input spatial) columns, is computed a block at a time (nnBlock
// under nnDefaultCap, nn_generic.go): a block of rows when the matrix has
// no more columns than rows, else a block of columns (input pixels), so
// that the operand each block's GEMM reads again (Xᵍ for row blocks, Wᵍ
// for column blocks) is the smaller one. The block is the scratch
// (Kernel.Workspace); col2im scatters it into the output, zeroing each
// output channel in the first block that reaches it and accumulating
// after, parallel over output channels (each channel's rows land only in
// that channel).

func init() {
	nnReg("ConvTranspose", 2, 1, convTransposeKernel(nnDefaultCap), nil)
}

// convTransposeKernel is ConvTranspose's kernel with its scratch bounded
// by bound.
func convTransposeKernel(bound nnScratchCap) Kernel {
	return Kernel{
		Run:       func(c *Ctx) error { return runConvTranspose(c, bound) },
		Workspace: func(op *ir.Op) int64 { return convTransposeWorkspace(op, bound) },
	}
}

type convTPlan struct {
	g              nnGeom // in: X's spatial dims, out: Y's
	n, c, m, group int
	cg, mg         int
	direct         bool // 1×1 identity window: GEMM straight into Y
	rb, pb         int  // column-matrix rows and columns (input pixels) per block (0 when direct)
}

// convTransposePads resolves ConvTranspose's begin/end padding. With
// output_shape or auto_pad SAME_*, the total padding is
// s·(in-1) + output_padding + ek - out (out: output_shape, or in·s for
// SAME_*), split as the ONNX spec says and ONNX Runtime 1.30 does:
// SAME_UPPER puts the odd element at the end, SAME_LOWER and NOTSET (with
// output_shape) at the beginning. Explicit pads are then ignored, as in
// ONNX Runtime.
func convTransposePads(op *ir.Op, in, out, kernel, st, dil []int64) ([]int64, error) {
	n := len(in)
	opad := op.AttrInts("output_padding", nil)
	if opad == nil {
		opad = make([]int64, n)
	}
	if len(opad) != n {
		return nil, fmt.Errorf("%s: output_padding %v does not have %d values", op.Describe(), opad, n)
	}
	ap := op.AttrString("auto_pad", "NOTSET")
	pads := op.AttrInts("pads", nil)
	if pads == nil || ap == "VALID" {
		pads = make([]int64, 2*n)
	} else {
		if len(pads) != 2*n {
			return nil, fmt.Errorf("%s: pads %v does not have %d values", op.Describe(), pads, 2*n)
		}
		pads = append([]int64(nil), pads...)
	}
	hasShape := op.Attr("output_shape") != nil
	same := ap == "SAME_UPPER" || ap == "SAME_LOWER"
	if !hasShape && !same {
		return pads, nil
	}
	for i := 0; i < n; i++ {
		ek := (kernel[i]-1)*dil[i] + 1
		total := max(0, st[i]*(in[i]-1)+opad[i]+ek-out[i])
		if ap == "SAME_UPPER" {
			pads[i], pads[i+n] = total/2, total-total/2
		} else {
			pads[i], pads[i+n] = total-total/2, total/2
		}
	}
	return pads, nil
}

func planConvTranspose(op *ir.Op, bound nnScratchCap) (*convTPlan, error) {
	x, w, y := op.Input(0), op.Input(1), op.Output(0)
	if x == nil || w == nil || y == nil || len(w.Shape) != len(x.Shape) || len(x.Shape) < 3 || len(y.Shape) != len(x.Shape) {
		return nil, fmt.Errorf("%s: ConvTranspose needs X (N, C, D...) and W (C, M/group, k...)", op.Describe())
	}
	in, out, kernel := []int64(x.Shape[2:]), []int64(y.Shape[2:]), []int64(w.Shape[2:])
	st, dil, err := nnSpatialAttrs(op, len(in))
	if err != nil {
		return nil, err
	}
	pads, err := convTransposePads(op, in, out, kernel, st, dil)
	if err != nil {
		return nil, err
	}
	g, err := nnMakeGeom(op, in, out, kernel, st, dil, pads)
	if err != nil {
		return nil, err
	}
	p := &convTPlan{g: g, n: int(x.Shape[0]), c: int(x.Shape[1]), m: int(y.Shape[1]), group: int(op.AttrInt("group", 1))}
	if p.group <= 0 || p.c%p.group != 0 || int(w.Shape[0]) != p.c || int(w.Shape[1])*p.group != p.m {
		return nil, fmt.Errorf("%s: channels %d, weights %v and group %d do not fit", op.Describe(), p.c, w.Shape, p.group)
	}
	p.cg, p.mg = p.c/p.group, p.m/p.group
	p.direct = g.unit()
	if !p.direct {
		es, rows, cols := nnESize(op), p.mg*g.kVol(), g.inVol()
		capBytes := bound(es * int64(p.mg*g.outVol()))
		p.rb, p.pb = rows, cols
		if cols <= rows {
			p.rb = nnBlock(rows, es*int64(cols), capBytes)
		} else {
			p.pb = nnBlock(cols, es*int64(rows), capBytes)
		}
	}
	return p, nil
}

// colFloats is the size of one block of the column matrix (0 when none).
func (p *convTPlan) colFloats() int { return p.rb * p.pb }

func convTransposeWorkspace(op *ir.Op, bound nnScratchCap) int64 {
	p, err := planConvTranspose(op, bound)
	if err != nil {
		return 0
	}
	return nnESize(op) * int64(p.colFloats())
}

func runConvTranspose(c *Ctx, bound nnScratchCap) error {
	p, err := planConvTranspose(c.Op, bound)
	if err != nil {
		return err
	}
	return nnFloat(c).convTranspose(c, p)
}

func (floatK[T]) convTranspose(c *Ctx, p *convTPlan) error {
	x, w, y := viewAs[T](c.In[0]), viewAs[T](c.In[1]), viewAs[T](c.Out[0])
	var bias []T
	if len(c.In) > 2 && c.In[2] != nil {
		bias = viewAs[T](c.In[2])
	}
	if len(y) == 0 {
		return nil
	}
	g := &p.g
	inVol, outVol, kVol := g.inVol(), g.outVol(), g.kVol()
	rows := p.mg * kVol // rows of Wᵍᵀ
	var col []T
	if !p.direct {
		es := int(nnESize(c.Op))
		need := p.colFloats()
		if len(c.Workspace) < es*need {
			return c.Errorf("workspace has %d bytes, ConvTranspose needs %d", len(c.Workspace), es*need)
		}
		col = viewAs[T](&Tensor{Data: c.Workspace[:es*need]})
	}
	if p.group == 1 && !p.direct && g.s == [nnMaxSpatial]int{1, 1, 1} && nnIs32[T]() && ownblas.Enabled {
		// Stride 1: the Conv of X with the flipped kernel (nn_conv_implicit.go).
		cg := *g
		for i := range cg.pb {
			cg.pb[i] = (cg.k[i]-1)*cg.d[i] - g.pb[i]
		}
		ic := implicitConv{g: cg, n: p.n, c: p.c, m: p.m, a: flippedWeights(nnAs[float32](w), p.m, kVol)}
		ic.run(nnAs[float32](x), nnAs[float32](y), nnAs[float32](col))
		if bias != nil {
			addChannelBias(y, bias, p.n, p.m, outVol)
		}
		return nil
	}
	for n := 0; n < p.n; n++ {
		for gi := 0; gi < p.group; gi++ {
			xg := x[(n*p.c+gi*p.cg)*inVol:][:p.cg*inVol]
			wg := w[gi*p.cg*rows:][:p.cg*rows]
			yg := y[(n*p.m+gi*p.mg)*outVol:][:p.mg*outVol]
			if p.direct {
				nnGemm(true, false, rows, inVol, p.cg, 1, wg, rows, xg, inVol, 0, yg, outVol)
				continue
			}
			if inVol == 0 {
				clear(yg)
				continue
			}
			// Block [r0, r1) × [p0, p1) of the column matrix is
			// Wᵍᵀ[r0:r1, :]·Xᵍ[:, p0:p1].
			for r0 := 0; r0 < rows; r0 += p.rb {
				r1 := min(r0+p.rb, rows)
				for p0 := 0; p0 < inVol; p0 += p.pb {
					p1 := min(p0+p.pb, inVol)
					nnGemm(true, false, r1-r0, p1-p0, p.cg, 1, wg[r0:], rows, xg[p0:], inVol, 0, col, p1-p0)
					col2im(g, col, r0, r1, p0, p1, yg)
				}
			}
		}
	}
	if bias != nil {
		addChannelBias(y, bias, p.n, p.m, outVol)
	}
	return nil
}

// col2im adds block [r0, r1) × [p0, p1) of the column matrix, col
// ((r1-r0) × (p1-p0)), into y (the channels of g.out): the entry at row
// (c, kd, kh, kw), column (id, ih, iw) goes to output (id·s - pb + kd·d,
// ...). A channel is zeroed first in the block that holds its first row
// and column 0: the first block to reach it when the blocks go in order.
func col2im[T elemFloat](g *nnGeom, col []T, r0, r1, p0, p1 int, y []T) {
	kVol, outVol := g.kVol(), g.outVol()
	OD, OH, OW := g.out[0], g.out[1], g.out[2]
	IH, IW := g.in[1], g.in[2]
	sw, w := g.s[2], p1-p0
	// Per kernel tap: the offsets it adds to id·s and ih·s, and the
	// input columns [wlo, whi) whose iw·s + offW lands in the output.
	type tap struct{ offD, offH, offW, wlo, whi int }
	taps := make([]tap, kVol)
	for t := range taps {
		kd, kh, kw := t/(g.k[1]*g.k[2]), t/g.k[2]%g.k[1], t%g.k[2]
		tp := tap{offD: kd*g.d[0] - g.pb[0], offH: kh*g.d[1] - g.pb[1], offW: kw*g.d[2] - g.pb[2]}
		tp.wlo, tp.whi = nnRange(tp.offW, sw, OW, IW)
		taps[t] = tp
	}
	// The input rows (id, ih), flattened as ri = id·IH + ih, that columns
	// [p0, p1) touch: [ri0, ri1), starting at (id0, ih0). Row ri's pixel
	// iw is column ri·IW + iw, at src[ri·IW + iw - p0].
	ri0, ri1 := p0/IW, (p1+IW-1)/IW
	id0, ih0 := ri0/IH, ri0%IH
	c0, c1 := r0/kVol, (r1+kVol-1)/kVol // channels with rows in the block
	Parallel(c1-c0, func(lo, hi int) {
		for ci := c0 + lo; ci < c0+hi; ci++ {
			yc := y[ci*outVol : (ci+1)*outVol]
			if p0 == 0 && ci*kVol >= r0 {
				clear(yc)
			}
			for t := max(0, r0-ci*kVol); t < min(kVol, r1-ci*kVol); t++ {
				tp := taps[t]
				if tp.wlo >= tp.whi {
					continue
				}
				src := col[(ci*kVol+t-r0)*w:][:w]
				id, ih := id0, ih0
				for ri := ri0; ri < ri1; ri, ih = ri+1, ih+1 {
					if ih == IH {
						id, ih = id+1, 0
					}
					od, oh := id*g.s[0]+tp.offD, ih*g.s[1]+tp.offH
					if od < 0 || od >= OD || oh < 0 || oh >= OH {
						continue
					}
					base := ri*IW - p0
					a, b := max(tp.wlo, -base), min(tp.whi, w-base)
					if a >= b {
						continue
					}
					s := src[base+a : base+b]
					row := yc[(od*OH+oh)*OW:][:OW]
					if sw == 1 {
						r := row[a+tp.offW : b+tp.offW]
						for j, v := range s {
							r[j] += v
						}
					} else {
						ow := a*sw + tp.offW
						for _, v := range s {
							row[ow] += v
							ow += sw
						}
					}
				}
			}
		}
	})
}
