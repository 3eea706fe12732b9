package kernels

import "github.com/tsplit/tsplit/ir"

// Transpose on any byte-sized type. The walk over the output merges
// dimensions that stay adjacent under the permutation, so e.g. NCHW ->
// NHWC becomes a batched 2-D transpose and perms that keep the last
// dimension become runs of copies. A transpose of the innermost
// dimension is done in 32x32 tiles so both sides are read and written
// a cache line at a time.

func init() {
	regOp("Transpose", 1, 1, byteTypes, shTransposeRun)
}

func shTransposeRun(c *Ctx) error {
	x, y := c.In[0], c.Out[0]
	r := len(x.Shape)
	perm := c.Op.AttrInts("perm", nil)
	if perm == nil {
		perm = make([]int64, r)
		for i := range perm {
			perm[i] = int64(r - 1 - i)
		}
	}
	if len(perm) != r {
		return c.Errorf("attribute perm %v has %d values, input has rank %d", perm, len(perm), r)
	}
	seen := make([]bool, r)
	want := make(ir.Shape, r)
	ist := contigStrides(x.Shape)
	st := make([]int, r)
	for i, p := range perm {
		if p < 0 || p >= int64(r) || seen[p] {
			return c.Errorf("attribute perm %v is not a permutation of [0, %d)", perm, r)
		}
		seen[p] = true
		want[i] = x.Shape[p]
		st[i] = ist[p]
	}
	if x.DType != y.DType || !want.Equal(y.Shape) {
		return c.Errorf("output is %v%v, want %v%v", y.DType, y.Shape, x.DType, want)
	}
	es := esize(x.DType)
	if es == 0 {
		return c.Errorf("element type %v is not supported", x.DType)
	}
	w := newWalk(y.Shape, contigStrides(y.Shape), st)
	k := wordOf(es)
	if w.inner(1) == 1 || len(w.dims) < 2 || k == nil {
		moveWalk(w, y, x, es, nil)
		return nil
	}
	k.tiles(w, y, x)
	return nil
}
func view8(t *Tensor) []uint8 { return t.Data }

const shTile = 32

// tiles runs a walk whose last two dimensions are a 2-D transpose
// (operand 0 contiguous, operand 1 strided on the innermost): the
// leading dimensions are a batch, the last two are copied in tiles.
func (wordK[T]) tiles(w *ndWalk, dt, st *Tensor) {
	dst, src := viewAs[T](dt), viewAs[T](st)
	m := len(w.dims)
	rows, cols := w.dims[m-2], w.dims[m-1]
	sr, sc := w.st[1][m-2], w.st[1][m-1]
	batch := 1
	for _, d := range w.dims[:m-2] {
		batch *= d
	}
	tr, tc := (rows+shTile-1)/shTile, (cols+shTile-1)/shTile
	parRange(batch*tr, shTile*cols, func(u0, u1 int) {
		for u := u0; u < u1; u++ {
			b, t := u/tr, u%tr
			// batch offsets
			ob, ib := 0, 0
			rem := b
			for d := m - 3; d >= 0; d-- {
				k := rem % w.dims[d]
				rem /= w.dims[d]
				ob += k * w.st[0][d]
				ib += k * w.st[1][d]
			}
			i0, i1 := t*shTile, min((t+1)*shTile, rows)
			for j0 := 0; j0 < tc*shTile; j0 += shTile {
				j1 := min(j0+shTile, cols)
				for i := i0; i < i1; i++ {
					d := dst[ob+i*cols+j0 : ob+i*cols+j1]
					s := ib + i*sr + j0*sc
					for j := range d {
						d[j] = src[s+j*sc]
					}
				}
			}
		}
	})
}
