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
	f32 := []ir.DType{ir.Float}
	Register("", "MaxPool", Kernel{Run: runMaxPool, DTypes: f32})
	Register("", "AveragePool", Kernel{Run: runAveragePool, DTypes: f32})
	Register("", "GlobalAveragePool", Kernel{Run: runGlobalAveragePool, DTypes: f32})
	Register("", "GlobalMaxPool", Kernel{Run: runGlobalMaxPool, DTypes: f32})
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

// MaxPool's Indices (ONNX, storage_order 0): the flat index of the
// maximum in the whole input tensor, ((n·C + c)·D + d)·H·W + h·W + w.
// storage_order 1 counts the spatial position column-major instead
// (plane offset + h + w·H in 2-D; i0 + i1·S0 + i2·S0·S1 in 3-D). Among equal maxima the first in
// scan order wins, and padding never does (as in ONNX Runtime).
func runMaxPool(c *Ctx) error {
	g, planes, err := poolGeom(c.Op)
	if err != nil {
		return err
	}
	x, y := c.In[0].F32(), c.Out[0].F32()
	var idx []int64
	if len(c.Out) > 1 && c.Out[1] != nil {
		idx = c.Out[1].I64()
	}
	colMajor := c.Op.AttrInt("storage_order", 0) == 1
	inVol, outVol := g.inVol(), g.outVol()
	OD, OH, OW := g.out[0], g.out[1], g.out[2]
	ID, IH, IW := g.in[0], g.in[1], g.in[2]
	Parallel(planes, func(lo, hi int) {
		for pl := lo; pl < hi; pl++ {
			xp := x[pl*inVol : (pl+1)*inVol]
			yp := y[pl*outVol : (pl+1)*outVol]
			base := int64(pl) * int64(inVol)
			o := 0
			for od := 0; od < OD; od++ {
				dlo, dhi, d0 := g.taps(0, od)
				for oh := 0; oh < OH; oh++ {
					hlo, hhi, h0 := g.taps(1, oh)
					for ow := 0; ow < OW; ow++ {
						wlo, whi, w0 := g.taps(2, ow)
						best, at := float32(math.Inf(-1)), -1
						first := true
						for kd := dlo; kd < dhi; kd++ {
							id := d0 + kd*g.d[0]
							for kh := hlo; kh < hhi; kh++ {
								ih := h0 + kh*g.d[1]
								row := xp[(id*IH+ih)*IW:][:IW]
								for kw := wlo; kw < whi; kw++ {
									iw := w0 + kw*g.d[2]
									if v := row[iw]; v > best || first {
										best, at, first = v, (id*IH+ih)*IW+iw, false
									}
								}
							}
						}
						yp[o] = best
						if idx != nil {
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
func runAveragePool(c *Ctx) error {
	g, planes, err := poolGeom(c.Op)
	if err != nil {
		return err
	}
	includePad := c.Op.AttrInt("count_include_pad", 0) == 1
	x, y := c.In[0].F32(), c.Out[0].F32()
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
	Parallel(planes, func(lo, hi int) {
		for pl := lo; pl < hi; pl++ {
			xp := x[pl*inVol : (pl+1)*inVol]
			yp := y[pl*outVol : (pl+1)*outVol]
			o := 0
			for od := 0; od < OD; od++ {
				dlo, dhi, d0 := g.taps(0, od)
				for oh := 0; oh < OH; oh++ {
					hlo, hhi, h0 := g.taps(1, oh)
					for ow := 0; ow < OW; ow++ {
						wlo, whi, w0 := g.taps(2, ow)
						var sum float32
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
							yp[o] = sum / float32(n)
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

func runGlobalAveragePool(c *Ctx) error {
	planes, vol := globalPoolDims(c)
	x, y := c.In[0].F32(), c.Out[0].F32()
	Parallel(planes, func(lo, hi int) {
		for pl := lo; pl < hi; pl++ {
			var s float64
			for _, v := range x[pl*vol : (pl+1)*vol] {
				s += float64(v)
			}
			if vol > 0 {
				y[pl] = float32(s / float64(vol))
			} else {
				y[pl] = float32(math.NaN())
			}
		}
	})
	return nil
}

func runGlobalMaxPool(c *Ctx) error {
	planes, vol := globalPoolDims(c)
	x, y := c.In[0].F32(), c.Out[0].F32()
	Parallel(planes, func(lo, hi int) {
		for pl := lo; pl < hi; pl++ {
			best := float32(math.Inf(-1))
			for _, v := range x[pl*vol : (pl+1)*vol] {
				if v > best {
					best = v
				}
			}
			y[pl] = best
		}
	})
	return nil
}
