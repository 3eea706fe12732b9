package kernels

import (
	ownblas "github.com/tsplit/tsplit/kernels/internal/sgemm"
)

// Convolution as an implicit GEMM: when package sgemm's kernel computes
// the float32 products (ownblas.Enabled), the column matrix of a
// convolution is never written out. The GEMM packs its B operand from
// the image directly (ownblas.Operand.Rows or Cols), so the im2col pass,
// its scratch and the second pass over it are gone. Images are grouped
// as in nn_conv_batch.go (Z = W·[col₀ … col_{G-1}], then moved into Y's
// layout), Z living in the workspace or in the part of Y later groups
// have not written yet; with no column block to hold, groups are as
// large as implicitBatchCols asks.
//
// A ConvTranspose of stride 1 (the input gradient of a stride-1 Conv)
// is a Conv of its input with the kernel flipped in every spatial
// dimension and input and output channels exchanged, begin padding
// (k-1)·d - pads: it goes the same way, its A operand produced from W in
// that order, and needs no col2im.

// implicitBatchCols is the GEMM width (G·P) a group of images aims at
// here: with no column block to hold, only Z limits the group, and every
// group packs all of A again.
const implicitBatchCols = 1024

// implicitConv is a group-1 convolution of n images of c channels
// (geometry g) into m output channels: y (n, m, out...) = A (m ×
// c·kVol) · the column matrix of x (n, c, in...). A is produced or
// stored; ws is scratch (the op's workspace).
type implicitConv struct {
	g       nnGeom
	n, c, m int
	a       ownblas.Operand
}

// run computes y; the bias is left to the caller.
func (ic *implicitConv) run(x, y, ws []float32) {
	g := &ic.g
	inVol, ov, k, m := g.inVol(), g.outVol(), ic.c*g.kVol(), ic.m
	per := m * ov
	if k == 0 {
		clear(y)
		return
	}
	trans := g.k[2] > g.out[2]
	want := max(1, (implicitBatchCols+ov-1)/ov)
	for g0 := 0; g0 < ic.n; {
		rem := ic.n - g0
		// The group: Z in the workspace, or in Y past the group.
		imgs := min(rem, want)
		for imgs > 1 && imgs*per > len(ws) && imgs*per > (rem-imgs)*per {
			imgs--
		}
		var z []float32
		switch {
		case imgs == 1:
			z = y[g0*per : (g0+1)*per]
		case imgs*per <= len(ws):
			z = ws[:imgs*per]
		default:
			z = y[(g0+imgs)*per:][:imgs*per]
		}
		xg := x[g0*ic.c*inVol:]
		var b ownblas.Operand
		if trans {
			b.Cols = convColsT(g, xg, ic.c*inVol)
		} else {
			b.Rows = convColRows(g, xg, ic.c*inVol)
		}
		gemmOpPar(m, imgs*ov, k, ic.a, b, z, imgs*ov)
		if imgs > 1 {
			// Z (channel, image, position) → Y (image, channel, position).
			n := imgs * ov
			yg := y[g0*per : (g0+imgs)*per]
			parRange(imgs*m, ov, func(lo, hi int) {
				for i := lo; i < hi; i++ {
					img, ch := i/m, i%m
					copy(yg[i*ov:(i+1)*ov], z[ch*n+img*ov:][:ov])
				}
			})
		}
		g0 += imgs
	}
}

// gemmOpPar computes C (m×n, row stride ldc) = A·B with package sgemm,
// split over Threads goroutines: by blocks of columns when n is at least
// m or gives every thread a block, else by blocks of rows.
func gemmOpPar(m, n, k int, a, b ownblas.Operand, c []float32, ldc int) {
	t := Threads
	if t <= 1 || float64(m)*float64(n)*float64(k) < 1<<18 {
		ownblas.GemmOp(m, n, k, 1, a, b, 0, c, ldc)
		return
	}
	if n >= m || n >= t*parBlock {
		chunks, per := parSplit(n, parBlock, t)
		Parallel(chunks, func(lo, hi int) {
			for ch := lo; ch < hi; ch++ {
				j0 := ch * per
				ownblas.GemmOp(m, min(per, n-j0), k, 1, a, shiftCols(b, j0), 0, c[j0:], ldc)
			}
		})
		return
	}
	chunks, per := parSplit(m, 16, t)
	Parallel(chunks, func(lo, hi int) {
		for ch := lo; ch < hi; ch++ {
			i0 := ch * per
			ownblas.GemmOp(min(per, m-i0), n, k, 1, shiftRows(a, i0), b, 0, c[i0*ldc:], ldc)
		}
	})
}

// shiftCols is op(X) from column j0 on.
func shiftCols(x ownblas.Operand, j0 int) ownblas.Operand {
	switch {
	case x.Rows != nil:
		rows := x.Rows
		return ownblas.Operand{Rows: func(r, c0 int, dst []float32) { rows(r, j0+c0, dst) }}
	case x.Cols != nil:
		cols := x.Cols
		return ownblas.Operand{Cols: func(c, r0 int, dst []float32) { cols(j0+c, r0, dst) }}
	case x.Trans:
		x.Data = x.Data[j0*x.Stride:]
	default:
		x.Data = x.Data[j0:]
	}
	return x
}

// shiftRows is op(X) from row i0 on.
func shiftRows(x ownblas.Operand, i0 int) ownblas.Operand {
	switch {
	case x.Rows != nil:
		rows := x.Rows
		return ownblas.Operand{Rows: func(r, c0 int, dst []float32) { rows(i0+r, c0, dst) }}
	case x.Cols != nil:
		cols := x.Cols
		return ownblas.Operand{Cols: func(c, r0 int, dst []float32) { cols(c, i0+r0, dst) }}
	case x.Trans:
		x.Data = x.Data[i0:]
	default:
		x.Data = x.Data[i0*x.Stride:]
	}
	return x
}

// convColRows produces the column matrix of images of x (image i at
// x[i·imgStride:]) by rows: row r = (c, kd, kh, kw), column j = i·P + o
// (P = g.outVol(), o an output position) holds the input element that
// tap meets at o, zero in the padding (what im2col writes).
func convColRows(g *nnGeom, x []float32, imgStride int) func(r, j0 int, dst []float32) {
	kVol, inVol, ov := g.kVol(), g.inVol(), g.outVol()
	OH, OW := g.out[1], g.out[2]
	ID, IH, IW := g.in[0], g.in[1], g.in[2]
	sw := g.s[2]
	return func(r, j0 int, dst []float32) {
		ci, t := r/kVol, r%kVol
		kd, kh, kw := t/(g.k[1]*g.k[2]), t/g.k[2]%g.k[1], t%g.k[2]
		offW := kw*g.d[2] - g.pb[2]
		wlo, whi := nnRange(offW, sw, IW, OW)
		img, o := j0/ov, j0%ov
		od, oh, ow := o/(OH*OW), o/OW%OH, o%OW
		for len(dst) > 0 {
			// The run of output row (od, oh) from ow.
			n := min(len(dst), OW-ow)
			seg := dst[:n]
			id := od*g.s[0] - g.pb[0] + kd*g.d[0]
			ih := oh*g.s[1] - g.pb[1] + kh*g.d[1]
			a, b := max(ow, wlo), min(ow+n, whi)
			if id < 0 || id >= ID || ih < 0 || ih >= IH || a >= b {
				clear(seg)
			} else {
				src := x[img*imgStride+ci*inVol+(id*IH+ih)*IW:][:IW]
				clear(seg[:a-ow])
				if sw == 1 {
					copy(seg[a-ow:b-ow], src[a+offW:b+offW])
				} else {
					iw := a*sw + offW
					for j := a - ow; j < b-ow; j++ {
						seg[j] = src[iw]
						iw += sw
					}
				}
				clear(seg[b-ow:])
			}
			dst = dst[n:]
			// Next output row, next image.
			ow = 0
			if oh++; oh == OH {
				oh = 0
				if od++; od == g.out[0] {
					od = 0
					img++
				}
			}
		}
	}
}

// convColsT produces the same column matrix by columns, for a kernel
// wider than the output (a weight gradient's): column j = i·P + o holds,
// for rows r = (c, kd, kh, kw) from r0, the elements that im2colT writes
// in its row j, contiguous along kw where the dilation is 1.
func convColsT[T elemFloat](g *nnGeom, x []T, imgStride int) func(j, r0 int, dst []T) {
	ov, inVol := g.outVol(), g.inVol()
	OH, OW := g.out[1], g.out[2]
	ID, IH, IW := g.in[0], g.in[1], g.in[2]
	KD, KH, KW := g.k[0], g.k[1], g.k[2]
	dw := g.d[2]
	return func(j, k0 int, dst []T) {
		k1 := k0 + len(dst)
		i, o := j/ov, j%ov
		od, oh, ow := o/(OH*OW), o/OW%OH, o%OW
		base := ow*g.s[2] - g.pb[2] // input column of tap kw = 0
		wlo, whi := nnRange(base, dw, IW, KW)
		xi := x[i*imgStride:]
		for kr := k0 / KW; kr*KW < k1; kr++ {
			// Taps kr·KW + [a, b) of kernel row kr = (c, kd, kh).
			a, b := max(k0-kr*KW, 0), min(k1-kr*KW, KW)
			seg := dst[kr*KW+a-k0 : kr*KW+b-k0]
			c, kd, kh := kr/(KD*KH), kr/KH%KD, kr%KH
			id := od*g.s[0] - g.pb[0] + kd*g.d[0]
			ih := oh*g.s[1] - g.pb[1] + kh*g.d[1]
			lo, hi := max(a, wlo), min(b, whi)
			if id < 0 || id >= ID || ih < 0 || ih >= IH || lo >= hi {
				clear(seg)
				continue
			}
			src := xi[c*inVol+(id*IH+ih)*IW:]
			clear(seg[:lo-a])
			if dw == 1 {
				copy(seg[lo-a:hi-a], src[base+lo:base+hi])
			} else {
				iw := base + lo*dw
				for jj := lo - a; jj < hi-a; jj++ {
					seg[jj] = src[iw]
					iw += dw
				}
			}
			clear(seg[hi-a:])
		}
	}
}

// flippedWeights produces a ConvTranspose's weight (c, m, k...) as the
// A operand of the equivalent Conv: row mm, column (cc, t) is
// w[cc][mm][kVol-1-t].
func flippedWeights(w []float32, m, kVol int) ownblas.Operand {
	return ownblas.Operand{Rows: func(mm, k0 int, dst []float32) {
		for len(dst) > 0 {
			cc, t := k0/kVol, k0%kVol
			n := min(len(dst), kVol-t)
			src := w[(cc*m+mm)*kVol:][:kVol]
			for j := range dst[:n] {
				dst[j] = src[kVol-1-t-j]
			}
			dst, k0 = dst[n:], k0+n
		}
	}}
}
