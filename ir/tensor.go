package ir

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/x448/float16"
)

// Tensor is a constant tensor: element type, shape and row-major
// little-endian element bytes (the layout of ONNX raw_data).
type Tensor struct {
	DType DType
	Shape Shape
	Raw   []byte
}

// NewTensor checks that raw has exactly the bytes the shape needs.
func NewTensor(dt DType, shape Shape, raw []byte) (*Tensor, error) {
	n, err := shape.Bytes(dt)
	if err != nil {
		return nil, err
	}
	if dt != String && int64(len(raw)) != n {
		return nil, fmt.Errorf("tensor %v%v needs %d bytes, has %d", dt, shape, n, len(raw))
	}
	return &Tensor{DType: dt, Shape: shape, Raw: raw}, nil
}

// Len is the element count.
func (t *Tensor) Len() int {
	n, _ := t.Shape.NumElements()
	return int(n)
}

// Int64s returns the elements as int64, converting from any integer,
// bool or float type. It is meant for small shape tensors.
func (t *Tensor) Int64s() []int64 {
	n := t.Len()
	out := make([]int64, n)
	for i := range out {
		out[i] = t.intAt(i)
	}
	return out
}

// Float64s returns the elements as float64.
func (t *Tensor) Float64s() []float64 {
	n := t.Len()
	out := make([]float64, n)
	for i := range out {
		out[i] = t.floatAt(i)
	}
	return out
}

// Float32s returns the elements of a float32 tensor.
func (t *Tensor) Float32s() []float32 {
	if t.DType != Float {
		f := t.Float64s()
		out := make([]float32, len(f))
		for i, v := range f {
			out[i] = float32(v)
		}
		return out
	}
	out := make([]float32, t.Len())
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(t.Raw[4*i:]))
	}
	return out
}

func (t *Tensor) intAt(i int) int64 {
	r := t.Raw
	switch t.DType {
	case Int64:
		return int64(binary.LittleEndian.Uint64(r[8*i:]))
	case Uint64:
		return int64(binary.LittleEndian.Uint64(r[8*i:]))
	case Int32:
		return int64(int32(binary.LittleEndian.Uint32(r[4*i:])))
	case Uint32:
		return int64(binary.LittleEndian.Uint32(r[4*i:]))
	case Int16:
		return int64(int16(binary.LittleEndian.Uint16(r[2*i:])))
	case Uint16:
		return int64(binary.LittleEndian.Uint16(r[2*i:]))
	case Int8:
		return int64(int8(r[i]))
	case Uint8, Bool:
		return int64(r[i])
	case Float, Double, Float16, BFloat16:
		return int64(t.floatAt(i))
	}
	return 0
}

func (t *Tensor) floatAt(i int) float64 {
	r := t.Raw
	switch t.DType {
	case Float:
		return float64(math.Float32frombits(binary.LittleEndian.Uint32(r[4*i:])))
	case Double:
		return math.Float64frombits(binary.LittleEndian.Uint64(r[8*i:]))
	case Uint64:
		return float64(binary.LittleEndian.Uint64(r[8*i:]))
	case Float16:
		return float64(float16.Frombits(binary.LittleEndian.Uint16(r[2*i:])).Float32())
	case BFloat16:
		// bfloat16 is the upper half of a float32.
		return float64(math.Float32frombits(uint32(binary.LittleEndian.Uint16(r[2*i:])) << 16))
	}
	return float64(t.intAt(i))
}

// TensorFromInt64s builds a tensor of type dt (integer, bool or float)
// from int64 values.
func TensorFromInt64s(dt DType, shape Shape, vals []int64) *Tensor {
	f := make([]float64, len(vals))
	for i, v := range vals {
		f[i] = float64(v)
	}
	if dt == Int64 || dt == Uint64 {
		raw := make([]byte, 8*len(vals))
		for i, v := range vals {
			binary.LittleEndian.PutUint64(raw[8*i:], uint64(v))
		}
		return &Tensor{DType: dt, Shape: shape.Clone(), Raw: raw}
	}
	return tensorFrom(dt, shape, vals, f)
}

// TensorFromFloat64s builds a tensor of type dt from float64 values.
func TensorFromFloat64s(dt DType, shape Shape, vals []float64) *Tensor {
	iv := make([]int64, len(vals))
	for i, v := range vals {
		iv[i] = int64(v)
	}
	return tensorFrom(dt, shape, iv, vals)
}

func tensorFrom(dt DType, shape Shape, iv []int64, fv []float64) *Tensor {
	n := len(iv)
	bytes := dt.Bits() / 8
	raw := make([]byte, bytes*n)
	for i := 0; i < n; i++ {
		switch dt {
		case Float:
			binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(float32(fv[i])))
		case Float16:
			binary.LittleEndian.PutUint16(raw[2*i:], float16.Fromfloat32(float32(fv[i])).Bits())
		case BFloat16:
			// Round to nearest even on the dropped half.
			b := math.Float32bits(float32(fv[i]))
			b += 0x7fff + (b>>16)&1
			binary.LittleEndian.PutUint16(raw[2*i:], uint16(b>>16))
		case Double:
			binary.LittleEndian.PutUint64(raw[8*i:], math.Float64bits(fv[i]))
		case Int64, Uint64:
			binary.LittleEndian.PutUint64(raw[8*i:], uint64(iv[i]))
		case Int32, Uint32:
			binary.LittleEndian.PutUint32(raw[4*i:], uint32(iv[i]))
		case Int16, Uint16:
			binary.LittleEndian.PutUint16(raw[2*i:], uint16(iv[i]))
		case Int8, Uint8:
			raw[i] = byte(iv[i])
		case Bool:
			if iv[i] != 0 || fv[i] != 0 {
				raw[i] = 1
			}
		}
	}
	return &Tensor{DType: dt, Shape: shape.Clone(), Raw: raw}
}
