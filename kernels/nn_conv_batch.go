package kernels

// Conv over a group of images per GEMM. The per-image product of
// nn_conv.go, Yₙ (M × P) = W (M × K) · colₙ (K × P), P the output
// positions, is a poor GEMM when P is small: BLAS packs all of W for
// every image to do 2·P flops per packed element. The weight gradients
// autodiff emits are the extreme case (P = kernel area, often 9; the
// "images" are the input channels, up to 512 of them; K = N·prod(dY
// spatial)), and resnet18's last forward layers have P = 49 or 196. So
// this path multiplies W by the column matrices of G images at once,
//
//	Z (M × G·P) = W · [col₀ … col_{G-1}],
//
// and then moves Z's blocks into Y's layout (image, channel, position).
//
// No memory past the op's own is used. Z and the column blocks live in
// the workspace (sized by planConv for one image's blocks) or in the
// part of Y that later groups of images have not written yet: the first
// groups have most of Y to spare, the last ones little, so groups shrink
// as the output fills, down to one image, whose product goes straight
// into Y as in the per-image path. K is cut into blocks as there, the
// GEMM accumulating (beta = 1) after the first.
//
// The column block is built row by row along the longer run of
// contiguous input: rows (channel, tap) × columns (image, position) when
// the output is wider than the kernel (im2col), or its transpose, rows
// (image, position) × columns (channel, tap), when the kernel is wider
// (im2colT: a weight gradient's kernel is dY, tens of pixels wide, its
// output a few taps), the GEMM then reading it transposed.

const (
	// convBatchCols is the GEMM width (G·P) a group aims at: enough that
	// packing W costs little next to the product.
	convBatchCols = 256
	// convBatchMinRows is the shallowest K block a group of two or more
	// images accepts; with less room, fewer images go together.
	convBatchMinRows = 64
)

// convBatch is how one group of images is computed.
type convBatch struct {
	images, rows int  // G, and the K rows of a column block
	zInWS        bool // Z in the workspace (else at the start of Y's free part); G > 1 only
	colInWS      bool // the column block in the workspace (else in Y's free part, after Z when Z is there)
}

// convBatchFit picks the group for the next rem images: the most images,
// up to what convBatchCols asks, whose Z and column block (of at least
// convBatchMinRows rows, or all K) fit in the workspace (ws floats) and
// in Y's part after the group (per floats an image); one image else.
func convBatchFit(rem, ov, per, k, ws int) convBatch {
	want := min(rem, max(1, (convBatchCols+ov-1)/ov))
	minRows := min(k, convBatchMinRows)
	for g := want; g >= 2; g-- {
		free, z, row := (rem-g)*per, g*per, g*ov
		var best convBatch
		if z <= ws {
			if r := min(k, max(ws-z, free)/row); r > best.rows {
				best = convBatch{images: g, rows: r, zInWS: true, colInWS: ws-z >= free}
			}
		}
		if z <= free {
			if r := min(k, max(free-z, ws)/row); r > best.rows {
				best = convBatch{images: g, rows: r, colInWS: ws > free-z}
			}
		}
		if best.rows >= minRows {
			return best
		}
	}
	free := (rem - 1) * per
	return convBatch{images: 1, rows: min(k, max(ws, free)/ov), colInWS: ws >= free}
}

// convBatched computes a group-1 Conv that needs a column matrix (p not
// direct, not noCol) into y, ws being the workspace (at least one row of
// one image's column matrix). The bias is left to the caller.
func convBatched[T elemFloat](p *convPlan, x, w, y, ws []T) {
	g := &p.g
	inVol, ov, k, m := g.inVol(), g.outVol(), p.c*g.kVol(), p.m
	per := m * ov
	if k == 0 {
		clear(y)
		return
	}
	trans := g.k[2] > g.out[2]
	for g0 := 0; g0 < p.n; {
		b := convBatchFit(p.n-g0, ov, per, k, len(ws))
		n := b.images * ov // GEMM columns
		free, scratch := y[(g0+b.images)*per:p.n*per], ws
		var z, col []T
		switch {
		case b.images == 1:
			z = y[g0*per : (g0+1)*per]
		case b.zInWS:
			z, scratch = scratch[:b.images*per], scratch[b.images*per:]
		default:
			z, free = free[:b.images*per], free[b.images*per:]
		}
		if b.colInWS {
			col = scratch
		} else {
			col = free
		}
		xg := x[g0*p.c*inVol:]
		for k0 := 0; k0 < k; k0 += b.rows {
			k1 := min(k0+b.rows, k)
			var beta T
			if k0 > 0 {
				beta = 1
			}
			if trans {
				im2colT(g, xg, p.c*inVol, b.images, k0, k1, col, k1-k0)
				nnGemm(false, true, m, n, k1-k0, 1, w[k0:], k, col, k1-k0, beta, z, n)
			} else {
				im2col(g, xg, p.c*inVol, b.images, k0, k1, col, n)
				nnGemm(false, false, m, n, k1-k0, 1, w[k0:], k, col, n, beta, z, n)
			}
		}
		if b.images > 1 {
			// Z (channel, image, position) → Y (image, channel, position).
			yg := y[g0*per : (g0+b.images)*per]
			parRange(b.images*m, ov, func(lo, hi int) {
				for i := lo; i < hi; i++ {
					img, ch := i/m, i%m
					copy(yg[i*ov:(i+1)*ov], z[ch*n+img*ov:][:ov])
				}
			})
		}
		g0 += b.images
	}
}

// im2colT writes columns [k0, k1) of the transposed column matrices of
// images [0, imgs) of x (image i at x[i·imgStride:]): row (i, o), o an
// output position, at col[(i·P + o)·ld:], holds for each column r =
// (c, kd, kh, kw) the input element that tap meets at o (zero in the
// padding), column r at offset r - k0.
func im2colT[T elemFloat](g *nnGeom, x []T, imgStride, imgs, k0, k1 int, col []T, ld int) {
	fill := convColsT(g, x, imgStride) // one row, as the implicit GEMM packs it
	parRange(imgs*g.outVol(), k1-k0, func(lo, hi int) {
		for row := lo; row < hi; row++ {
			fill(row, k0, col[row*ld:][:k1-k0])
		}
	})
}
