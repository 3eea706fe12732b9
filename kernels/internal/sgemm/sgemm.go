package sgemm

import (
	"os"
	"sync"
)

const (
	gemmMR   = 8   // rows of an A panel and of the micro-kernels' tile
	gemmNR   = 48  // columns of a B panel (kernel8x48)
	gemmNT   = 16  // columns of the narrower panels that end a block (kernel8x16)
	gemmKC   = 256 // the most K rows of a packed block
	gemmMC   = 30 * gemmMR
	gemmNC   = 64 * gemmNR
	gemmTile = gemmMR * gemmNR
)

// Enabled reports whether Gemm may be called: the processor has what
// the micro-kernels need and the environment does not set
// TSPLIT_SGEMM=blas (which keeps the kernels on their BLAS library, to
// compare with it or to rule this package out).
var Enabled = haveKernel && os.Getenv("TSPLIT_SGEMM") != "blas"

// gemmScratch is the packing buffers of one product.
type gemmScratch struct {
	a    [gemmMC * gemmKC]float32
	b    [gemmNC * gemmKC]float32
	tile [gemmTile]float32
}

var gemmScratchPool = sync.Pool{New: func() any { return new(gemmScratch) }}

// panelWidth is the width of the B panel that starts nc-jr columns
// before the end of a block: gemmNR while that many remain, else
// gemmNT (the last one padded with zero columns).
func panelWidth(rest int) int {
	if rest >= gemmNR {
		return gemmNR
	}
	return gemmNT
}

// Gemm computes C = alpha·op(A)·op(B) + beta·C on row-major matrices
// (op(A) m×k, op(B) k×n, C m×n, leading dimensions lda, ldb, ldc) on the
// calling goroutine. Only when Enabled; the caller has checked the
// operands' lengths and done the degenerate products (m, n or k zero,
// alpha zero). C is not read when beta is zero.
func Gemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	s := gemmScratchPool.Get().(*gemmScratch)
	defer gemmScratchPool.Put(s)
	// K blocks of equal depth, at most gemmKC.
	nk := (k + gemmKC - 1) / gemmKC
	kcMax := (k + nk - 1) / nk
	for jc := 0; jc < n; jc += gemmNC {
		nc := min(gemmNC, n-jc)
		for pc := 0; pc < k; pc += kcMax {
			kc := min(kcMax, k-pc)
			bk := beta // C's factor: beta in the first K block, then 1
			if pc > 0 {
				bk = 1
			}
			gemmPackB(transB, b, ldb, pc, jc, kc, nc, s.b[:])
			for ic := 0; ic < m; ic += gemmMC {
				mc := min(gemmMC, m-ic)
				gemmPackA(transA, a, lda, ic, pc, mc, kc, s.a[:])
				for jr := 0; jr < nc; {
					w := panelWidth(nc - jr)
					cols := min(w, nc-jr)
					bp := &s.b[jr*kc]
					for ir := 0; ir < mc; ir += gemmMR {
						ap := &s.a[ir*kc]
						rows := min(gemmMR, mc-ir)
						if rows == gemmMR && cols == w {
							kernel(w, kc, ap, bp, &c[(ic+ir)*ldc+jc+jr], ldc, alpha, bk)
							continue
						}
						// A tile past an edge of C: through the tile buffer.
						kernel(w, kc, ap, bp, &s.tile[0], w, 1, 0)
						for i := 0; i < rows; i++ {
							crow := c[(ic+ir+i)*ldc+jc+jr:][:cols]
							t := s.tile[i*w:][:cols]
							if bk == 0 {
								for j, v := range t {
									crow[j] = alpha * v
								}
								continue
							}
							for j, v := range t {
								crow[j] = bk*crow[j] + alpha*v
							}
						}
					}
					jr += w
				}
			}
		}
	}
}

// kernel runs the micro-kernel of width w (gemmNR or gemmNT).
func kernel(w, k int, a, b, c *float32, ldc int, alpha, beta float32) {
	if w == gemmNR {
		kernel8x48(k, a, b, c, ldc, alpha, beta)
		return
	}
	kernel8x16(k, a, b, c, ldc, alpha, beta)
}

// gemmPackA packs rows [ic, ic+mc) × columns [pc, pc+kc) of op(A) into
// panels of gemmMR rows, each k-major (panel p at dst[p·kc:], element
// (i, kk) at kk·MR + i), the last panel padded with zero rows.
func gemmPackA(trans bool, a []float32, lda, ic, pc, mc, kc int, dst []float32) {
	for p := 0; p < mc; p += gemmMR {
		rows := min(gemmMR, mc-p)
		d := dst[p*kc : (p+gemmMR)*kc]
		if trans {
			// op(A)[i][kk] = a[(pc+kk)·lda + ic+i]: rows of a are columns.
			for kk := 0; kk < kc; kk++ {
				dk := d[kk*gemmMR : (kk+1)*gemmMR]
				copy(dk, a[(pc+kk)*lda+ic+p:][:rows])
				clear(dk[rows:])
			}
			continue
		}
		if rows == gemmMR {
			// Eight rows read side by side, written in order.
			r0 := a[(ic+p)*lda+pc:][:kc]
			r1 := a[(ic+p+1)*lda+pc:][:kc]
			r2 := a[(ic+p+2)*lda+pc:][:kc]
			r3 := a[(ic+p+3)*lda+pc:][:kc]
			r4 := a[(ic+p+4)*lda+pc:][:kc]
			r5 := a[(ic+p+5)*lda+pc:][:kc]
			r6 := a[(ic+p+6)*lda+pc:][:kc]
			r7 := a[(ic+p+7)*lda+pc:][:kc]
			for kk := range r0 {
				dk := d[kk*gemmMR : kk*gemmMR+gemmMR : kk*gemmMR+gemmMR]
				dk[0], dk[1], dk[2], dk[3] = r0[kk], r1[kk], r2[kk], r3[kk]
				dk[4], dk[5], dk[6], dk[7] = r4[kk], r5[kk], r6[kk], r7[kk]
			}
			continue
		}
		clear(d)
		for i := 0; i < rows; i++ {
			for kk, v := range a[(ic+p+i)*lda+pc:][:kc] {
				d[kk*gemmMR+i] = v
			}
		}
	}
}

// gemmPackB packs rows [pc, pc+kc) × columns [jc, jc+nc) of op(B) into
// panels of panelWidth columns, each k-major (the panel of columns
// [q, q+w) at dst[q·kc:], element (kk, j) at kk·w + j), the last panel
// padded with zero columns.
func gemmPackB(trans bool, b []float32, ldb, pc, jc, kc, nc int, dst []float32) {
	for q := 0; q < nc; {
		w := panelWidth(nc - q)
		cols := min(w, nc-q)
		d := dst[q*kc : (q+w)*kc]
		if !trans {
			for kk := 0; kk < kc; kk++ {
				dk := d[kk*w : (kk+1)*w]
				copy(dk, b[(pc+kk)*ldb+jc+q:][:cols])
				clear(dk[cols:])
			}
		} else {
			// op(B)[kk][j] = b[(jc+j)·ldb + pc+kk]: rows of b are columns.
			if cols < w {
				clear(d)
			}
			for j := 0; j < cols; j++ {
				for kk, v := range b[(jc+q+j)*ldb+pc:][:kc] {
					d[kk*w+j] = v
				}
			}
		}
		q += w
	}
}
