package kernels

import "github.com/tsplit/tsplit/ir"

// Cast and CastLike between float32, float64, float16, bfloat16, the
// signed and unsigned integers of 8 to 64 bits, and bool. Conversions
// follow C/onnxruntime: floats truncate toward zero into integers,
// integers wrap into narrower integers, anything non-zero is true, and
// float16/bfloat16 round to nearest even. (Out-of-range float-to-integer
// results are unspecified in the ONNX spec as in C; Go gives a fixed
// value and never traps.) The float8 types are not supported: the
// saturate attribute only concerns them.

var castTypes = []ir.DType{ir.Float, ir.Double, ir.Float16, ir.BFloat16, ir.Int64, ir.Int32, ir.Int16, ir.Int8,
	ir.Uint8, ir.Uint16, ir.Uint32, ir.Uint64, ir.Bool}

func init() {
	regOp("Cast", 1, 1, castTypes, ewCastRun)
	regOp("CastLike", 2, 1, castTypes, ewCastRun)
}

func ewCastRun(c *Ctx) error {
	x, y := c.In[0], c.Out[0]
	if !x.Shape.Equal(y.Shape) {
		return c.Errorf("output shape %v differs from input shape %v", y.Shape, x.Shape)
	}
	if c.Op.Type == "Cast" {
		if to := ir.DType(c.Op.AttrInt("to", int64(y.DType))); to != y.DType {
			return c.Errorf("output type %v, attribute to says %v", y.DType, to)
		}
	} else if c.In[1].DType != y.DType {
		return c.Errorf("output type %v, input 1 has type %v", y.DType, c.In[1].DType)
	}
	if !ewCastable(x.DType) {
		return c.Errorf("cannot cast from %v", x.DType)
	}
	if !ewCastable(y.DType) {
		return c.Errorf("cannot cast to %v", y.DType)
	}
	if x.DType == y.DType {
		parCopy(y.Data, x.Data)
		return nil
	}
	if k := numOf(x.DType); k != nil {
		k.castTo(x, y)
		return nil
	}
	switch x.DType {
	case ir.Bool:
		// Normalise to 0/1 so any non-zero byte reads as true.
		ewCastChunks(x.Len(), y, func(lo, hi int, buf *[ewChunk]float32) {
			for i := lo; i < hi; i++ {
				buf[i-lo] = float32(b2byte(x.Data[i] != 0))
			}
		})
	case ir.Float16, ir.BFloat16:
		h := viewAs[uint16](x)
		dec := func(lo, hi int, dst []float32) {
			if x.DType == ir.BFloat16 {
				for i := lo; i < hi; i++ {
					dst[i-lo] = bf16ToF32(h[i])
				}
				return
			}
			for i := lo; i < hi; i++ {
				dst[i-lo] = halfToF32(h[i])
			}
		}
		if y.DType == ir.Float {
			f := viewAs[float32](y)
			parRange(len(h), 2, func(lo, hi int) { dec(lo, hi, f[lo:hi]) })
			return nil
		}
		ewCastChunks(len(h), y, func(lo, hi int, buf *[ewChunk]float32) { dec(lo, hi, buf[:]) })
	}
	return nil
}

// ewChunk is the element count of ewCastChunks' staging buffer.
const ewChunk = 1024

// ewCastChunks converts n elements into y through a float32 staging
// buffer on the stack (exact for bool and the 16-bit floats): fill
// writes elements [lo, hi) into it. No scratch outside the memory model.
func ewCastChunks(n int, y *Tensor, fill func(lo, hi int, buf *[ewChunk]float32)) {
	es := esize(y.DType)
	parRange((n+ewChunk-1)/ewChunk, ewChunk, func(c0, c1 int) {
		var buf [ewChunk]float32
		for ch := c0; ch < c1; ch++ {
			lo, hi := ch*ewChunk, min((ch+1)*ewChunk, n)
			fill(lo, hi, &buf)
			ewCastFrom(buf[:hi-lo], &Tensor{DType: y.DType, Data: y.Data[lo*es : hi*es]})
		}
	})
}

func ewCastable(dt ir.DType) bool {
	for _, d := range castTypes {
		if d == dt {
			return true
		}
	}
	return false
}

// ewCastNumKernels are the typed bodies of this file's numeric kernels.
type ewCastNumKernels interface {
	castTo(x, y *Tensor)
}

// castTo converts x, of element type T, into y.
func (numK[T, A]) castTo(x, y *Tensor) { ewCastFrom(viewAs[T](x), y) }

// ewCastFrom converts src into y, whatever y's (castable) type. The
// switch lists the destination types by hand: a conversion needs both
// element types as type parameters and a method cannot add one, so
// numOf picks the source and this picks the destination.
func ewCastFrom[S elemNum](src []S, y *Tensor) {
	switch y.DType {
	case ir.Float:
		ewConv(viewAs[float32](y), src)
	case ir.Double:
		ewConv(viewAs[float64](y), src)
	case ir.Int64:
		ewConv(viewAs[int64](y), src)
	case ir.Int32:
		ewConv(viewAs[int32](y), src)
	case ir.Int16:
		ewConv(viewAs[int16](y), src)
	case ir.Int8:
		ewConv(viewAs[int8](y), src)
	case ir.Uint8:
		ewConv(viewAs[uint8](y), src)
	case ir.Uint16:
		ewConv(viewAs[uint16](y), src)
	case ir.Uint32:
		ewConv(viewAs[uint32](y), src)
	case ir.Uint64:
		ewConv(viewAs[uint64](y), src)
	case ir.Bool:
		d := y.Data
		parRange(len(src), 1, func(lo, hi int) {
			for i := lo; i < hi; i++ {
				d[i] = b2byte(src[i] != 0)
			}
		})
	case ir.Float16:
		d := viewAs[uint16](y)
		parRange(len(src), 2, func(lo, hi int) {
			for i := lo; i < hi; i++ {
				d[i] = f32ToHalf(float32(src[i]))
			}
		})
	case ir.BFloat16:
		d := viewAs[uint16](y)
		parRange(len(src), 2, func(lo, hi int) {
			for i := lo; i < hi; i++ {
				d[i] = f32ToBF16(float32(src[i]))
			}
		})
	}
}

func ewConv[D, S elemNum](dst []D, src []S) {
	parRange(len(src), 1, func(lo, hi int) {
		d, s := dst[lo:hi], src[lo:hi]
		for i, v := range s {
			d[i] = D(v)
		}
	})
}
