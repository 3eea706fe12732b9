// Package onnxtest builds small ONNX models for tests: a few helpers
// around onnxpb so a test states a graph in a handful of lines.
package onnxtest

import (
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/tsplit/tsplit/onnxpb"
)

// Dim is a dimension: an int64 value, or a string naming a symbolic one.
type Dim any

// Input declares a tensor value of element type dt (ONNX numbering).
func Input(name string, dt int32, dims ...Dim) *onnxpb.ValueInfoProto {
	shape := &onnxpb.TensorShapeProto{}
	for _, d := range dims {
		switch x := d.(type) {
		case string:
			shape.Dim = append(shape.Dim, &onnxpb.TensorShapeProto_Dimension{Value: &onnxpb.TensorShapeProto_Dimension_DimParam{DimParam: x}})
		case int:
			shape.Dim = append(shape.Dim, &onnxpb.TensorShapeProto_Dimension{Value: &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: int64(x)}})
		case int64:
			shape.Dim = append(shape.Dim, &onnxpb.TensorShapeProto_Dimension{Value: &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: x}})
		}
	}
	return &onnxpb.ValueInfoProto{Name: proto.String(name), Type: &onnxpb.TypeProto{
		Value: &onnxpb.TypeProto_TensorType{TensorType: &onnxpb.TypeProto_Tensor{ElemType: proto.Int32(dt), Shape: shape}}}}
}

// Float is ONNX's element type number of float32; Int64 of int64.
const (
	Float int32 = 1
	Int64 int32 = 7
)

// Node makes a node; attributes are given with Ints, Int, Float, String.
func Node(op, name string, inputs, outputs []string, attrs ...*onnxpb.AttributeProto) *onnxpb.NodeProto {
	return &onnxpb.NodeProto{OpType: proto.String(op), Name: proto.String(name), Input: inputs, Output: outputs, Attribute: attrs}
}

// Int makes an int attribute.
func Int(name string, v int64) *onnxpb.AttributeProto {
	return &onnxpb.AttributeProto{Name: proto.String(name), Type: onnxpb.AttributeProto_INT.Enum(), I: proto.Int64(v)}
}

// Ints makes an ints attribute.
func Ints(name string, v ...int64) *onnxpb.AttributeProto {
	return &onnxpb.AttributeProto{Name: proto.String(name), Type: onnxpb.AttributeProto_INTS.Enum(), Ints: v}
}

// FloatTensor makes a float32 initializer with raw data.
func FloatTensor(name string, dims []int64, vals []float32) *onnxpb.TensorProto {
	raw := make([]byte, 4*len(vals))
	for i, v := range vals {
		binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(v))
	}
	return &onnxpb.TensorProto{Name: proto.String(name), Dims: dims, DataType: proto.Int32(Float), RawData: raw}
}

// Int64Tensor makes an int64 initializer with int64_data.
func Int64Tensor(name string, dims []int64, vals []int64) *onnxpb.TensorProto {
	return &onnxpb.TensorProto{Name: proto.String(name), Dims: dims, DataType: proto.Int32(Int64), Int64Data: vals}
}

// Graph assembles a model at opset 17, IR version 8.
func Graph(nodes []*onnxpb.NodeProto, inputs, outputs []*onnxpb.ValueInfoProto, inits ...*onnxpb.TensorProto) *onnxpb.ModelProto {
	return &onnxpb.ModelProto{
		IrVersion:    proto.Int64(8),
		ProducerName: proto.String("onnxtest"),
		OpsetImport:  []*onnxpb.OperatorSetIdProto{{Domain: proto.String(""), Version: proto.Int64(17)}},
		Graph: &onnxpb.GraphProto{
			Name: proto.String("test"), Node: nodes, Input: inputs, Output: outputs, Initializer: inits,
		},
	}
}

// Write encodes m into dir/name and returns the path.
func Write(t testing.TB, dir, name string, m *onnxpb.ModelProto) string {
	t.Helper()
	data, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return WriteBytes(t, dir, name, data)
}

// WriteBytes writes raw bytes into dir/name and returns the path.
func WriteBytes(t testing.TB, dir, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// ReluChain is a valid small model: x[batch,4] → Relu → Add(bias) → y.
func ReluChain() *onnxpb.ModelProto {
	return Graph(
		[]*onnxpb.NodeProto{
			Node("Relu", "relu", []string{"x"}, []string{"h"}),
			Node("Add", "add", []string{"h", "b"}, []string{"y"}),
		},
		[]*onnxpb.ValueInfoProto{Input("x", Float, "batch", 4)},
		[]*onnxpb.ValueInfoProto{Input("y", Float, "batch", 4)},
		FloatTensor("b", []int64{4}, []float32{1, 2, 3, 4}),
	)
}
