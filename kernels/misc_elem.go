package kernels

import (
	"math"
	"unsafe"

	"github.com/tsplit/tsplit/ir"
)

// Element types and the one place a kernel turns a tensor's ir.DType
// into a Go type.
//
// Every kernel body is written once, generic over its element type. Go
// has neither generic methods nor values of an uninstantiated generic
// function, so a kernel cannot hand "the body, for whatever type this
// is" to a dispatcher; instead the typed bodies are methods of three
// small generic types, one per family of element types:
//
//	numK[T, A]  every numeric type T (A: what sums of T accumulate in)
//	floatK[T]   float32 and float64
//	wordK[T]    data moved as raw elements of 1, 2, 4 or 8 bytes
//
// numOf, floatOf and wordOf are the switches from a DType (or an element
// width) to an instantiation (Cast, which needs a second type parameter,
// lists its destination types itself); they return it as an interface
// listing the typed bodies each kernel file declares (ewNumKernels in
// ew_binary.go, and so on). A kernel makes one interface call per run;
// the loops inside are instantiated per type (float32 and float64 have
// different GC shapes, likewise each integer width), so they compile to
// the machine code a hand-written loop of that type would.

// elemNum is every element type the arithmetic kernels instantiate for.
type elemNum interface {
	float32 | float64 | int64 | int32 | int16 | int8 | uint8 | uint16 | uint32 | uint64
}

// elemFloat is the floating-point subset: the element types of the nn
// kernels and of the float-only math.
type elemFloat interface{ float32 | float64 }

// elemWord is an unsigned integer of each width data moves in.
type elemWord interface {
	uint8 | uint16 | uint32 | uint64
}

// Element-type lists for Kernel.DTypes.
var (
	floatTypes  = []ir.DType{ir.Float, ir.Double}
	signedTypes = []ir.DType{ir.Float, ir.Double, ir.Int64, ir.Int32, ir.Int16, ir.Int8}
	numTypes    = []ir.DType{ir.Float, ir.Double, ir.Int64, ir.Int32, ir.Int16, ir.Int8, ir.Uint8, ir.Uint16, ir.Uint32, ir.Uint64}
	// byteTypes are the types whose elements are whole bytes: every type
	// a data-moving kernel can handle without understanding the values.
	byteTypes = []ir.DType{ir.Float, ir.Double, ir.Float16, ir.BFloat16, ir.Int64, ir.Int32, ir.Int16, ir.Int8,
		ir.Uint8, ir.Uint16, ir.Uint32, ir.Uint64, ir.Bool,
		ir.Float8E4M3FN, ir.Float8E4M3FNUZ, ir.Float8E5M2, ir.Float8E5M2FNUZ}
)

// numK holds the typed bodies of the numeric kernels for element type
// T; A is the accumulator of its sums and products (float64 for
// floats, int64 for integers).
type numK[T elemNum, A float64 | int64] struct{}

// numKernels is numK's method set, gathered from the kernel files.
type numKernels interface {
	ewNumKernels
	ewUnaryNumKernels
	ewCastNumKernels
	redNumKernels
	shNumKernels
	miscNumKernels
}

// numOf returns the numeric kernels of dt, nil if dt is not numeric.
func numOf(dt ir.DType) numKernels {
	switch dt {
	case ir.Float:
		return numK[float32, float64]{}
	case ir.Double:
		return numK[float64, float64]{}
	case ir.Int64:
		return numK[int64, int64]{}
	case ir.Int32:
		return numK[int32, int64]{}
	case ir.Int16:
		return numK[int16, int64]{}
	case ir.Int8:
		return numK[int8, int64]{}
	case ir.Uint8:
		return numK[uint8, int64]{}
	case ir.Uint16:
		return numK[uint16, int64]{}
	case ir.Uint32:
		return numK[uint32, int64]{}
	case ir.Uint64:
		return numK[uint64, int64]{}
	}
	return nil
}

// wordK holds the typed bodies of the kernels that move elements
// without reading them, for elements of T's width.
type wordK[T elemWord] struct{}

// wordKernels is wordK's method set, gathered from the kernel files.
type wordKernels interface {
	miscWordKernels
	ewWordKernels
	shWordKernels
}

// wordOf returns the data-moving kernels for elements of es bytes, nil
// for other widths.
func wordOf(es int) wordKernels {
	switch es {
	case 1:
		return wordK[uint8]{}
	case 2:
		return wordK[uint16]{}
	case 4:
		return wordK[uint32]{}
	case 8:
		return wordK[uint64]{}
	}
	return nil
}

// floatK holds the typed bodies of the float-only kernels.
type floatK[T elemFloat] struct{}

// floatKernels is floatK's method set, gathered from the kernel files.
type floatKernels interface {
	ewFloatKernels
	redFloatKernels
	miscFloatKernels
	nnFloatKernels
}

// floatOf returns the float kernels of dt, nil unless dt is float32 or
// float64.
func floatOf(dt ir.DType) floatKernels {
	switch dt {
	case ir.Float:
		return floatK[float32]{}
	case ir.Double:
		return floatK[float64]{}
	}
	return nil
}

// isFloat reports whether T is a floating-point type (1/2 is 0 only in
// integer division).
func isFloat[T elemNum]() bool {
	var one T = 1
	return one/2 != 0
}

// elemLimits is the lowest and highest value of T (infinities for
// floats).
func elemLimits[T elemNum]() (lo, hi T) {
	if isFloat[T]() {
		inf := math.Inf(1)
		return T(-inf), T(inf)
	}
	var zero, one T = 0, 1
	if zero-one > zero { // unsigned: 0 - 1 wraps to the highest value
		return zero, zero - one
	}
	h := int64(1)<<(8*unsafe.Sizeof(zero)-1) - 1 // wraps for int64 too
	return T(-h - 1), T(h)
}
