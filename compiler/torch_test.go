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

var torchModels = []string{"resnet18", "resnet50", "vgg16", "inception_v3", "densenet121", "mobilenet_v2", "mobilenetv3_mini", "transformer", "transformer_nodrop"}

// TestTorchShapes: on every exported PyTorch model at batch 1 and 8 (and
// 32, with vgg16 and inception_v3, in the integration tier),
// shape inference makes every value static, the graph outputs agree
// with the shapes ONNX Runtime produces, and every intermediate value
// that onnx.shape_inference infers fully agrees with tsplit's shape.
//
// Each model file is decoded once for its three batches (decoding
// vgg16's 550 MB took most of the test's time; FromProto only reads the
// decoded model), and each oracle reads it once for the three batches
// (ORTShapesAt, OnnxShapesAt).
func TestTorchShapes(t *testing.T) {
	batches := []int{1, 8, 32}
	if !oracle.IntegrationOn() {
		batches = batches[:2]
	}
	for _, name := range torchModels {
		t.Run(name, func(t *testing.T) {
			if name == "vgg16" || name == "inception_v3" {
				// Decoding vgg16's 550 MB alone takes seconds (13 s of
				// make test's package time with inception_v3); both use
				// no op the other exports lack (vgg_small and the zoo's
				// inception cover their layers), so they run in the long
				// tier.
				oracle.Long(t, name+"'s full-size export")
			}
			path := oracle.TorchModel(t, name)
			mp, err := compiler.ReadModelProto(path)
			if err != nil {
				t.Fatal(err)
			}
			// The oracles run when the first batch needs them: a missing
			// one skips each batch after tsplit's own checks, as before.
			o := &torchShapeOracles{path: path, batches: batches}
			for _, batch := range []int{1, 8, 32} {
				t.Run(fmt.Sprintf("batch%d", batch), func(t *testing.T) {
					if batch == 32 {
						oracle.Integration(t, "batch 32")
					}
					torchShapes(t, path, mp, batch, o)
				})
			}
		})
	}
}

// torchShapeOracles holds one model's oracle shapes at every batch of
// the test, computed on first use.
type torchShapeOracles struct {
	path      string
	batches   []int
	ort, onnx map[int]map[string][]int64
}

func (o *torchShapeOracles) ortShapes(t *testing.T, batch int) map[string][]int64 {
	if o.ort == nil {
		o.ort = oracle.ORTShapesAt(t, o.path, o.batches...)
	}
	return o.ort[batch]
}

func (o *torchShapeOracles) onnxShapes(t *testing.T, batch int) map[string][]int64 {
	if o.onnx == nil {
		o.onnx = oracle.OnnxShapesAt(t, o.path, o.batches...)
	}
	return o.onnx[batch]
}

func torchShapes(t *testing.T, path string, mp *onnxpb.ModelProto, batch int, o *torchShapeOracles) {
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
	ort := o.ortShapes(t, batch)
	for _, out := range m.Graph.Outputs {
		want, ok := ort[out.Name]
		if !ok {
			t.Fatalf("ONNX Runtime gave no output %q", out.Name)
		}
		if !out.Shape.Equal(ir.Shape(want)) {
			t.Errorf("output %q: tsplit %v, ONNX Runtime %v", out.Name, out.Shape, want)
		}
	}
	ref := o.onnxShapes(t, batch)
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
