package kernels

import (
	"fmt"
	"math"

	"github.com/tsplit/tsplit/ir"
	"github.com/tsplit/tsplit/kernels/internal/simd"
)

// BatchNormalization and LayerNormalization. Statistics are accumulated
// in float64.

func init() {
	nnReg("BatchNormalization", 5, 1, Kernel{Run: runBatchNorm}, nil)
	nnReg("LayerNormalization", 2, 1, Kernel{Run: runLayerNorm, Workspace: layerNormWorkspace},
		func(i int, dt ir.DType) bool { return i > 0 && (dt == ir.Float || dt == ir.Double) }) // stash_type
}

// runBatchNorm: inference normalises with the running statistics,
// y = scale·(x - mean)/sqrt(var + epsilon) + B. Training normalises with
// the batch mean and biased batch variance over N and the spatial
// dimensions, and writes, as the ONNX reference (and ONNX Runtime) do,
//
//	running_mean = mean·momentum + batch_mean·(1 - momentum)
//	running_var  = var·momentum  + batch_var·(1 - momentum)
//
// with batch_var the biased (population) variance; PyTorch would use the
// unbiased one here. Opset 9-13's outputs 3 and 4 (saved_mean,
// saved_var) are the batch mean and, as ONNX Runtime writes it (cuDNN's
// convention; the ONNX text only says "saved variance"), the inverse
// standard deviation 1/sqrt(batch_var + epsilon).
func runBatchNorm(c *Ctx) error {
	return nnFloat(c).batchNorm(c)
}

func (floatK[T]) batchNorm(c *Ctx) error {
	xs := c.In[0].Shape
	if len(xs) < 2 {
		return c.Errorf("input has rank %d, needs (N, C, ...)", len(xs))
	}
	n, ch := int(xs[0]), int(xs[1])
	vol := nnVol(xs[2:])
	x, y := viewAs[T](c.In[0]), viewAs[T](c.Out[0])
	scale, bias, mean, vr := viewAs[T](c.In[1]), viewAs[T](c.In[2]), viewAs[T](c.In[3]), viewAs[T](c.In[4])
	eps := float64(c.Op.AttrFloat("epsilon", 1e-5))
	momentum := float64(c.Op.AttrFloat("momentum", 0.9))
	training := ir.BatchNormTraining(c.Op)
	out := func(i int) []T {
		if i < len(c.Out) && c.Out[i] != nil {
			return viewAs[T](c.Out[i])
		}
		return nil
	}
	Parallel(ch, func(lo, hi int) {
		for ci := lo; ci < hi; ci++ {
			m, v := float64(mean[ci]), float64(vr[ci])
			if training {
				bm, bv := meanVar(x, ci*vol, n, vol, ch*vol)
				if o := out(1); o != nil {
					o[ci] = T(m*momentum + bm*(1-momentum))
				}
				if o := out(2); o != nil {
					o[ci] = T(v*momentum + bv*(1-momentum))
				}
				if o := out(3); o != nil {
					o[ci] = T(bm)
				}
				if o := out(4); o != nil {
					o[ci] = T(1 / math.Sqrt(bv+eps))
				}
				m, v = bm, bv
			}
			a := float64(scale[ci]) / math.Sqrt(v+eps)
			b := float64(bias[ci]) - m*a
			af, bf := T(a), T(b)
			for ni := 0; ni < n; ni++ {
				off := (ni*ch + ci) * vol
				src, dst := x[off:off+vol], y[off:off+vol]
				if nnIs32[T]() {
					simd.ScaleShift(nnAs[float32](dst), nnAs[float32](src), float32(af), float32(bf))
					continue
				}
				for j, e := range src {
					dst[j] = e*af + bf
				}
			}
		}
	})
	return nil
}

// meanVar returns the mean and the biased (population) variance of n
// blocks of vol elements, block i starting at x[off+i*stride], accumulated
// in float64 in two passes (NaN for no element): the statistics that
// BatchNormalization in training (the N blocks of a channel),
// InstanceNormalization (a plane) and LayerNormalization (a row)
// normalise with, written once. Each pass keeps simd.Lanes partial sums
// (element j of a block in sum j mod Lanes), so that additions do not
// wait on each other; float32 data goes through package simd's
// AVX-512 loops, which add in that same order.
func meanVar[T elemFloat](x []T, off, n, vol, stride int) (mean, variance float64) {
	var acc [simd.Lanes]float64
	for i := 0; i < n; i++ {
		seg := x[off+i*stride:][:vol]
		if nnIs32[T]() {
			simd.AddLanes(nnAs[float32](seg), &acc)
			continue
		}
		for j, e := range seg {
			acc[j%simd.Lanes] += float64(e)
		}
	}
	cnt := float64(n * vol)
	mean = laneSum(&acc) / cnt
	acc = [simd.Lanes]float64{}
	for i := 0; i < n; i++ {
		seg := x[off+i*stride:][:vol]
		if nnIs32[T]() {
			simd.AddSqDevLanes(nnAs[float32](seg), mean, &acc)
			continue
		}
		for j, e := range seg {
			d := float64(e) - mean
			acc[j%simd.Lanes] += d * d
		}
	}
	return mean, laneSum(&acc) / cnt
}

// laneSum adds the partial sums in order.
func laneSum(acc *[simd.Lanes]float64) float64 {
	var s float64
	for _, v := range acc {
		s += v
	}
	return s
}

// layerNormDims splits input 0 at the (normalised) axis: outer rows of
// inner elements each.
func layerNormDims(op *ir.Op) (outer, inner int, norm ir.Shape, err error) {
	xs := op.Input(0).Shape
	r := int64(len(xs))
	axis := op.AttrInt("axis", -1)
	if axis < -r || axis >= r {
		return 0, 0, nil, fmt.Errorf("%s: axis %d out of range for rank %d", op.Describe(), axis, r)
	}
	if axis < 0 {
		axis += r
	}
	return nnVol(xs[:axis]), nnVol(xs[axis:]), xs[axis:], nil
}

// layerNormWorkspace is room to expand a Scale or B that broadcasts to
// the normalised shape without having its size (0 when both have it).
func layerNormWorkspace(op *ir.Op) int64 {
	_, inner, _, err := layerNormDims(op)
	if err != nil {
		return 0
	}
	var n int64
	for i := 1; i <= 2; i++ {
		if v := op.Input(i); v != nil && nnVol(v.Shape) != inner {
			n += nnESize(op) * int64(inner)
		}
	}
	return n
}

// runLayerNorm normalises each row over the dimensions from axis on:
// y = (x - mean)·invstd·Scale + B with invstd = 1/sqrt(var + epsilon)
// (biased variance). Mean and InvStdDev, when present, get the row
// statistics in the stash_type (float or double).
func runLayerNorm(c *Ctx) error {
	return nnFloat(c).layerNorm(c)
}

func (floatK[T]) layerNorm(c *Ctx) error {
	outer, inner, norm, err := layerNormDims(c.Op)
	if err != nil {
		return err
	}
	eps := float64(c.Op.AttrFloat("epsilon", 1e-5))
	x, y := viewAs[T](c.In[0]), viewAs[T](c.Out[0])
	ws := c.Workspace
	es := int(nnESize(c.Op))
	param := func(i int) ([]T, error) {
		if i >= len(c.In) || c.In[i] == nil {
			return nil, nil
		}
		p := viewAs[T](c.In[i])
		if len(p) == inner {
			return p, nil
		}
		if len(ws) < es*inner {
			return nil, c.Errorf("workspace too small to broadcast input %d", i)
		}
		dst := viewAs[T](&Tensor{Data: ws[:es*inner]})
		ws = ws[es*inner:]
		if err := nnBroadcastTo(dst, norm, p, c.In[i].Shape); err != nil {
			return nil, c.Errorf("input %d: %v", i, err)
		}
		return dst, nil
	}
	scale, err := param(1)
	if err != nil {
		return err
	}
	bias, err := param(2)
	if err != nil {
		return err
	}
	stat := func(i int) (f32 []float32, f64 []float64) {
		if i < len(c.Out) && c.Out[i] != nil {
			if c.Out[i].DType == ir.Double {
				return nil, c.Out[i].F64()
			}
			return c.Out[i].F32(), nil
		}
		return nil, nil
	}
	mean32, mean64 := stat(1)
	inv32, inv64 := stat(2)
	Parallel(outer, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			row, dst := x[r*inner:(r+1)*inner], y[r*inner:(r+1)*inner]
			m, inv := meanInvStd(row, eps)
			switch {
			case mean32 != nil:
				mean32[r] = float32(m)
			case mean64 != nil:
				mean64[r] = m
			}
			switch {
			case inv32 != nil:
				inv32[r] = float32(inv)
			case inv64 != nil:
				inv64[r] = inv
			}
			mf, invf := T(m), T(inv)
			for j, e := range row {
				v := (e - mf) * invf
				if scale != nil {
					v *= scale[j]
				}
				if bias != nil {
					v += bias[j]
				}
				dst[j] = v
			}
		}
	})
	return nil
}

// meanInvStd is the mean of v and 1/sqrt(variance + eps) (the
// statistics of LayerNormalization's rows and InstanceNormalization's
// planes).
func meanInvStd[T elemFloat](v []T, eps float64) (mean, inv float64) {
	mean, variance := meanVar(v, 0, 1, len(v), len(v))
	return mean, 1 / math.Sqrt(variance+eps)
}

// nnBroadcastTo fills dst (shape to) with src (shape from) broadcast
// numpy-style (right-aligned; dimensions of 1 repeat).
func nnBroadcastTo[T elemFloat](dst []T, to ir.Shape, src []T, from ir.Shape) error {
	if len(from) > len(to) {
		return fmt.Errorf("shape %v does not broadcast to %v", from, to)
	}
	r := len(to)
	st := make([]int, r) // src stride per dst dimension (0 when broadcast)
	acc := 1
	for i := len(from) - 1; i >= 0; i-- {
		j := r - len(from) + i
		switch from[i] {
		case to[j]:
			st[j] = acc
		case 1:
		default:
			return fmt.Errorf("shape %v does not broadcast to %v", from, to)
		}
		acc *= int(from[i])
	}
	if len(dst) != nnVol(to) || len(src) != nnVol(from) {
		return fmt.Errorf("broadcast %v to %v: sizes %d and %d do not match the shapes", from, to, len(src), len(dst))
	}
	if len(dst) == 0 {
		return nil
	}
	if r == 0 {
		dst[0] = src[0]
		return nil
	}
	// Copy the last dimension at a time.
	last := int(to[r-1])
	coord := make([]int, r)
	for o := 0; o < len(dst); o += last {
		off := 0
		for i := 0; i < r-1; i++ {
			off += coord[i] * st[i]
		}
		row := dst[o : o+last]
		if st[r-1] == 0 {
			v := src[off]
			for j := range row {
				row[j] = v
			}
		} else {
			copy(row, src[off:off+last])
		}
		for i := r - 2; i >= 0; i-- {
			coord[i]++
			if coord[i] < int(to[i]) {
				break
			}
			coord[i] = 0
		}
	}
	return nil
}
