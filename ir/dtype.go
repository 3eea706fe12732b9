package ir

import "fmt"

// DType is a tensor element type. The numbering is ONNX's
// TensorProto.DataType so conversion is a cast.
type DType int32

// Element types, numbered as in the ONNX IR specification.
const (
	Undefined      DType = 0
	Float          DType = 1
	Uint8          DType = 2
	Int8           DType = 3
	Uint16         DType = 4
	Int16          DType = 5
	Int32          DType = 6
	Int64          DType = 7
	String         DType = 8
	Bool           DType = 9
	Float16        DType = 10
	Double         DType = 11
	Uint32         DType = 12
	Uint64         DType = 13
	Complex64      DType = 14
	Complex128     DType = 15
	BFloat16       DType = 16
	Float8E4M3FN   DType = 17
	Float8E4M3FNUZ DType = 18
	Float8E5M2     DType = 19
	Float8E5M2FNUZ DType = 20
	Uint4          DType = 21
	Int4           DType = 22
)

var dtypeInfo = [...]struct {
	name string
	bits int // 0 for variable-size (string)
}{
	Undefined:      {"undef", 0},
	Float:          {"f32", 32},
	Uint8:          {"u8", 8},
	Int8:           {"i8", 8},
	Uint16:         {"u16", 16},
	Int16:          {"i16", 16},
	Int32:          {"i32", 32},
	Int64:          {"i64", 64},
	String:         {"str", 0},
	Bool:           {"bool", 8},
	Float16:        {"f16", 16},
	Double:         {"f64", 64},
	Uint32:         {"u32", 32},
	Uint64:         {"u64", 64},
	Complex64:      {"c64", 64},
	Complex128:     {"c128", 128},
	BFloat16:       {"bf16", 16},
	Float8E4M3FN:   {"f8e4m3fn", 8},
	Float8E4M3FNUZ: {"f8e4m3fnuz", 8},
	Float8E5M2:     {"f8e5m2", 8},
	Float8E5M2FNUZ: {"f8e5m2fnuz", 8},
	Uint4:          {"u4", 4},
	Int4:           {"i4", 4},
}

// Valid reports whether d is a known, defined element type.
func (d DType) Valid() bool { return d > Undefined && int(d) < len(dtypeInfo) }

func (d DType) String() string {
	if d >= 0 && int(d) < len(dtypeInfo) {
		return dtypeInfo[d].name
	}
	return fmt.Sprintf("dtype(%d)", int32(d))
}

// Bits is the width of one element in bits; 0 for strings.
func (d DType) Bits() int {
	if d >= 0 && int(d) < len(dtypeInfo) {
		return dtypeInfo[d].bits
	}
	return 0
}

// IsFloat reports whether d is a floating-point type.
func (d DType) IsFloat() bool {
	switch d {
	case Float, Double, Float16, BFloat16, Float8E4M3FN, Float8E4M3FNUZ, Float8E5M2, Float8E5M2FNUZ:
		return true
	}
	return false
}

// IsInt reports whether d is an integer type (signed or unsigned).
func (d DType) IsInt() bool {
	switch d {
	case Uint8, Int8, Uint16, Int16, Int32, Int64, Uint32, Uint64, Uint4, Int4:
		return true
	}
	return false
}
