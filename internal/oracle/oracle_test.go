package oracle

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestTensorRoundTrip(t *testing.T) {
	in := map[string]*Tensor{
		"x":      FromFloat32([]int64{2, 3}, []float32{1, -2.5, 3, float32(math.Inf(1)), 0, -0.125}),
		"ids":    FromInt64([]int64{3}, []int64{0, -7, math.MaxInt64}),
		"scalar": FromFloat64(nil, []float64{math.Pi}),
		"empty":  FromFloat32([]int64{0, 4}, nil),
		"mask":   {Type: "bool", Dims: []int64{2}, Data: []byte{1, 0}},
	}
	path := filepath.Join(t.TempDir(), "t.json")
	if err := WriteTensors(path, in); err != nil {
		t.Fatal(err)
	}
	out, err := ReadTensors(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != len(in) {
		t.Fatalf("read %d tensors, wrote %d", len(out), len(in))
	}
	for name, want := range in {
		got := out[name]
		if got == nil {
			t.Fatalf("%s missing after round trip", name)
		}
		wantDims := want.Dims
		if wantDims == nil {
			wantDims = []int64{}
		}
		if got.Type != want.Type || !reflect.DeepEqual(got.Dims, wantDims) || !bytes.Equal(got.Data, want.Data) {
			t.Errorf("%s: got %s %v, want %s %v", name, got, got.Data, want, want.Data)
		}
	}
	if got := out["x"].Float32s(); got[1] != -2.5 || !math.IsInf(float64(got[3]), 1) {
		t.Errorf("x.Float32s() = %v", got)
	}
	if got := out["ids"].Int64s(); !reflect.DeepEqual(got, []int64{0, -7, math.MaxInt64}) {
		t.Errorf("ids.Int64s() = %v", got)
	}
	if got := out["scalar"].Float64s(); len(got) != 1 || got[0] != math.Pi {
		t.Errorf("scalar.Float64s() = %v", got)
	}

	// The wire format itself: what the Node and Python scripts read.
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var wire map[string]map[string]any
	if err := json.Unmarshal(raw, &wire); err != nil {
		t.Fatal(err)
	}
	if w := wire["ids"]; w["type"] != "int64" || w["data_b64"] != "AAAAAAAAAAD5//////////////////9/" {
		t.Errorf("ids on the wire = %v", w)
	}
	if w := wire["scalar"]; !reflect.DeepEqual(w["dims"], []any{}) {
		t.Errorf("scalar dims on the wire = %#v, want []", w["dims"])
	}
	if w := wire["empty"]; w["data_b64"] != "" {
		t.Errorf("empty data on the wire = %#v, want \"\"", w["data_b64"])
	}
}

func TestTensorValidation(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bad.json")
	bad := map[string]*Tensor{"x": {Type: "float32", Dims: []int64{2}, Data: make([]byte, 4)}}
	if err := WriteTensors(path, bad); err == nil {
		t.Error("WriteTensors accepted 4 bytes for float32[2]")
	}
	os.WriteFile(path, []byte(`{"x": {"type": "complex64", "dims": [], "data_b64": ""}}`), 0o644)
	if _, err := ReadTensors(path); err == nil || !strings.Contains(err.Error(), "complex64") {
		t.Errorf("ReadTensors of an unsupported type: err = %v", err)
	}
	defer func() {
		if recover() == nil {
			t.Error("Int64s on a float32 tensor did not panic")
		}
	}()
	FromFloat32([]int64{1}, []float32{1}).Int64s()
}

// tinyModel writes an ONNX model Z = X + Y with X, Y, Z float32["N", 3].
func tinyModel(t *testing.T) string {
	py := PythonONNX(t)
	path := filepath.Join(t.TempDir(), "add.onnx")
	const src = `
import sys
import onnx
from onnx import TensorProto, helper
x = helper.make_tensor_value_info("X", TensorProto.FLOAT, ["N", 3])
y = helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["N", 3])
z = helper.make_tensor_value_info("Z", TensorProto.FLOAT, ["N", 3])
g = helper.make_graph([helper.make_node("Add", ["X", "Y"], ["Z"])], "add", [x, y], [z])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
m.ir_version = 8
onnx.checker.check_model(m)
onnx.save(m, sys.argv[1])
`
	if out, err := exec.Command(py, "-c", src, path).CombinedOutput(); err != nil {
		t.Fatalf("building the test model: %v\n%s", err, out)
	}
	return path
}

func TestTinyModel(t *testing.T) {
	model := tinyModel(t)

	t.Run("OnnxShapes", func(t *testing.T) {
		got := OnnxShapes(t, model, 4)
		want := map[string][]int64{"X": {4, 3}, "Y": {4, 3}, "Z": {4, 3}}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("OnnxShapes = %v, want %v", got, want)
		}
	})
	t.Run("ORTShapes", func(t *testing.T) {
		got := ORTShapes(t, model, 5)
		if want := map[string][]int64{"Z": {5, 3}}; !reflect.DeepEqual(got, want) {
			t.Errorf("ORTShapes = %v, want %v", got, want)
		}
	})
	t.Run("ORTRun", func(t *testing.T) {
		x := []float32{1, 2, 3, 4, 5, 6}
		y := []float32{0.5, -2, 10, 0, -5, 1e-3}
		for _, noOpt := range []bool{false, true} {
			out := ORTRun(t, model, map[string]*Tensor{
				"X": FromFloat32([]int64{2, 3}, x),
				"Y": FromFloat32([]int64{2, 3}, y),
			}, noOpt)
			z := out["Z"]
			if len(out) != 1 || z == nil {
				t.Fatalf("noOpt=%v: outputs %v, want just Z", noOpt, out)
			}
			if z.Type != "float32" || !reflect.DeepEqual(z.Dims, []int64{2, 3}) {
				t.Fatalf("noOpt=%v: Z is %s, want float32[2 3]", noOpt, z)
			}
			for i, v := range z.Float32s() {
				if v != x[i]+y[i] {
					t.Errorf("noOpt=%v: Z[%d] = %v, want %v", noOpt, i, v, x[i]+y[i])
				}
			}
		}
	})
}

// TestTorchModel exercises the whole chain on the smallest PyTorch export
// (exporting it first if testdata/torch has no copy).
func TestTorchModel(t *testing.T) {
	if testing.Short() {
		t.Skip("exports a PyTorch model")
	}
	model := TorchModel(t, "transformer_nodrop")

	if got := ORTShapes(t, model, 3); !reflect.DeepEqual(got, map[string][]int64{"output": {3, 10}}) {
		t.Errorf("ORTShapes = %v", got)
	}
	shapes := OnnxShapes(t, model, 3)
	if got := shapes["output"]; !reflect.DeepEqual(got, []int64{3, 10}) {
		t.Errorf("OnnxShapes output = %v", got)
	}
	if got := shapes["input"]; !reflect.DeepEqual(got, []int64{3, 32}) {
		t.Errorf("OnnxShapes input = %v", got)
	}

	ids := make([]int64, 3*32)
	for i := range ids {
		ids[i] = int64(i*37) % 1000
	}
	in := map[string]*Tensor{"input": FromInt64([]int64{3, 32}, ids)}
	opt := ORTRun(t, model, in, false)["output"].Float32s()
	raw := ORTRun(t, model, in, true)["output"].Float32s()
	if len(opt) != 30 || len(raw) != 30 {
		t.Fatalf("got %d and %d outputs, want 30", len(opt), len(raw))
	}
	for i := range opt {
		if d := math.Abs(float64(opt[i] - raw[i])); d > 1e-4 {
			t.Errorf("output[%d]: optimised %v vs unoptimised %v", i, opt[i], raw[i])
		}
	}
}
