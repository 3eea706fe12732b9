package compiler_test

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/tsplit/tsplit/compiler"
	"github.com/tsplit/tsplit/internal/oracle"
	"github.com/tsplit/tsplit/ir"
	"github.com/tsplit/tsplit/onnxpb"
)

var torchModels = []string{"resnet18", "resnet50", "vgg16", "inception_v3", "densenet121", "mobilenet_v2", "transformer", "transformer_nodrop"}

// TestTorchShapes: on every exported PyTorch model at batch 1, 8 and 32,
// shape inference makes every value static, the graph outputs agree
// with the shapes ONNX Runtime produces, and every intermediate value
// that onnx.shape_inference infers fully agrees with tsplit's shape.
//
// Each model file is decoded once for its three batches (decoding
// vgg16's 550 MB took most of the test's time); FromProto only reads
// the decoded model.
func TestTorchShapes(t *testing.T) {
	for _, name := range torchModels {
		t.Run(name, func(t *testing.T) {
			path := oracle.TorchModel(t, name)
			mp, err := compiler.ReadModelProto(path)
			if err != nil {
				t.Fatal(err)
			}
			for _, batch := range []int{1, 8, 32} {
				t.Run(fmt.Sprintf("batch%d", batch), func(t *testing.T) {
					if testing.Short() && batch == 32 {
						t.Skip("batch 32 ORT runs skipped with -short")
					}
					torchShapes(t, path, mp, batch)
				})
			}
		})
	}
}

func torchShapes(t *testing.T, path string, mp *onnxpb.ModelProto, batch int) {
	m, err := compiler.FromProto(mp, filepath.Dir(path), compiler.Options{Batch: int64(batch)})
	if err != nil {
		t.Fatal(err)
	}
	if err := ir.Verify(m); err != nil {
		t.Fatal(err)
	}
	s := compiler.Summarize(m)
	if !s.AllStatic {
		t.Fatalf("values without static shape: %v", s.NonStatic)
	}
	ort := oracle.ORTShapes(t, path, batch)
	for _, out := range m.Graph.Outputs {
		want, ok := ort[out.Name]
		if !ok {
			t.Fatalf("ONNX Runtime gave no output %q", out.Name)
		}
		if !out.Shape.Equal(ir.Shape(want)) {
			t.Errorf("output %q: tsplit %v, ONNX Runtime %v", out.Name, out.Shape, want)
		}
	}
	ref := oracle.OnnxShapes(t, path, batch)
	compared := 0
	for vname, dims := range ref {
		v := m.Graph.Lookup(vname)
		if v == nil || !fullyKnown(dims) {
			continue
		}
		compared++
		if !v.Shape.Equal(ir.Shape(dims)) {
			t.Errorf("value %q: tsplit %v, onnx.shape_inference %v", vname, v.Shape, dims)
		}
	}
	t.Logf("%d values; %d compared with onnx.shape_inference; %d folded to constants", s.NumValues, compared, s.FoldedConst)
}

func fullyKnown(dims []int64) bool {
	for _, d := range dims {
		if d < 0 {
			return false
		}
	}
	return true
}

// TestResNet50Params: tsplitc inspect's parameter count of torchvision
// resnet50 is the published 25,557,032.
func TestResNet50Params(t *testing.T) {
	path := oracle.TorchModel(t, "resnet50")
	m, err := compiler.Import(path, compiler.Options{Batch: 1})
	if err != nil {
		t.Fatal(err)
	}
	if got := compiler.Summarize(m).Params; got != 25557032 {
		t.Fatalf("resnet50 has %d parameters, want 25,557,032", got)
	}
}
