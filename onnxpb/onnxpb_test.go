package onnxpb

import (
	"bytes"
	"encoding/binary"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/tsplit/tsplit/internal/oracle"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

func kv(k, v string) *StringStringEntryProto {
	return &StringStringEntryProto{Key: proto.String(k), Value: proto.String(v)}
}

func tensorType(elem TensorProto_DataType, dims ...any) *TypeProto {
	shape := &TensorShapeProto{}
	for _, d := range dims {
		dim := &TensorShapeProto_Dimension{}
		switch d := d.(type) {
		case int:
			dim.Value = &TensorShapeProto_Dimension_DimValue{DimValue: int64(d)}
		case string:
			dim.Value = &TensorShapeProto_Dimension_DimParam{DimParam: d}
		}
		shape.Dim = append(shape.Dim, dim)
	}
	return &TypeProto{Value: &TypeProto_TensorType{TensorType: &TypeProto_Tensor{
		ElemType: proto.Int32(int32(elem)), Shape: shape}}}
}

// tensorOf returns a two-element tensor of type dt with its data in the
// typed field that the IR prescribes for dt.
func tensorOf(dt TensorProto_DataType) *TensorProto {
	t := &TensorProto{
		Name:     proto.String("t_" + dt.String()),
		DataType: proto.Int32(int32(dt)),
		Dims:     []int64{2},
	}
	switch dt {
	case TensorProto_FLOAT:
		t.FloatData = []float32{1.5, -2}
	case TensorProto_COMPLEX64:
		t.Dims = []int64{1}
		t.FloatData = []float32{1, 2} // 1+2i
	case TensorProto_DOUBLE:
		t.DoubleData = []float64{math.Pi, -1e300}
	case TensorProto_COMPLEX128:
		t.Dims = []int64{1}
		t.DoubleData = []float64{3, 4}
	case TensorProto_INT64:
		t.Int64Data = []int64{math.MinInt64, math.MaxInt64}
	case TensorProto_UINT32, TensorProto_UINT64:
		t.Uint64Data = []uint64{0, math.MaxUint64}
	case TensorProto_STRING:
		t.StringData = [][]byte{[]byte("héllo"), {}}
	case TensorProto_UINT4, TensorProto_INT4, TensorProto_FLOAT4E2M1:
		t.Int32Data = []int32{0x7f} // two 4-bit elements in one entry
	default: // 8/16/32-bit integer types, BOOL, FLOAT16, BFLOAT16, FLOAT8*
		t.Int32Data = []int32{1, -1}
	}
	return t
}

// allDataTypes lists every DataType value declared in the schema.
func allDataTypes() []TensorProto_DataType {
	vals := TensorProto_DataType(0).Descriptor().Values()
	var out []TensorProto_DataType
	for i := 0; i < vals.Len(); i++ {
		out = append(out, TensorProto_DataType(vals.Get(i).Number()))
	}
	return out
}

// fullModel builds a ModelProto that sets every top-level feature of IR 10.
func fullModel() *ModelProto {
	var inits []*TensorProto
	var vinfo []*ValueInfoProto
	for _, dt := range allDataTypes() {
		if dt == TensorProto_UNDEFINED {
			continue
		}
		t := tensorOf(dt)
		inits = append(inits, t)
		vinfo = append(vinfo, &ValueInfoProto{Name: t.Name, Type: tensorType(dt, 2)})
	}
	// raw_data, segment, doc_string and metadata_props on a tensor.
	raw := make([]byte, 8)
	binary.LittleEndian.PutUint32(raw, math.Float32bits(0.5))
	binary.LittleEndian.PutUint32(raw[4:], math.Float32bits(-0.5))
	inits = append(inits, &TensorProto{
		Name: proto.String("raw"), DataType: proto.Int32(int32(TensorProto_FLOAT)),
		Dims: []int64{2}, RawData: raw, DocString: proto.String("raw bytes"),
		Segment:       &TensorProto_Segment{Begin: proto.Int64(0), End: proto.Int64(2)},
		MetadataProps: []*StringStringEntryProto{kv("origin", "test")},
	})
	// Data held in an external file.
	inits = append(inits, &TensorProto{
		Name: proto.String("ext"), DataType: proto.Int32(int32(TensorProto_FLOAT)),
		Dims:         []int64{1024, 1024},
		DataLocation: TensorProto_EXTERNAL.Enum(),
		ExternalData: []*StringStringEntryProto{
			kv("location", "weights.bin"), kv("offset", "4096"),
			kv("length", "4194304"), kv("checksum", "da39a3ee5e6b4b0d3255bfef95601890afd80709"),
		},
	})

	sparse := &SparseTensorProto{
		Values: &TensorProto{Name: proto.String("sp"), DataType: proto.Int32(int32(TensorProto_FLOAT)),
			Dims: []int64{2}, FloatData: []float32{7, 8}},
		Indices: &TensorProto{DataType: proto.Int32(int32(TensorProto_INT64)),
			Dims: []int64{2}, Int64Data: []int64{1, 5}},
		Dims: []int64{2, 3},
	}

	sub := &GraphProto{
		Name:   proto.String("body"),
		Node:   []*NodeProto{{OpType: proto.String("Identity"), Input: []string{"a"}, Output: []string{"b"}}},
		Input:  []*ValueInfoProto{{Name: proto.String("a")}},
		Output: []*ValueInfoProto{{Name: proto.String("b")}},
	}
	seqType := &TypeProto{Value: &TypeProto_SequenceType{SequenceType: &TypeProto_Sequence{
		ElemType: tensorType(TensorProto_FLOAT, "N")}}}
	mapType := &TypeProto{Value: &TypeProto_MapType{MapType: &TypeProto_Map{
		KeyType: proto.Int32(int32(TensorProto_STRING)), ValueType: tensorType(TensorProto_INT64)}}}
	optType := &TypeProto{Value: &TypeProto_OptionalType{OptionalType: &TypeProto_Optional{
		ElemType: seqType}}}
	sparseType := &TypeProto{Denotation: proto.String("TENSOR"),
		Value: &TypeProto_SparseTensorType{SparseTensorType: &TypeProto_SparseTensor{
			ElemType: proto.Int32(int32(TensorProto_FLOAT)),
			Shape: &TensorShapeProto{Dim: []*TensorShapeProto_Dimension{
				{Value: &TensorShapeProto_Dimension_DimValue{DimValue: 2}, Denotation: proto.String("DATA_BATCH")},
				{}, // unknown dimension: neither value nor param
			}}}}}

	attr := func(name string, typ AttributeProto_AttributeType) *AttributeProto {
		return &AttributeProto{Name: proto.String(name), Type: typ.Enum(), DocString: proto.String(name + " doc")}
	}
	attrs := []*AttributeProto{}
	a := attr("f", AttributeProto_FLOAT)
	a.F = proto.Float32(0.25)
	attrs = append(attrs, a)
	a = attr("i", AttributeProto_INT)
	a.I = proto.Int64(-7)
	attrs = append(attrs, a)
	a = attr("s", AttributeProto_STRING)
	a.S = []byte("text")
	attrs = append(attrs, a)
	a = attr("t", AttributeProto_TENSOR)
	a.T = tensorOf(TensorProto_INT8)
	attrs = append(attrs, a)
	a = attr("g", AttributeProto_GRAPH)
	a.G = sub
	attrs = append(attrs, a)
	a = attr("sparse", AttributeProto_SPARSE_TENSOR)
	a.SparseTensor = sparse
	attrs = append(attrs, a)
	a = attr("tp", AttributeProto_TYPE_PROTO)
	a.Tp = mapType
	attrs = append(attrs, a)
	a = attr("floats", AttributeProto_FLOATS)
	a.Floats = []float32{1, 2, 3}
	attrs = append(attrs, a)
	a = attr("ints", AttributeProto_INTS)
	a.Ints = []int64{-1, 0, 1 << 40}
	attrs = append(attrs, a)
	a = attr("strings", AttributeProto_STRINGS)
	a.Strings = [][]byte{[]byte("x"), []byte("y")}
	attrs = append(attrs, a)
	a = attr("tensors", AttributeProto_TENSORS)
	a.Tensors = []*TensorProto{tensorOf(TensorProto_FLOAT16), tensorOf(TensorProto_BOOL)}
	attrs = append(attrs, a)
	a = attr("graphs", AttributeProto_GRAPHS)
	a.Graphs = []*GraphProto{sub, sub}
	attrs = append(attrs, a)
	a = attr("sparse_tensors", AttributeProto_SPARSE_TENSORS)
	a.SparseTensors = []*SparseTensorProto{sparse}
	attrs = append(attrs, a)
	a = attr("type_protos", AttributeProto_TYPE_PROTOS)
	a.TypeProtos = []*TypeProto{seqType, optType, sparseType}
	attrs = append(attrs, a)

	node := &NodeProto{
		Name: proto.String("n0"), OpType: proto.String("MyFunc"), Domain: proto.String("org.tsplit"),
		Overload: proto.String("v2"), Input: []string{"X", "", "raw"}, Output: []string{"Y"},
		Attribute: attrs, DocString: proto.String("calls the local function"),
		MetadataProps: []*StringStringEntryProto{kv("source", "layer1")},
	}

	fn := &FunctionProto{
		Name: proto.String("MyFunc"), Domain: proto.String("org.tsplit"), Overload: proto.String("v2"),
		Input: []string{"x", "opt", "w"}, Output: []string{"y"},
		Attribute: []string{"f"},
		AttributeProto: []*AttributeProto{{Name: proto.String("alpha"), Type: AttributeProto_FLOAT.Enum(),
			F: proto.Float32(1)}},
		Node: []*NodeProto{{OpType: proto.String("LeakyRelu"), Input: []string{"x"}, Output: []string{"y"},
			Attribute: []*AttributeProto{{Name: proto.String("alpha"), RefAttrName: proto.String("alpha"),
				Type: AttributeProto_FLOAT.Enum()}}}},
		DocString:     proto.String("function doc"),
		OpsetImport:   []*OperatorSetIdProto{{Domain: proto.String(""), Version: proto.Int64(21)}},
		ValueInfo:     []*ValueInfoProto{{Name: proto.String("x"), Type: tensorType(TensorProto_FLOAT, "N", 3)}},
		MetadataProps: []*StringStringEntryProto{kv("fn", "meta")},
	}

	graph := &GraphProto{
		Name:              proto.String("main"),
		DocString:         proto.String("graph doc"),
		Node:              []*NodeProto{node},
		Initializer:       inits,
		SparseInitializer: []*SparseTensorProto{sparse},
		Input: []*ValueInfoProto{{Name: proto.String("X"), Type: tensorType(TensorProto_FLOAT, "N", 3),
			DocString: proto.String("input"), MetadataProps: []*StringStringEntryProto{kv("k", "v")}}},
		Output:    []*ValueInfoProto{{Name: proto.String("Y"), Type: optType}},
		ValueInfo: vinfo,
		QuantizationAnnotation: []*TensorAnnotation{{TensorName: proto.String("X"),
			QuantParameterTensorNames: []*StringStringEntryProto{kv("SCALE_TENSOR", "x_scale"),
				kv("ZERO_POINT_TENSOR", "x_zp")}}},
		MetadataProps: []*StringStringEntryProto{kv("graph", "meta")},
	}

	return &ModelProto{
		IrVersion:       proto.Int64(int64(Version_IR_VERSION)),
		OpsetImport:     []*OperatorSetIdProto{{Domain: proto.String(""), Version: proto.Int64(21)}, {Domain: proto.String("org.tsplit"), Version: proto.Int64(1)}},
		ProducerName:    proto.String("tsplit"),
		ProducerVersion: proto.String("0.0.0-test"),
		Domain:          proto.String("org.tsplit.test"),
		ModelVersion:    proto.Int64(3),
		DocString:       proto.String("model doc"),
		Graph:           graph,
		MetadataProps:   []*StringStringEntryProto{kv("model_author", "tsplit"), kv("model_license", "none")},
		TrainingInfo: []*TrainingInfoProto{{
			Initialization:        &GraphProto{Name: proto.String("init"), Output: []*ValueInfoProto{{Name: proto.String("w0")}}},
			Algorithm:             &GraphProto{Name: proto.String("step"), Output: []*ValueInfoProto{{Name: proto.String("w1")}}},
			InitializationBinding: []*StringStringEntryProto{kv("raw", "w0")},
			UpdateBinding:         []*StringStringEntryProto{kv("raw", "w1")},
		}},
		Functions: []*FunctionProto{fn},
	}
}

func TestModelRoundTrip(t *testing.T) {
	m := fullModel()
	data, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var got ModelProto
	if err := proto.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(m, &got) {
		t.Fatal("decoded model differs from the original")
	}
	if len(got.ProtoReflect().GetUnknown()) != 0 {
		t.Fatal("known fields were decoded as unknown")
	}

	// Every DataType value made it through, in the expected data field.
	seen := map[int32]bool{}
	for _, init := range got.GetGraph().GetInitializer() {
		seen[init.GetDataType()] = true
	}
	for _, dt := range allDataTypes() {
		if dt != TensorProto_UNDEFINED && !seen[int32(dt)] {
			t.Errorf("no initializer of type %v after round trip", dt)
		}
	}
	if n := len(allDataTypes()); n != 24 { // UNDEFINED..FLOAT4E2M1
		t.Errorf("DataType has %d values, want 24", n)
	}

	// Spot checks of IR-9/10 fields.
	fn := got.GetFunctions()[0]
	if fn.GetOverload() != "v2" || len(fn.GetAttributeProto()) != 1 || len(fn.GetValueInfo()) != 1 ||
		fn.GetMetadataProps()[0].GetValue() != "meta" {
		t.Errorf("function fields lost: %v", fn)
	}
	n := got.GetGraph().GetNode()[0]
	if n.GetOverload() != "v2" || n.GetMetadataProps()[0].GetKey() != "source" {
		t.Errorf("node fields lost: %v", n)
	}
	var ext *TensorProto
	for _, init := range got.GetGraph().GetInitializer() {
		if init.GetName() == "ext" {
			ext = init
		}
	}
	if ext.GetDataLocation() != TensorProto_EXTERNAL || len(ext.GetExternalData()) != 4 ||
		ext.GetExternalData()[0].GetValue() != "weights.bin" {
		t.Errorf("external data fields lost: %v", ext)
	}
	if got.GetGraph().GetSparseInitializer()[0].GetIndices().GetInt64Data()[1] != 5 {
		t.Error("sparse initializer lost")
	}

	// Deterministic encoding is stable, and re-encoding the decoded model
	// gives the same bytes.
	det := proto.MarshalOptions{Deterministic: true}
	b1, err := det.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	b2, err := det.Marshal(&got)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b1, b2) {
		t.Error("deterministic encodings of equal models differ")
	}
}

// TestPackedEncoding checks that the numeric tensor fields use the packed
// encoding of the official schema (one length-delimited record), while
// TensorProto.dims stays unpacked, as in the official schema.
func TestPackedEncoding(t *testing.T) {
	tp := &TensorProto{Dims: []int64{2, 3}, FloatData: []float32{1, 2}, Int32Data: []int32{1, 2},
		Int64Data: []int64{1, 2}, DoubleData: []float64{1, 2}, Uint64Data: []uint64{1, 2}}
	b, err := proto.Marshal(tp)
	if err != nil {
		t.Fatal(err)
	}
	count := map[protowire.Number][]protowire.Type{}
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			t.Fatal(protowire.ParseError(n))
		}
		b = b[n:]
		m := protowire.ConsumeFieldValue(num, typ, b)
		if m < 0 {
			t.Fatal(protowire.ParseError(m))
		}
		b = b[m:]
		count[num] = append(count[num], typ)
	}
	if got := count[1]; len(got) != 2 || got[0] != protowire.VarintType {
		t.Errorf("dims: got wire types %v, want two unpacked varints", got)
	}
	for _, num := range []protowire.Number{4, 5, 7, 10, 11} {
		if got := count[num]; len(got) != 1 || got[0] != protowire.BytesType {
			t.Errorf("field %d: got wire types %v, want one packed record", num, got)
		}
	}
}

// appendUnknown appends field 999 (varint 4242) and field 1000 (bytes) to b.
func appendUnknown(b []byte) []byte {
	b = protowire.AppendTag(b, 999, protowire.VarintType)
	b = protowire.AppendVarint(b, 4242)
	b = protowire.AppendTag(b, 1000, protowire.BytesType)
	return protowire.AppendBytes(b, []byte("future"))
}

// unknownFields decodes raw unknown-field bytes into number -> values.
func unknownFields(t *testing.T, raw []byte) map[protowire.Number][]any {
	t.Helper()
	out := map[protowire.Number][]any{}
	for len(raw) > 0 {
		num, typ, n := protowire.ConsumeTag(raw)
		if n < 0 {
			t.Fatal(protowire.ParseError(n))
		}
		raw = raw[n:]
		switch typ {
		case protowire.VarintType:
			v, n := protowire.ConsumeVarint(raw)
			if n < 0 {
				t.Fatal(protowire.ParseError(n))
			}
			out[num] = append(out[num], v)
			raw = raw[n:]
		case protowire.BytesType:
			v, n := protowire.ConsumeBytes(raw)
			if n < 0 {
				t.Fatal(protowire.ParseError(n))
			}
			out[num] = append(out[num], string(v))
			raw = raw[n:]
		default:
			n := protowire.ConsumeFieldValue(num, typ, raw)
			if n < 0 {
				t.Fatal(protowire.ParseError(n))
			}
			raw = raw[n:]
		}
	}
	return out
}

func checkUnknown(t *testing.T, what string, m proto.Message) {
	t.Helper()
	u := unknownFields(t, m.ProtoReflect().GetUnknown())
	if len(u[999]) != 1 || u[999][0] != uint64(4242) {
		t.Errorf("%s: unknown field 999 = %v, want [4242]", what, u[999])
	}
	if len(u[1000]) != 1 || u[1000][0] != "future" {
		t.Errorf("%s: unknown field 1000 = %v, want [future]", what, u[1000])
	}
}

func TestUnknownFieldsSurvive(t *testing.T) {
	det := proto.MarshalOptions{Deterministic: true}
	node := &NodeProto{OpType: proto.String("Relu"), Input: []string{"x"}, Output: []string{"y"}}

	for _, tc := range []struct {
		name string
		msg  proto.Message
		new  func() proto.Message
	}{
		{"NodeProto", node, func() proto.Message { return &NodeProto{} }},
		{"ModelProto", &ModelProto{IrVersion: proto.Int64(10), Graph: &GraphProto{Node: []*NodeProto{node}}},
			func() proto.Message { return &ModelProto{} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := proto.Marshal(tc.msg)
			if err != nil {
				t.Fatal(err)
			}
			b = appendUnknown(b)
			first := tc.new()
			if err := proto.Unmarshal(b, first); err != nil {
				t.Fatal(err)
			}
			checkUnknown(t, "after decode", first)
			b2, err := det.Marshal(first)
			if err != nil {
				t.Fatal(err)
			}
			second := tc.new()
			if err := proto.Unmarshal(b2, second); err != nil {
				t.Fatal(err)
			}
			checkUnknown(t, "after re-encode", second)
			if !proto.Equal(first, second) {
				t.Error("re-decoded message differs")
			}
		})
	}

	// Unknown fields deep inside a model (here: a node and a tensor, as a
	// newer IR version might add) also survive a model-level round trip.
	t.Run("Nested", func(t *testing.T) {
		n := proto.Clone(node).(*NodeProto)
		n.ProtoReflect().SetUnknown(appendUnknown(nil))
		tensor := &TensorProto{Name: proto.String("w"), DataType: proto.Int32(1), FloatData: []float32{1}}
		tensor.ProtoReflect().SetUnknown(appendUnknown(nil))
		m := &ModelProto{Graph: &GraphProto{Node: []*NodeProto{n}, Initializer: []*TensorProto{tensor}}}
		b, err := det.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		var got ModelProto
		if err := proto.Unmarshal(b, &got); err != nil {
			t.Fatal(err)
		}
		b2, err := det.Marshal(&got)
		if err != nil {
			t.Fatal(err)
		}
		var again ModelProto
		if err := proto.Unmarshal(b2, &again); err != nil {
			t.Fatal(err)
		}
		checkUnknown(t, "node", again.GetGraph().GetNode()[0])
		checkUnknown(t, "tensor", again.GetGraph().GetInitializer()[0])
		if !bytes.Equal(b, b2) {
			t.Error("re-encoding changed the bytes")
		}
	})
}

// schemaPin is the wire-relevant content of onnx.proto: every field as
// "Message.field number label type [packed] [oneof=name]" and every enum
// value as "Enum.VALUE = number". It was checked against the official ONNX
// schema; a failure here means onnx.proto changed the file format.
const schemaPin = `
	Version._START_VERSION = 0
	Version.IR_VERSION_2017_10_10 = 1
	Version.IR_VERSION_2017_10_30 = 2
	Version.IR_VERSION_2017_11_3 = 3
	Version.IR_VERSION_2019_1_22 = 4
	Version.IR_VERSION_2019_3_18 = 5
	Version.IR_VERSION_2019_9_19 = 6
	Version.IR_VERSION_2020_5_8 = 7
	Version.IR_VERSION_2021_7_30 = 8
	Version.IR_VERSION_2023_5_5 = 9
	Version.IR_VERSION_2024_3_25 = 10
	Version.IR_VERSION_2025_05_12 = 11
	Version.IR_VERSION = 10
	OperatorStatus.EXPERIMENTAL = 0
	OperatorStatus.STABLE = 1
	AttributeProto.name 1 optional string
	AttributeProto.ref_attr_name 21 optional string
	AttributeProto.doc_string 13 optional string
	AttributeProto.type 20 optional AttributeProto.AttributeType
	AttributeProto.f 2 optional float
	AttributeProto.i 3 optional int64
	AttributeProto.s 4 optional bytes
	AttributeProto.t 5 optional TensorProto
	AttributeProto.g 6 optional GraphProto
	AttributeProto.sparse_tensor 22 optional SparseTensorProto
	AttributeProto.tp 14 optional TypeProto
	AttributeProto.floats 7 repeated float
	AttributeProto.ints 8 repeated int64
	AttributeProto.strings 9 repeated bytes
	AttributeProto.tensors 10 repeated TensorProto
	AttributeProto.graphs 11 repeated GraphProto
	AttributeProto.sparse_tensors 23 repeated SparseTensorProto
	AttributeProto.type_protos 15 repeated TypeProto
	AttributeProto.AttributeType.UNDEFINED = 0
	AttributeProto.AttributeType.FLOAT = 1
	AttributeProto.AttributeType.INT = 2
	AttributeProto.AttributeType.STRING = 3
	AttributeProto.AttributeType.TENSOR = 4
	AttributeProto.AttributeType.GRAPH = 5
	AttributeProto.AttributeType.SPARSE_TENSOR = 11
	AttributeProto.AttributeType.TYPE_PROTO = 13
	AttributeProto.AttributeType.FLOATS = 6
	AttributeProto.AttributeType.INTS = 7
	AttributeProto.AttributeType.STRINGS = 8
	AttributeProto.AttributeType.TENSORS = 9
	AttributeProto.AttributeType.GRAPHS = 10
	AttributeProto.AttributeType.SPARSE_TENSORS = 12
	AttributeProto.AttributeType.TYPE_PROTOS = 14
	ValueInfoProto.name 1 optional string
	ValueInfoProto.type 2 optional TypeProto
	ValueInfoProto.doc_string 3 optional string
	ValueInfoProto.metadata_props 4 repeated StringStringEntryProto
	NodeProto.input 1 repeated string
	NodeProto.output 2 repeated string
	NodeProto.name 3 optional string
	NodeProto.op_type 4 optional string
	NodeProto.domain 7 optional string
	NodeProto.overload 8 optional string
	NodeProto.attribute 5 repeated AttributeProto
	NodeProto.doc_string 6 optional string
	NodeProto.metadata_props 9 repeated StringStringEntryProto
	TrainingInfoProto.initialization 1 optional GraphProto
	TrainingInfoProto.algorithm 2 optional GraphProto
	TrainingInfoProto.initialization_binding 3 repeated StringStringEntryProto
	TrainingInfoProto.update_binding 4 repeated StringStringEntryProto
	ModelProto.ir_version 1 optional int64
	ModelProto.opset_import 8 repeated OperatorSetIdProto
	ModelProto.producer_name 2 optional string
	ModelProto.producer_version 3 optional string
	ModelProto.domain 4 optional string
	ModelProto.model_version 5 optional int64
	ModelProto.doc_string 6 optional string
	ModelProto.graph 7 optional GraphProto
	ModelProto.metadata_props 14 repeated StringStringEntryProto
	ModelProto.training_info 20 repeated TrainingInfoProto
	ModelProto.functions 25 repeated FunctionProto
	StringStringEntryProto.key 1 optional string
	StringStringEntryProto.value 2 optional string
	TensorAnnotation.tensor_name 1 optional string
	TensorAnnotation.quant_parameter_tensor_names 2 repeated StringStringEntryProto
	GraphProto.node 1 repeated NodeProto
	GraphProto.name 2 optional string
	GraphProto.initializer 5 repeated TensorProto
	GraphProto.sparse_initializer 15 repeated SparseTensorProto
	GraphProto.doc_string 10 optional string
	GraphProto.input 11 repeated ValueInfoProto
	GraphProto.output 12 repeated ValueInfoProto
	GraphProto.value_info 13 repeated ValueInfoProto
	GraphProto.quantization_annotation 14 repeated TensorAnnotation
	GraphProto.metadata_props 16 repeated StringStringEntryProto
	TensorProto.dims 1 repeated int64
	TensorProto.data_type 2 optional int32
	TensorProto.segment 3 optional TensorProto.Segment
	TensorProto.float_data 4 repeated float packed
	TensorProto.int32_data 5 repeated int32 packed
	TensorProto.string_data 6 repeated bytes
	TensorProto.int64_data 7 repeated int64 packed
	TensorProto.name 8 optional string
	TensorProto.doc_string 12 optional string
	TensorProto.raw_data 9 optional bytes
	TensorProto.external_data 13 repeated StringStringEntryProto
	TensorProto.data_location 14 optional TensorProto.DataLocation
	TensorProto.double_data 10 repeated double packed
	TensorProto.uint64_data 11 repeated uint64 packed
	TensorProto.metadata_props 16 repeated StringStringEntryProto
	TensorProto.DataType.UNDEFINED = 0
	TensorProto.DataType.FLOAT = 1
	TensorProto.DataType.UINT8 = 2
	TensorProto.DataType.INT8 = 3
	TensorProto.DataType.UINT16 = 4
	TensorProto.DataType.INT16 = 5
	TensorProto.DataType.INT32 = 6
	TensorProto.DataType.INT64 = 7
	TensorProto.DataType.STRING = 8
	TensorProto.DataType.BOOL = 9
	TensorProto.DataType.FLOAT16 = 10
	TensorProto.DataType.DOUBLE = 11
	TensorProto.DataType.UINT32 = 12
	TensorProto.DataType.UINT64 = 13
	TensorProto.DataType.COMPLEX64 = 14
	TensorProto.DataType.COMPLEX128 = 15
	TensorProto.DataType.BFLOAT16 = 16
	TensorProto.DataType.FLOAT8E4M3FN = 17
	TensorProto.DataType.FLOAT8E4M3FNUZ = 18
	TensorProto.DataType.FLOAT8E5M2 = 19
	TensorProto.DataType.FLOAT8E5M2FNUZ = 20
	TensorProto.DataType.UINT4 = 21
	TensorProto.DataType.INT4 = 22
	TensorProto.DataType.FLOAT4E2M1 = 23
	TensorProto.DataLocation.DEFAULT = 0
	TensorProto.DataLocation.EXTERNAL = 1
	TensorProto.Segment.begin 1 optional int64
	TensorProto.Segment.end 2 optional int64
	SparseTensorProto.values 1 optional TensorProto
	SparseTensorProto.indices 2 optional TensorProto
	SparseTensorProto.dims 3 repeated int64
	TensorShapeProto.dim 1 repeated TensorShapeProto.Dimension
	TensorShapeProto.Dimension.dim_value 1 optional int64 oneof=value
	TensorShapeProto.Dimension.dim_param 2 optional string oneof=value
	TensorShapeProto.Dimension.denotation 3 optional string
	TypeProto.tensor_type 1 optional TypeProto.Tensor oneof=value
	TypeProto.sequence_type 4 optional TypeProto.Sequence oneof=value
	TypeProto.map_type 5 optional TypeProto.Map oneof=value
	TypeProto.optional_type 9 optional TypeProto.Optional oneof=value
	TypeProto.sparse_tensor_type 8 optional TypeProto.SparseTensor oneof=value
	TypeProto.denotation 6 optional string
	TypeProto.Tensor.elem_type 1 optional int32
	TypeProto.Tensor.shape 2 optional TensorShapeProto
	TypeProto.Sequence.elem_type 1 optional TypeProto
	TypeProto.Map.key_type 1 optional int32
	TypeProto.Map.value_type 2 optional TypeProto
	TypeProto.Optional.elem_type 1 optional TypeProto
	TypeProto.SparseTensor.elem_type 1 optional int32
	TypeProto.SparseTensor.shape 2 optional TensorShapeProto
	OperatorSetIdProto.domain 1 optional string
	OperatorSetIdProto.version 2 optional int64
	FunctionProto.name 1 optional string
	FunctionProto.input 4 repeated string
	FunctionProto.output 5 repeated string
	FunctionProto.attribute 6 repeated string
	FunctionProto.attribute_proto 11 repeated AttributeProto
	FunctionProto.node 7 repeated NodeProto
	FunctionProto.doc_string 8 optional string
	FunctionProto.opset_import 9 repeated OperatorSetIdProto
	FunctionProto.domain 10 optional string
	FunctionProto.overload 13 optional string
	FunctionProto.value_info 12 repeated ValueInfoProto
	FunctionProto.metadata_props 14 repeated StringStringEntryProto
`

func describeSchema() []string {
	var out []string
	short := func(n protoreflect.FullName) string { return strings.TrimPrefix(string(n), "tsplit.onnx.") }
	var enum func(e protoreflect.EnumDescriptor)
	enum = func(e protoreflect.EnumDescriptor) {
		for i := 0; i < e.Values().Len(); i++ {
			v := e.Values().Get(i)
			out = append(out, short(e.FullName())+"."+string(v.Name())+" = "+itoa(int64(v.Number())))
		}
	}
	var msg func(m protoreflect.MessageDescriptor)
	msg = func(m protoreflect.MessageDescriptor) {
		for i := 0; i < m.Fields().Len(); i++ {
			f := m.Fields().Get(i)
			typ := f.Kind().String()
			if f.Message() != nil {
				typ = short(f.Message().FullName())
			} else if f.Enum() != nil {
				typ = short(f.Enum().FullName())
			}
			s := short(m.FullName()) + "." + string(f.Name()) + " " + itoa(int64(f.Number())) + " " +
				f.Cardinality().String() + " " + typ
			if f.IsPacked() {
				s += " packed"
			}
			if o := f.ContainingOneof(); o != nil {
				s += " oneof=" + string(o.Name())
			}
			out = append(out, s)
		}
		for i := 0; i < m.Enums().Len(); i++ {
			enum(m.Enums().Get(i))
		}
		for i := 0; i < m.Messages().Len(); i++ {
			msg(m.Messages().Get(i))
		}
	}
	fd := File_onnx_proto
	for i := 0; i < fd.Enums().Len(); i++ {
		enum(fd.Enums().Get(i))
	}
	for i := 0; i < fd.Messages().Len(); i++ {
		msg(fd.Messages().Get(i))
	}
	return out
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }

// TestSchemaPinned guards the wire format: field numbers, labels, types,
// packed options and enum values must match the reviewed list above.
func TestSchemaPinned(t *testing.T) {
	want := map[string]bool{}
	for _, line := range strings.Split(schemaPin, "\n") {
		if line = strings.TrimSpace(line); line != "" {
			want[line] = true
		}
	}
	got := map[string]bool{}
	for _, line := range describeSchema() {
		got[line] = true
	}
	var missing, extra []string
	for l := range want {
		if !got[l] {
			missing = append(missing, l)
		}
	}
	for l := range got {
		if !want[l] {
			extra = append(extra, l)
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	for _, l := range missing {
		t.Errorf("schema lost or changed: %s", l)
	}
	for _, l := range extra {
		t.Errorf("schema gained: %s (review against the ONNX IR spec, then add it to schemaPin)", l)
	}
}

const pyMakeModel = `
import sys
import numpy as np
import onnx
from onnx import helper, numpy_helper, TensorProto
X = helper.make_tensor_value_info("X", TensorProto.FLOAT, ["N", 3])
Y = helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["N", 2])
W = helper.make_tensor("W", TensorProto.FLOAT, [3, 2], [1, 2, 3, 4, 5, 6])
B = numpy_helper.from_array(np.array([0.5, -0.5], dtype=np.float32), name="B")
S = helper.make_tensor("S", TensorProto.INT64, [2], [-1, 2])
nodes = [
    helper.make_node("Gemm", ["X", "W", "B"], ["G"], name="gemm0", alpha=2.0, transB=0),
    helper.make_node("Relu", ["G"], ["R"], name="relu0"),
    helper.make_node("Reshape", ["R", "S"], ["Y"], name="reshape0"),
]
graph = helper.make_graph(nodes, "tiny", [X], [Y], [W, B, S])
model = helper.make_model(graph, producer_name="tsplit-test",
                          opset_imports=[helper.make_opsetid("", 13)])
model.ir_version = 8
onnx.checker.check_model(model)
onnx.save(model, sys.argv[1])
`

const pyCheckModel = `
import sys
import onnx
orig, ours = sys.argv[1], sys.argv[2]
a, b = onnx.load(orig), onnx.load(ours)
assert a == b, "re-encoded model differs from the original:\\n%s\\n---\\n%s" % (a, b)
# By path: the checker parses our bytes itself. (No full_check here: with a
# path, onnx writes the shape-inferred model back over the file.)
onnx.checker.check_model(ours)
onnx.checker.check_model(b, full_check=True)
print("ok")
`

// TestPythonONNXInterop exchanges a model with the reference implementation
// (python3-onnx), when it is installed.
func TestPythonONNXInterop(t *testing.T) {
	oracle.PythonNumpy(t)
	python := oracle.PythonONNX(t)
	dir := t.TempDir()
	in, out := filepath.Join(dir, "in.onnx"), filepath.Join(dir, "out.onnx")
	if b, err := exec.Command(python, "-c", pyMakeModel, in).CombinedOutput(); err != nil {
		t.Fatalf("building model with python onnx: %v\n%s", err, b)
	}
	data, err := os.ReadFile(in)
	if err != nil {
		t.Fatal(err)
	}
	var m ModelProto
	if err := proto.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	if len(m.ProtoReflect().GetUnknown()) != 0 {
		t.Error("model from python has unknown top-level fields")
	}

	if m.GetIrVersion() != 8 || m.GetProducerName() != "tsplit-test" {
		t.Errorf("ir_version/producer = %d/%q", m.GetIrVersion(), m.GetProducerName())
	}
	if ops := m.GetOpsetImport(); len(ops) != 1 || ops[0].GetDomain() != "" || ops[0].GetVersion() != 13 {
		t.Errorf("opset_import = %v", ops)
	}
	g := m.GetGraph()
	var opTypes []string
	for _, n := range g.GetNode() {
		opTypes = append(opTypes, n.GetOpType())
	}
	if strings.Join(opTypes, ",") != "Gemm,Relu,Reshape" {
		t.Errorf("op types = %v", opTypes)
	}
	gemm := g.GetNode()[0]
	if gemm.GetName() != "gemm0" || strings.Join(gemm.GetInput(), ",") != "X,W,B" || strings.Join(gemm.GetOutput(), ",") != "G" {
		t.Errorf("gemm node = %v", gemm)
	}
	attrs := map[string]*AttributeProto{}
	for _, a := range gemm.GetAttribute() {
		attrs[a.GetName()] = a
	}
	if a := attrs["alpha"]; a.GetType() != AttributeProto_FLOAT || a.GetF() != 2 {
		t.Errorf("alpha = %v", a)
	}
	if a := attrs["transB"]; a.GetType() != AttributeProto_INT || a.GetI() != 0 || a.I == nil {
		t.Errorf("transB = %v", a)
	}
	x := g.GetInput()[0].GetType().GetTensorType()
	if x.GetElemType() != int32(TensorProto_FLOAT) || x.GetShape().GetDim()[0].GetDimParam() != "N" ||
		x.GetShape().GetDim()[1].GetDimValue() != 3 {
		t.Errorf("input X type = %v", x)
	}
	inits := map[string]*TensorProto{}
	for _, init := range g.GetInitializer() {
		inits[init.GetName()] = init
	}
	if w := inits["W"]; w.GetDataType() != int32(TensorProto_FLOAT) || len(w.GetDims()) != 2 ||
		w.GetDims()[0] != 3 || w.GetDims()[1] != 2 || len(w.GetFloatData()) != 6 || w.GetFloatData()[5] != 6 {
		t.Errorf("W = %v", w)
	}
	if b := inits["B"]; len(b.GetRawData()) != 8 ||
		math.Float32frombits(binary.LittleEndian.Uint32(b.GetRawData())) != 0.5 ||
		math.Float32frombits(binary.LittleEndian.Uint32(b.GetRawData()[4:])) != -0.5 {
		t.Errorf("B = %v", b)
	}
	if s := inits["S"]; s.GetDataType() != int32(TensorProto_INT64) || len(s.GetInt64Data()) != 2 ||
		s.GetInt64Data()[0] != -1 || s.GetInt64Data()[1] != 2 {
		t.Errorf("S = %v", s)
	}

	enc, err := proto.MarshalOptions{Deterministic: true}.Marshal(&m)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(out, enc, 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := exec.Command(python, "-c", pyCheckModel, in, out).CombinedOutput(); err != nil {
		t.Fatalf("python onnx rejected our encoding: %v\n%s", err, b)
	}
	if bytes.Equal(enc, data) {
		t.Log("re-encoding is byte-identical to python's")
	}
}
