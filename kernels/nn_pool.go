package kernels

import (
	"fmt"
	"math"

	"github.com/tsplit/tsplit/ir"
)

// Pooling: MaxPool (with the optional Indices output), AveragePool,
// GlobalAveragePool, GlobalMaxPool. Parallel over (image, channel)
// planes; no scratch.

func init() {
	nnReg("MaxPool", 1, 1, Kernel{Run: runMaxPool}, func(i int, dt ir.DType) bool { return i == 1 && dt == ir.Int64 })
	nnReg("AveragePool", 1, 1, Kernel{Run: runAveragePool}, nil)
	nnReg("GlobalAveragePool", 1, 1, Kernel{Run: runGlobalAveragePool}, nil)
	nnReg("GlobalMaxPool", 1, 1, Kernel{Run: runGlobalMaxPool}, nil)
}

func poolGeom(op *ir.Op) (nnGeom, int, error) {
	k := op.AttrInts("kernel_shape", nil)
	if k == nil {
		return nnGeom{}, 0, fmt.Errorf("%s: attribute kernel_shape is required", op.Describe())
	}
	g, err := nnWindowGeom(op, k)
	if err != nil {
		return g, 0, err
	}
	x := op.Input(0).Shape
	return g, int(x[0] * x[1]), nil
}

// taps returns, for output position o of dimension i, the kernel taps
// [lo, hi) that fall inside the input, and the window's first input
// coordinate.
func (g *nnGeom) taps(i, o int) (lo, hi, start int) {
	start = o*g.s[i] - g.pb[i]
	lo, hi = nnRange(start, g.d[i], g.in[i], g.k[i])
	return lo, hi, start
}

// poolTaps tabulates taps for every output coordinate of each dimension,
// so the pooling loops do no division.
type poolTaps [nnMaxSpatial][]struct{ lo, hi, start int }

func (g *nnGeom) tapTable() *poolTaps {
	var t poolTaps
	for i := 0; i < nnMaxSpatial; i++ {
		t[i] = make([]struct{ lo, hi, start int }, g.out[i])
		for o := range t[i] {
			e := &t[i][o]
			e.lo, e.hi, e.start = g.taps(i, o)
		}
	}
	return &t
}

// MaxPool's Indices (ONNX, storage_order 0): the flat index of the
// maximum in the whole input tensor, ((n·C + c)·D + d)·H·W + h·W + w.
// storage_order 1 counts the spatial position column-major instead
// (plane offset + h + w·H in 2-D; i0 + i1·S0 + i2·S0·S1 in 3-D). Among
// equal maxima the first in scan order wins, as in ONNX Runtime, and
// padding never does. A NaN in the window makes the result NaN (as in
// PyTorch; ONNX Runtime skips NaNs).
func runMaxPool(c *Ctx) error { return runPool(c, nnFloatKernels.maxPool) }

// runPool runs a windowed pooling body on the op's geometry.
func runPool(c *Ctx, body func(k nnFloatKernels, c *Ctx, g nnGeom, planes int) error) error {
	g, planes, err := poolGeom(c.Op)
	if err != nil {
		return err
	}
	return body(nnFloat(c), c, g, planes)
}

func (floatK[T]) maxPool(c *Ctx, g nnGeom, planes int) error {
	x, y := viewAs[T](c.In[0]), viewAs[T](c.Out[0])
	var idx []int64
	if len(c.Out) > 1 && c.Out[1] != nil {
		idx = c.Out[1].I64()
	}
	colMajor := c.Op.AttrInt("storage_order", 0) == 1
	inVol, outVol := g.inVol(), g.outVol()
	OD, OH, OW := g.out[0], g.out[1], g.out[2]
	ID, IH, IW := g.in[0], g.in[1], g.in[2]
	tt := g.tapTable()
	Parallel(planes, func(lo, hi int) {
		// The maximum is separable: for each output row, the
		// elementwise maximum of the input rows its windows cover
		// (vrow), then of each window's taps along that row. Each step
		// is a maximum over independent elements, not one long chain
		// per window; Go's max propagates NaN and is order-free (max(-0,
		// +0) = +0 either way), so the result is the window's maximum.
		//
		// With Indices, vfrom[iw] is the offset of the input row where
		// column iw first reaches vrow[iw] (updated on a strictly
		// greater value, with a conditional move). The window's first
		// maximum in scan order (kd, kh, kw) is then, among its columns
		// whose vrow equals the maximum, the least vfrom + column: rows
		// come in increasing offsets and differ by at least IW.
		vrow := make([]T, IW)
		var vfrom []int
		if idx != nil {
			vfrom = make([]int, IW)
		}
		for pl := lo; pl < hi; pl++ {
			xp := x[pl*inVol : (pl+1)*inVol]
			yp := y[pl*outVol : (pl+1)*outVol]
			base := int64(pl) * int64(inVol)
			o := 0
			for od := 0; od < OD; od++ {
				dlo, dhi, d0 := tt[0][od].lo, tt[0][od].hi, tt[0][od].start
				for oh := 0; oh < OH; oh++ {
					hlo, hhi, h0 := tt[1][oh].lo, tt[1][oh].hi, tt[1][oh].start
					first := true
					for kd := dlo; kd < dhi; kd++ {
						id := d0 + kd*g.d[0]
						for kh := hlo; kh < hhi; kh++ {
							rowOff := (id*IH + h0 + kh*g.d[1]) * IW
							src := xp[rowOff:][:IW]
							if first {
								copy(vrow, src)
								for i := range vfrom {
									vfrom[i] = rowOff
								}
								first = false
								continue
							}
							if vfrom == nil {
								for i, v := range src {
									vrow[i] = max(vrow[i], v)
								}
								continue
							}
							vfrom := vfrom[:len(src)]
							for i, v := range src {
								cur, from := vrow[i], vfrom[i]
								if v > cur {
									from = rowOff
								}
								vfrom[i], vrow[i] = from, max(cur, v)
							}
						}
					}
					for ow := 0; ow < OW; ow++ {
						wlo, whi, w0 := tt[2][ow].lo, tt[2][ow].hi, tt[2][ow].start
						best := T(math.Inf(-1))
						if !first {
							for kw := wlo; kw < whi; kw++ {
								best = max(best, vrow[w0+kw*g.d[2]])
							}
						}
						if idx == nil {
							yp[o] = best
							o++
							continue
						}
						// Its position: the first element equal to the
						// maximum; -1 for an empty window.
						at := -1
						if best == best && !first {
							at = math.MaxInt
							for kw := wlo; kw < whi; kw++ {
								c := w0 + kw*g.d[2]
								m := min(at, vfrom[c]+c)
								if vrow[c] == best {
									at = m
								}
							}
						} else {
							// NaN: the first NaN of a scan.
						find:
							for kd := dlo; kd < dhi; kd++ {
								id := d0 + kd*g.d[0]
								for kh := hlo; kh < hhi; kh++ {
									rowOff := (id*IH + h0 + kh*g.d[1]) * IW
									for kw := wlo; kw < whi; kw++ {
										if j := rowOff + w0 + kw*g.d[2]; xp[j] != xp[j] {
											at = j
											break find
										}
									}
								}
							}
						}
						if at >= 0 {
							best = xp[at] // -0 where the first zero is -0
						}
						yp[o] = best
						if at < 0 {
							idx[pl*outVol+o] = -1
						} else {
							j := at
							if colMajor {
								id, ih, iw := at/(IH*IW), at/IW%IH, at%IW
								j = id + ih*ID + iw*ID*IH
							}
							idx[pl*outVol+o] = base + int64(j)
						}
						o++
					}
				}
			}
		}
	})
	return nil
}

// AveragePool divides by the taps inside the input, or with
// count_include_pad=1 by the taps inside the padded input: under
// ceil_mode a window running past the end padding is clipped to it (as
// ONNX Runtime and PyTorch do).
func runAveragePool(c *Ctx) error { return runPool(c, nnFloatKernels.averagePool) }

func (floatK[T]) averagePool(c *Ctx, g nnGeom, planes int) error {
	includePad := c.Op.AttrInt("count_include_pad", 0) == 1
	x, y := viewAs[T](c.In[0]), viewAs[T](c.Out[0])
	inVol, outVol := g.inVol(), g.outVol()
	OD, OH, OW := g.out[0], g.out[1], g.out[2]
	IH, IW := g.in[1], g.in[2]
	// padded-window tap counts per output coordinate, per dimension
	var padCnt [nnMaxSpatial][]int
	for i := 0; i < nnMaxSpatial; i++ {
		padCnt[i] = make([]int, g.out[i])
		for o := range padCnt[i] {
			start := o*g.s[i] - g.pb[i]
			lo, hi := nnRange(start+g.pb[i], g.d[i], g.in[i]+g.pb[i]+g.pe[i], g.k[i])
			padCnt[i][o] = hi - lo
		}
	}
	tt := g.tapTable()
	Parallel(planes, func(lo, hi int) {
		for pl := lo; pl < hi; pl++ {
			xp := x[pl*inVol : (pl+1)*inVol]
			yp := y[pl*outVol : (pl+1)*outVol]
			o := 0
			for od := 0; od < OD; od++ {
				dlo, dhi, d0 := tt[0][od].lo, tt[0][od].hi, tt[0][od].start
				for oh := 0; oh < OH; oh++ {
					hlo, hhi, h0 := tt[1][oh].lo, tt[1][oh].hi, tt[1][oh].start
					for ow := 0; ow < OW; ow++ {
						wlo, whi, w0 := tt[2][ow].lo, tt[2][ow].hi, tt[2][ow].start
						var sum T
						for kd := dlo; kd < dhi; kd++ {
							id := d0 + kd*g.d[0]
							for kh := hlo; kh < hhi; kh++ {
								ih := h0 + kh*g.d[1]
								row := xp[(id*IH+ih)*IW:][:IW]
								if g.d[2] == 1 {
									for _, v := range row[w0+wlo : w0+whi] {
										sum += v
									}
									continue
								}
								for kw := wlo; kw < whi; kw++ {
									sum += row[w0+kw*g.d[2]]
								}
							}
						}
						var n int
						if includePad {
							n = padCnt[0][od] * padCnt[1][oh] * padCnt[2][ow]
						} else {
							n = max(0, dhi-dlo) * max(0, hhi-hlo) * max(0, whi-wlo)
						}
						if n > 0 {
							yp[o] = sum / T(n)
						} else {
							yp[o] = 0
						}
						o++
					}
				}
			}
		}
	})
	return nil
}

func globalPoolDims(c *Ctx) (planes, vol int) {
	s := c.In[0].Shape
	planes = int(s[0] * s[1])
	vol = 1
	for _, d := range s[2:] {
		vol *= int(d)
	}
	return planes, vol
}

func runGlobalAveragePool(c *Ctx) error { return runGlobalPool(c, false) }

func runGlobalMaxPool(c *Ctx) error { return runGlobalPool(c, true) }

func runGlobalPool(c *Ctx, isMax bool) error {
	nnFloat(c).globalPool(c, isMax)
	return nil
}

// globalPool reduces every (n, c) plane to its mean (accumulated in
// float64) or its maximum.
func (floatK[T]) globalPool(c *Ctx, isMax bool) {
	x, y := viewAs[T](c.In[0]), viewAs[T](c.Out[0])
	planes, vol := globalPoolDims(c)
	Parallel(planes, func(lo, hi int) {
		for pl := lo; pl < hi; pl++ {
			plane := x[pl*vol : (pl+1)*vol]
			if isMax {
				best := T(math.Inf(-1))
				for _, v := range plane {
					if v > best {
						best = v
					}
				}
				y[pl] = best
				continue
			}
			var s float64
			for _, v := range plane {
				s += float64(v)
			}
			if vol > 0 {
				y[pl] = T(s / float64(vol))
			} else {
				y[pl] = T(math.NaN())
			}
		}
	})
}
