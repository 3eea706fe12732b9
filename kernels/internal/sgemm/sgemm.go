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
	// Rows of op(A) or columns of op(B) produced on demand, 8 at a time
	// (stride gemmKC), and a row of op(B) across a block, on their way
	// into the panels.
	lines [8 * gemmKC]float32
	row   [gemmNC]float32
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

// Operand is a matrix operand of GemmOp, op(A) (m×k) or op(B) (k×n):
// either stored, row-major in Data with leading dimension Stride (and
// transposed when Trans: op(X) is then the transpose of what Data
// holds), or produced on demand while it is packed, by Rows or Cols
// (Data unused). A produced operand is how a convolution multiplies its
// column matrix without writing it out: the packing reads the image.
type Operand struct {
	Data   []float32
	Stride int
	Trans  bool
	// Rows writes elements [c0, c0+len(dst)) of row r of op(X) to dst.
	Rows func(r, c0 int, dst []float32)
	// Cols writes elements [r0, r0+len(dst)) of column c of op(X) to dst.
	Cols func(c, r0 int, dst []float32)
}

// Gemm computes C = alpha·op(A)·op(B) + beta·C on row-major matrices
// (op(A) m×k, op(B) k×n, C m×n, leading dimensions lda, ldb, ldc) on the
// calling goroutine. Only when Enabled; the caller has checked the
// operands' lengths and done the degenerate products (m, n or k zero,
// alpha zero). C is not read when beta is zero.
func Gemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	GemmOp(m, n, k, alpha, Operand{Data: a, Stride: lda, Trans: transA}, Operand{Data: b, Stride: ldb, Trans: transB}, beta, c, ldc)
}

// GemmOp is Gemm on operands that may be produced on demand. m, n and k
// are positive, alpha is not zero.
func GemmOp(m, n, k int, alpha float32, a, b Operand, beta float32, c []float32, ldc int) {
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
			gemmPackB(&b, pc, jc, kc, nc, s.b[:], s)
			for ic := 0; ic < m; ic += gemmMC {
				mc := min(gemmMC, m-ic)
				gemmPackA(&a, ic, pc, mc, kc, s.a[:], s)
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

// pack8 writes d[kk·ldd + i] = src[i·lds + kk] for kk < kc, i < 8: eight
// rows of src into the k-major layout of a panel (transpose8, then the
// last kc mod 8 columns one by one).
func pack8(d []float32, ldd int, src []float32, lds, kc int) {
	_ = src[7*lds+kc-1]
	_ = d[(kc-1)*ldd+7]
	n8 := kc &^ 7
	if n8 > 0 {
		transpose8(&d[0], ldd, &src[0], lds, n8)
	}
	for kk := n8; kk < kc; kk++ {
		dk := d[kk*ldd:][:8]
		for i := range dk {
			dk[i] = src[i*lds+kk]
		}
	}
}

// gemmPackA packs rows [ic, ic+mc) × columns [pc, pc+kc) of op(A) into
// panels of gemmMR rows, each k-major (panel p at dst[p·kc:], element
// (i, kk) at kk·MR + i), the last panel padded with zero rows.
func gemmPackA(a *Operand, ic, pc, mc, kc int, dst []float32, s *gemmScratch) {
	for p := 0; p < mc; p += gemmMR {
		rows := min(gemmMR, mc-p)
		d := dst[p*kc : (p+gemmMR)*kc]
		switch {
		case a.Cols != nil:
			for kk := 0; kk < kc; kk++ {
				dk := d[kk*gemmMR : (kk+1)*gemmMR]
				a.Cols(pc+kk, ic+p, dk[:rows])
				clear(dk[rows:])
			}
		case a.Rows != nil:
			for i := 0; i < gemmMR; i++ {
				l := s.lines[i*gemmKC:][:kc]
				if i < rows {
					a.Rows(ic+p+i, pc, l)
				} else {
					clear(l)
				}
			}
			pack8(d, gemmMR, s.lines[:], gemmKC, kc)
		case a.Trans:
			// op(A)[i][kk] = a[(pc+kk)·lda + ic+i]: rows of a are columns.
			for kk := 0; kk < kc; kk++ {
				dk := d[kk*gemmMR : (kk+1)*gemmMR]
				copy(dk, a.Data[(pc+kk)*a.Stride+ic+p:][:rows])
				clear(dk[rows:])
			}
		case rows == gemmMR:
			pack8(d, gemmMR, a.Data[(ic+p)*a.Stride+pc:], a.Stride, kc)
		default:
			clear(d)
			for i := 0; i < rows; i++ {
				for kk, v := range a.Data[(ic+p+i)*a.Stride+pc:][:kc] {
					d[kk*gemmMR+i] = v
				}
			}
		}
	}
}

// gemmPackB packs rows [pc, pc+kc) × columns [jc, jc+nc) of op(B) into
// panels of panelWidth columns, each k-major (the panel of columns
// [q, q+w) at dst[q·kc:], element (kk, j) at kk·w + j), the last panel
// padded with zero columns.
func gemmPackB(b *Operand, pc, jc, kc, nc int, dst []float32, s *gemmScratch) {
	if b.Rows != nil {
		// Row by row across the block (one call each), then into the
		// panels.
		row := s.row[:nc]
		for kk := 0; kk < kc; kk++ {
			b.Rows(pc+kk, jc, row)
			for q := 0; q < nc; {
				w := panelWidth(nc - q)
				cols := min(w, nc-q)
				dk := dst[q*kc+kk*w:][:w]
				copy(dk, row[q:q+cols])
				clear(dk[cols:])
				q += w
			}
		}
		return
	}
	for q := 0; q < nc; {
		w := panelWidth(nc - q)
		cols := min(w, nc-q)
		d := dst[q*kc : (q+w)*kc]
		switch {
		case b.Cols != nil:
			// Eight columns at a time, produced into lines, then
			// transposed into the panel.
			for j0 := 0; j0 < w; j0 += 8 {
				for j := 0; j < 8; j++ {
					l := s.lines[j*gemmKC:][:kc]
					if j0+j < cols {
						b.Cols(jc+q+j0+j, pc, l)
					} else {
						clear(l)
					}
				}
				pack8(d[j0:], w, s.lines[:], gemmKC, kc)
			}
		case !b.Trans:
			for kk := 0; kk < kc; kk++ {
				dk := d[kk*w : (kk+1)*w]
				copy(dk, b.Data[(pc+kk)*b.Stride+jc+q:][:cols])
				clear(dk[cols:])
			}
		default:
			// op(B)[kk][j] = b[(jc+j)·ldb + pc+kk]: rows of b are
			// columns, transposed 8 at a time.
			j0 := 0
			for ; j0+8 <= cols; j0 += 8 {
				pack8(d[j0:], w, b.Data[(jc+q+j0)*b.Stride+pc:], b.Stride, kc)
			}
			if j0 < w {
				for kk := 0; kk < kc; kk++ {
					clear(d[kk*w+j0 : (kk+1)*w])
				}
			}
			for j := j0; j < cols; j++ {
				for kk, v := range b.Data[(jc+q+j)*b.Stride+pc:][:kc] {
					d[kk*w+j] = v
				}
			}
		}
		q += w
	}
}
