package ir

import (
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"strings"
)

// Shape is a static tensor shape. Every dimension is >= 0 once a model
// has been imported; a scalar has an empty shape.
type Shape []int64

// MaxBytes bounds the size of a single tensor. Anything larger is an
// absurd shape (a corrupt or hostile model), not a model to plan.
const MaxBytes = int64(1) << 50

// NumElements is the product of the dimensions. It fails on a negative
// dimension or when the product overflows int64.
func (s Shape) NumElements() (int64, error) {
	n := int64(1)
	for i, d := range s {
		if d < 0 {
			return 0, fmt.Errorf("dimension %d is negative (%d)", i, d)
		}
		// n·d > MaxInt64, without a division (the planner sizes
		// tensors in its inner loops).
		if hi, lo := bits.Mul64(uint64(n), uint64(d)); hi != 0 || lo > math.MaxInt64 {
			return 0, fmt.Errorf("element count of %v overflows int64", []int64(s))
		}
		n *= d
	}
	return n, nil
}

// Bytes is the storage size of a tensor of this shape and element type,
// checked against overflow and MaxBytes.
func (s Shape) Bytes(dt DType) (int64, error) {
	n, err := s.NumElements()
	if err != nil {
		return 0, err
	}
	bits := int64(dt.Bits())
	if bits == 0 {
		bits = 8 * 8 // strings: count a pointer-sized handle per element
	}
	if n > math.MaxInt64/bits {
		return 0, fmt.Errorf("byte size of %v × %v overflows int64", []int64(s), dt)
	}
	b := (n*bits + 7) / 8
	if b > MaxBytes {
		return 0, fmt.Errorf("tensor of %v × %v needs %d bytes, more than the %d-byte limit", []int64(s), dt, b, MaxBytes)
	}
	return b, nil
}

// Equal reports whether two shapes are identical.
func (s Shape) Equal(t Shape) bool {
	if len(s) != len(t) {
		return false
	}
	for i := range s {
		if s[i] != t[i] {
			return false
		}
	}
	return true
}

// Clone returns a copy that does not alias s.
func (s Shape) Clone() Shape {
	if s == nil {
		return nil
	}
	return append(Shape{}, s...)
}

func (s Shape) String() string {
	var b strings.Builder
	b.WriteByte('[')
	for i, d := range s {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatInt(d, 10))
	}
	b.WriteByte(']')
	return b.String()
}

// Broadcast computes the numpy-style broadcast of shapes.
func Broadcast(shapes ...Shape) (Shape, error) {
	rank := 0
	for _, s := range shapes {
		rank = max(rank, len(s))
	}
	out := make(Shape, rank)
	for i := range out {
		out[i] = 1
	}
	for _, s := range shapes {
		off := rank - len(s)
		for i, d := range s {
			o := out[off+i]
			switch {
			case d == o || d == 1:
			case o == 1:
				out[off+i] = d
			default:
				return nil, fmt.Errorf("shapes %v cannot be broadcast (dimension %d: %d vs %d)", shapes, off+i, o, d)
			}
		}
	}
	return out, nil
}
