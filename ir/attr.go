package ir

import (
	"fmt"
	"strconv"
	"strings"
)

// AttrType is the type of an attribute, numbered as ONNX's
// AttributeProto.AttributeType.
type AttrType int32

// Attribute types.
const (
	AttrUndefined     AttrType = 0
	AttrFloat         AttrType = 1
	AttrInt           AttrType = 2
	AttrString        AttrType = 3
	AttrTensor        AttrType = 4
	AttrGraph         AttrType = 5
	AttrFloats        AttrType = 6
	AttrInts          AttrType = 7
	AttrStrings       AttrType = 8
	AttrTensors       AttrType = 9
	AttrGraphs        AttrType = 10
	AttrSparseTensor  AttrType = 11
	AttrSparseTensors AttrType = 12
	AttrTypeProto     AttrType = 13
	AttrTypeProtos    AttrType = 14
)

var attrTypeNames = map[AttrType]string{
	AttrFloat: "float", AttrInt: "int", AttrString: "string", AttrTensor: "tensor",
	AttrGraph: "graph", AttrFloats: "floats", AttrInts: "ints", AttrStrings: "strings",
	AttrTensors: "tensors", AttrGraphs: "graphs", AttrSparseTensor: "sparse_tensor",
	AttrSparseTensors: "sparse_tensors", AttrTypeProto: "type_proto", AttrTypeProtos: "type_protos",
}

func (t AttrType) String() string {
	if s, ok := attrTypeNames[t]; ok {
		return s
	}
	return fmt.Sprintf("attrtype(%d)", int32(t))
}

// Attr is a typed attribute. Only the field matching Type is meaningful.
// Kinds the IR does not interpret (graphs, sparse tensors, type protos)
// are carried opaquely in Src by the frontend.
type Attr struct {
	Name    string
	Type    AttrType
	Float   float32
	Int     int64
	String  string
	Tensor  *Tensor
	Floats  []float32
	Ints    []int64
	Strings []string
	// Src is the serialized form the attribute was read from, owned by
	// the frontend and writer; it lets an untouched attribute be written
	// back exactly (doc strings, unknown fields). Setting an attribute
	// through Op.SetAttr clears it.
	Src any
}

// Format renders the attribute value for dumps: deterministic, short,
// and typed by its spelling so Parse reads it back: a float always has
// a point or an exponent (1.0, not 1), ints never do, strings are
// quoted, and an empty list says its type unless it is ints.
func (a *Attr) Format() string {
	switch a.Type {
	case AttrFloat:
		return formatFloatAttr(a.Float)
	case AttrInt:
		return strconv.FormatInt(a.Int, 10)
	case AttrString:
		return strconv.Quote(a.String)
	case AttrInts:
		return Shape(a.Ints).String()
	case AttrFloats:
		if len(a.Floats) == 0 {
			return "floats[]" // "[]" alone reads as ints
		}
		parts := make([]string, len(a.Floats))
		for i, f := range a.Floats {
			parts[i] = formatFloatAttr(f)
		}
		return "[" + strings.Join(parts, ",") + "]"
	case AttrStrings:
		if len(a.Strings) == 0 {
			return "strings[]"
		}
		parts := make([]string, len(a.Strings))
		for i, s := range a.Strings {
			parts[i] = strconv.Quote(s)
		}
		return "[" + strings.Join(parts, ",") + "]"
	case AttrTensor:
		if a.Tensor == nil {
			return "tensor"
		}
		if a.Tensor.Len() <= 8 && a.Tensor.DType != String {
			if a.Tensor.DType.IsFloat() {
				return fmt.Sprintf("%v%v%v", a.Tensor.DType, a.Tensor.Shape, a.Tensor.Float64s())
			}
			return fmt.Sprintf("%v%v%v", a.Tensor.DType, a.Tensor.Shape, a.Tensor.Int64s())
		}
		return fmt.Sprintf("%v%v", a.Tensor.DType, a.Tensor.Shape)
	}
	return "<" + a.Type.String() + ">"
}

// formatFloatAttr is the shortest float32 text, with ".0" added where
// that text would read as an integer.
func formatFloatAttr(f float32) string {
	s := strconv.FormatFloat(float64(f), 'g', -1, 32)
	if strings.Trim(s, "-0123456789") == "" {
		s += ".0"
	}
	return s
}
