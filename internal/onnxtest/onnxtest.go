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

// ZeroDropoutRatios sets the ratio of every Dropout node whose ratio is a
// Constant node or an initializer to 0 and returns how many were not 0
// before. ONNX Runtime's Dropout masks differ from run to run and from
// tsplit's, so tests comparing runs make the masks all ones.
func ZeroDropoutRatios(t testing.TB, mp *onnxpb.ModelProto) int {
	t.Helper()
	g := mp.GetGraph()
	ratios := map[string]bool{}
	for _, n := range g.GetNode() {
		if n.GetOpType() == "Dropout" && len(n.GetInput()) > 1 && n.GetInput()[1] != "" {
			ratios[n.GetInput()[1]] = true
		}
	}
	changed := 0
	zero := func(tp *onnxpb.TensorProto) {
		nonzero := false
		for i, b := range tp.RawData {
			nonzero = nonzero || b != 0
			tp.RawData[i] = 0
		}
		for i, f := range tp.FloatData {
			nonzero = nonzero || f != 0
			tp.FloatData[i] = 0
		}
		for i, f := range tp.DoubleData {
			nonzero = nonzero || f != 0
			tp.DoubleData[i] = 0
		}
		if nonzero {
			changed++
		}
	}
	for _, n := range g.GetNode() {
		if n.GetOpType() != "Constant" || len(n.GetOutput()) != 1 || !ratios[n.GetOutput()[0]] {
			continue
		}
		found := false
		for _, a := range n.GetAttribute() {
			if a.GetName() == "value" && a.T != nil {
				zero(a.T)
				found = true
			}
		}
		if !found {
			t.Fatalf("Dropout ratio %q comes from a Constant without a tensor value", n.GetOutput()[0])
		}
		delete(ratios, n.GetOutput()[0])
	}
	for _, tp := range g.GetInitializer() {
		if ratios[tp.GetName()] {
			zero(tp)
			delete(ratios, tp.GetName())
		}
	}
	for r := range ratios {
		t.Fatalf("Dropout ratio %q is computed at run time; cannot zero it", r)
	}
	return changed
}
