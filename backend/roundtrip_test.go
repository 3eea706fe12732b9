package backend_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/tsplit/tsplit/backend"
	"github.com/tsplit/tsplit/compiler"
	ot "github.com/tsplit/tsplit/internal/onnxtest"
	"github.com/tsplit/tsplit/internal/oracle"
	"github.com/tsplit/tsplit/onnxpb"
)

// torchModels are the exports of scripts/export_torch_models.py.
var torchModels = []string{"resnet18", "resnet50", "vgg16", "inception_v3", "densenet121", "mobilenet_v2", "transformer", "transformer_nodrop"}

// TestRoundTrip covers every ONNX file in testdata and every exported
// torch model: decode → encode → decode gives an equal proto (unknown
// fields included) and encoding twice gives identical bytes; and at the
// IR level, import → write gives back the same model.
func TestRoundTrip(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "testdata", "onnx", "*.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no models in testdata/onnx (make models)")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) { roundTrip(t, f) })
	}
	for _, name := range torchModels {
		t.Run("torch/"+name, func(t *testing.T) {
			if name == "vgg16" {
				oracle.Integration(t, "vgg16 is 550 MB")
			}
			roundTrip(t, oracle.TorchModel(t, name))
		})
	}
}

func roundTrip(t *testing.T, path string) {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m1, err := compiler.DecodeModel(data)
	if err != nil {
		t.Fatal(err)
	}
	b1, err := compiler.EncodeModel(m1)
	if err != nil {
		t.Fatal(err)
	}
	m2, err := compiler.DecodeModel(b1)
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(m1, m2) {
		t.Fatal("decode → encode → decode changed the model")
	}
	b2, err := compiler.EncodeModel(m2)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b1, b2) {
		t.Fatal("encoding twice gave different bytes")
	}

	// Through the IR: an untouched model is written back as the same model.
	im, err := compiler.FromProto(m1, filepath.Dir(path), compiler.Options{Batch: 2})
	if err != nil {
		t.Fatal(err)
	}
	out, err := backend.ToProto(im)
	if err != nil {
		t.Fatal(err)
	}
	if len(m1.Functions) == 0 && !proto.Equal(out, m1) {
		t.Fatal("import → write changed the model")
	}
	w1, err := backend.Marshal(im)
	if err != nil {
		t.Fatal(err)
	}
	w2, err := backend.Marshal(im)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(w1, w2) {
		t.Fatal("writing the same IR twice gave different bytes")
	}
}

// Unknown fields at every level survive import and write.
func TestUnknownFieldsSurviveIR(t *testing.T) {
	m := ot.ReluChain()
	unk := protowire.AppendTag(nil, 999, protowire.VarintType)
	unk = protowire.AppendVarint(unk, 42)
	for _, msg := range []proto.Message{m, m.Graph, m.Graph.Node[0], m.Graph.Initializer[0], m.Graph.Input[0]} {
		msg.ProtoReflect().SetUnknown(unk)
	}
	m.Graph.Node[0].Attribute = append(m.Graph.Node[0].Attribute, &onnxpb.AttributeProto{})
	m.Graph.Node[0].Attribute = nil
	m.DocString = proto.String("doc")
	m.MetadataProps = []*onnxpb.StringStringEntryProto{{Key: proto.String("k"), Value: proto.String("v")}}
	data, err := compiler.EncodeModel(m)
	if err != nil {
		t.Fatal(err)
	}
	m1, err := compiler.DecodeModel(data)
	if err != nil {
		t.Fatal(err)
	}
	im, err := compiler.FromProto(m1, "", compiler.Options{Batch: 3})
	if err != nil {
		t.Fatal(err)
	}
	out, err := backend.ToProto(im)
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(out, m1) {
		t.Fatal("unknown fields or metadata lost through the IR")
	}
	if len(out.Graph.Node[0].ProtoReflect().GetUnknown()) == 0 {
		t.Fatal("node unknown field lost")
	}
}

// WriteFile leaves no partial file when it cannot write.
func TestWriteFileAtomic(t *testing.T) {
	m, err := compiler.FromProto(ot.ReluChain(), "", compiler.Options{})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := backend.WriteFile(m, filepath.Join(dir, "missing", "x.onnx")); err == nil {
		t.Fatal("writing into a missing folder succeeded")
	}
	path := filepath.Join(dir, "x.onnx")
	if err := backend.WriteFile(m, path); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Fatalf("temporary files left behind: %v", ents)
	}
}
