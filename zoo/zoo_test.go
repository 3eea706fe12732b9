package zoo

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/tsplit/tsplit/internal/oracle"
	"github.com/tsplit/tsplit/onnxpb"
)

var allowedOps = map[string]bool{
	"Conv": true, "BatchNormalization": true, "Relu": true, "MaxPool": true, "AveragePool": true,
	"GlobalAveragePool": true, "Flatten": true, "Gemm": true, "MatMul": true, "Add": true, "Mul": true,
	"Div": true, "Sub": true, "Concat": true, "Reshape": true, "Transpose": true, "Softmax": true,
	"LayerNormalization": true, "Erf": true, "Gather": true, "Dropout": true, "Identity": true, "Constant": true,
	"LeakyRelu": true, // darknet19
}

func build(t testing.TB, name string, cfg Config) *onnxpb.ModelProto {
	t.Helper()
	m, err := Build(name, cfg)
	if err != nil {
		t.Fatalf("Build(%q, %+v): %v", name, cfg, err)
	}
	return m
}

func marshal(t testing.TB, m *onnxpb.ModelProto) []byte {
	t.Helper()
	data, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func isTransformer(name string) bool { return families[name].kind == transformer }

func dimsOf(vi *onnxpb.ValueInfoProto) []int64 {
	var d []int64
	for _, x := range vi.GetType().GetTensorType().GetShape().GetDim() {
		if x.GetDimParam() != "" {
			d = append(d, -1)
		} else {
			d = append(d, x.GetDimValue())
		}
	}
	return d
}

// checkStructure verifies the conventions of a zoo model.
func checkStructure(t *testing.T, name string, m *onnxpb.ModelProto) {
	t.Helper()
	if m.GetIrVersion() != 8 {
		t.Errorf("ir_version %d, want 8", m.GetIrVersion())
	}
	if ops := m.GetOpsetImport(); len(ops) != 1 || ops[0].GetDomain() != "" || ops[0].GetVersion() != 17 {
		t.Errorf("opset_import %v, want the default domain at 17 only", ops)
	}
	g := m.GetGraph()
	defined := map[string]bool{}
	define := func(v, what string) {
		if v == "" || defined[v] {
			t.Errorf("%s: value name %q empty or not unique", what, v)
		}
		defined[v] = true
	}
	wantIn := "input"
	if isTransformer(name) {
		wantIn = "input_ids"
	}
	if len(g.GetInput()) == 0 || g.GetInput()[0].GetName() != wantIn {
		t.Fatalf("first input is not %q", wantIn)
	}
	for _, in := range g.GetInput() {
		define(in.GetName(), "input")
		if in.GetName() != wantIn && !trainable(in.GetName()) && !strings.HasSuffix(in.GetName(), ".running_mean") && !strings.HasSuffix(in.GetName(), ".running_var") {
			t.Errorf("input %q is neither the data input nor a weight", in.GetName())
		}
	}
	for _, init := range g.GetInitializer() {
		define(init.GetName(), "initializer")
		n := int64(1)
		for _, d := range init.GetDims() {
			n *= d
		}
		size := map[int32]int64{1: 4, 7: 8, 9: 1}[init.GetDataType()]
		if size == 0 || int64(len(init.GetRawData())) != n*size || len(init.GetFloatData()) > 0 {
			t.Errorf("initializer %s: type %d dims %v with %d raw bytes", init.GetName(), init.GetDataType(), init.GetDims(), len(init.GetRawData()))
		}
		if init.GetDataType() == 1 {
			for i := 0; i+4 <= len(init.GetRawData()); i += 4 {
				v := math.Float32frombits(binary.LittleEndian.Uint32(init.GetRawData()[i:]))
				if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
					t.Fatalf("initializer %s holds %v", init.GetName(), v)
				}
			}
		}
	}
	nodeNames := map[string]bool{}
	for _, n := range g.GetNode() {
		op := n.GetOpType()
		if !allowedOps[op] || n.GetDomain() != "" {
			t.Errorf("node %s: op %q not allowed", n.GetName(), op)
		}
		if n.GetName() == "" || nodeNames[n.GetName()] {
			t.Errorf("node name %q empty or not unique", n.GetName())
		}
		nodeNames[n.GetName()] = true
		for _, in := range n.GetInput() {
			if !defined[in] {
				t.Errorf("node %s: input %q used before it is defined", n.GetName(), in)
			}
		}
		for _, out := range n.GetOutput() {
			define(out, "node "+n.GetName())
		}
		switch op {
		case "BatchNormalization":
			var tm int64 = -1
			for _, a := range n.GetAttribute() {
				if a.GetName() == "training_mode" {
					tm = a.GetI()
				}
			}
			if tm != 1 || len(n.GetInput()) != 5 || len(n.GetOutput()) != 3 {
				t.Errorf("BatchNormalization %s: training_mode %d, %d inputs, %d outputs", n.GetName(), tm, len(n.GetInput()), len(n.GetOutput()))
			}
		case "Dropout":
			if len(n.GetInput()) != 3 || len(n.GetOutput()) != 2 {
				t.Errorf("Dropout %s: %d inputs, %d outputs", n.GetName(), len(n.GetInput()), len(n.GetOutput()))
			}
		}
	}
	if len(g.GetOutput()) != 1 || g.GetOutput()[0].GetName() != "output" || !defined["output"] {
		t.Errorf("graph outputs %v, want one produced value named output", g.GetOutput())
	}
}

func TestNames(t *testing.T) {
	want := []string{"vgg16", "vgg19", "darknet19", "resnet18", "resnet50", "resnet101", "inception", "bert-base", "bert-large", "gpt"}
	if got := Names(); !slices.Equal(got, want) {
		t.Fatalf("Names() = %v, want %v", got, want)
	}
	Names()[0] = "changed"
	if Names()[0] != "vgg16" {
		t.Fatal("Names() exposes its backing array")
	}
}

func TestSmallConfigs(t *testing.T) {
	for _, name := range Names() {
		t.Run(name, func(t *testing.T) {
			cfg := SmallConfig(name)
			m := build(t, name, cfg)
			checkStructure(t, name, m)
			if len(m.GetGraph().GetInput()) != 1 {
				t.Errorf("small model has %d inputs, want its weights as initializers", len(m.GetGraph().GetInput()))
			}
			if size := len(marshal(t, m)); size > 4<<20 {
				t.Errorf("small model is %d bytes, want at most 4 MiB", size)
			}
			out := dimsOf(m.GetGraph().GetOutput()[0])
			want := []int64{-1, cfg.Classes}
			if name == "gpt" {
				want = []int64{-1, cfg.SeqLen, cfg.Vocab}
			}
			if !slices.Equal(out, want) {
				t.Errorf("output dims %v, want %v", out, want)
			}
		})
	}
	if c := SmallConfig("nope"); c != (Config{}) {
		t.Errorf("SmallConfig(unknown) = %+v, want the zero Config", c)
	}
}

func TestDefaultWeightsAsInputs(t *testing.T) {
	for _, name := range Names() {
		t.Run(name, func(t *testing.T) {
			m := build(t, name, Config{WeightsAsInputs: true})
			checkStructure(t, name, m)
			var initBytes int
			for _, init := range m.GetGraph().GetInitializer() {
				if trainable(init.GetName()) {
					t.Errorf("weight %s is an initializer", init.GetName())
				}
				initBytes += len(init.GetRawData())
			}
			if initBytes > 64<<10 {
				t.Errorf("%d bytes of initializers with WeightsAsInputs", initBytes)
			}
			if n := len(m.GetGraph().GetInput()); n < 10 {
				t.Errorf("only %d graph inputs", n)
			}
		})
	}
}

func TestAutoWeightsAsInputs(t *testing.T) {
	// vgg16 at width 1 has 553 MB of weights: they must become inputs.
	m := build(t, "vgg16", Config{})
	for _, init := range m.GetGraph().GetInitializer() {
		if trainable(init.GetName()) {
			t.Fatalf("vgg16: weight %s stored as initializer, want inputs above 256 MiB", init.GetName())
		}
	}
	if testing.Short() {
		return
	}
	// resnet18 (47 MB) keeps its data.
	m = build(t, "resnet18", Config{})
	if n := len(m.GetGraph().GetInput()); n != 1 {
		t.Fatalf("resnet18: %d inputs, want weights as initializers", n)
	}
}

func TestDeterminism(t *testing.T) {
	for _, name := range Names() {
		cfg := SmallConfig(name)
		cfg.Dropout = 0.1
		a, b := marshal(t, build(t, name, cfg)), marshal(t, build(t, name, cfg))
		if !bytes.Equal(a, b) {
			t.Errorf("%s: two builds of the same Config differ", name)
		}
		cfg.Seed = 7
		if c := marshal(t, build(t, name, cfg)); bytes.Equal(a, c) {
			t.Errorf("%s: a different Seed gives the same model", name)
		}
		// Fields that do not apply to the family do not change the model.
		cfg.Seed = 0
		if isTransformer(name) {
			cfg.ImageSize = 64
		} else {
			cfg.SeqLen, cfg.Layers, cfg.Vocab = 64, 3, 1000
		}
		if c := marshal(t, build(t, name, cfg)); !bytes.Equal(a, c) {
			t.Errorf("%s: a field the family ignores changed the model", name)
		}
	}
	if !testing.Short() {
		a, b := marshal(t, build(t, "resnet18", Config{})), marshal(t, build(t, "resnet18", Config{}))
		if !bytes.Equal(a, b) {
			t.Error("resnet18: two default builds differ")
		}
	}
}

func TestParamCounts(t *testing.T) {
	cases := []struct {
		name string
		cfg  Config
		want int64
		note string
	}{
		// torchvision.models.*(num_classes=1000): sum(p.numel() for p in m.parameters()).
		{"resnet18", Config{}, 11_689_512, "torchvision"},
		{"resnet50", Config{}, 25_557_032, "torchvision"},
		{"resnet101", Config{}, 44_549_160, "torchvision"},
		{"vgg16", Config{}, 138_357_544, "torchvision"},
		{"vgg19", Config{}, 143_667_240, "torchvision"},
		{"resnet50", Config{Batch: 16, ImageSize: 448}, 25_557_032, "image size does not change ResNet's parameters"},
		// Cadene's pretrainedmodels.inceptionv4(num_classes=1000).
		{"inception", Config{}, 42_679_816, "inceptionv4"},
		// HuggingFace BertModel(bert-base-uncased) has 109,482,240 parameters,
		// 590,592 of them in the pooler; without the pooler and with a
		// 768x2+2 classifier: 108,891,648 + 1,538.
		{"bert-base", Config{SeqLen: 512}, 108_893_186, "HF bert-base without pooler"},
		// BertModel(bert-large-uncased): 335,141,888, pooler 1,049,600, classifier 2,050.
		{"bert-large", Config{SeqLen: 512}, 334_094_338, "HF bert-large without pooler"},
		// HuggingFace GPT2LMHeadModel (gpt2, 1024 positions, tied LM head).
		{"gpt", Config{SeqLen: 1024}, 124_439_808, "HF gpt2"},
		{"gpt", Config{}, 124_439_808 - (1024-128)*768, "gpt2 with 128 positions"},
	}
	for _, c := range cases {
		got, err := ParamCount(c.name, c.cfg)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got != c.want {
			t.Errorf("ParamCount(%s, %+v) = %d, want %d (%s)", c.name, c.cfg, got, c.want, c.note)
		}
	}
}

// TestTransformerScaling checks Layers/Width overrides against the
// closed-form parameter count, and the head-dimension rule.
func TestTransformerScaling(t *testing.T) {
	for _, name := range []string{"bert-base", "bert-large", "gpt"} {
		f := families[name]
		for _, cfg := range []Config{
			{Width: 2, Layers: 3, SeqLen: 64, Vocab: 1000},
			{Width: 0.5, Layers: 1, SeqLen: 8, Vocab: 50, Classes: 3},
			{Width: 0.3, Layers: 2},
		} {
			b := newBuilder(name, must(f.normalize(name, cfg)))
			dm := b.transformerDims()
			if dm.h%dm.heads != 0 || dm.d*dm.heads != dm.h {
				t.Errorf("%s %+v: hidden %d not divisible by %d heads", name, cfg, dm.h, dm.heads)
			}
			if cfg.Width*float64(f.hidden) == float64(64*int64(math.Round(cfg.Width*float64(f.hidden)/64))) && dm.d != 64 {
				t.Errorf("%s %+v: head dim %d, want 64", name, cfg, dm.d)
			}
			c := b.cfg
			H, F, T, V, L := dm.h, dm.ffn, c.SeqLen, c.Vocab, int64(c.Layers)
			block := 4*(H*H+H) + (H*F + F) + (F*H + H) + 4*H
			var want int64
			if name == "gpt" {
				want = V*H + T*H + L*block + 2*H
			} else {
				want = V*H + T*H + 2*H + 2*H + L*block + H*c.Classes + c.Classes
			}
			got, err := ParamCount(name, cfg)
			if err != nil || got != want {
				t.Errorf("ParamCount(%s, %+v) = %d, %v; want %d", name, cfg, got, err, want)
			}
		}
	}
	b := newBuilder("bert-large", must(families["bert-large"].normalize("bert-large", Config{Width: 2})))
	if dm := b.transformerDims(); dm.h != 2048 || dm.heads != 32 || dm.d != 64 {
		t.Errorf("bert-large width 2: hidden %d heads %d, want 2048 and 32", dm.h, dm.heads)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func TestWidthScalesCNNs(t *testing.T) {
	for _, name := range []string{"vgg16", "resnet50", "inception"} {
		p1 := must(ParamCount(name, Config{}))
		p2 := must(ParamCount(name, Config{Width: 2}))
		if r := float64(p2) / float64(p1); r < 3 || r > 4.2 {
			t.Errorf("%s: width 2 has %.2fx the parameters of width 1, want about 4x", name, r)
		}
	}
	// Width 40 (Table V's scale for VGG-16 under TSPLIT) builds without data.
	m := build(t, "vgg16", Config{Batch: 16, Width: 40})
	if len(m.GetGraph().GetInitializer()) > 2 {
		t.Errorf("vgg16 width 40: %d initializers", len(m.GetGraph().GetInitializer()))
	}
}

func TestBatch(t *testing.T) {
	for _, name := range Names() {
		cfg := SmallConfig(name)
		cfg.Batch = 3
		m := build(t, name, cfg)
		if d := dimsOf(m.GetGraph().GetInput()[0]); d[0] != 3 {
			t.Errorf("%s: input dims %v, want batch 3", name, d)
		}
		if d := dimsOf(m.GetGraph().GetOutput()[0]); d[0] != 3 {
			t.Errorf("%s: output dims %v, want batch 3", name, d)
		}
		cfg.Batch = 0
		m = build(t, name, cfg)
		if p := m.GetGraph().GetInput()[0].GetType().GetTensorType().GetShape().GetDim()[0].GetDimParam(); p != "batch" {
			t.Errorf("%s: batch dim param %q, want \"batch\"", name, p)
		}
	}
}

func TestDropout(t *testing.T) {
	for _, name := range Names() {
		cfg := SmallConfig(name)
		count := func(m *onnxpb.ModelProto) int {
			n := 0
			for _, node := range m.GetGraph().GetNode() {
				if node.GetOpType() == "Dropout" {
					n++
				}
			}
			return n
		}
		if n := count(build(t, name, cfg)); n != 0 {
			t.Errorf("%s: %d Dropout nodes without Config.Dropout", name, n)
		}
		cfg.Dropout = 0.25
		m := build(t, name, cfg)
		want := map[string]int{"vgg16": 2, "vgg19": 2, "inception": 1, "bert-base": 2 + 3*2, "bert-large": 8, "gpt": 1 + 3*2}[name]
		if n := count(m); n != want {
			t.Errorf("%s: %d Dropout nodes, want %d", name, n, want)
		}
		if want > 0 {
			checkStructure(t, name, m)
		}
	}
}

func TestErrors(t *testing.T) {
	cases := []struct {
		name string
		cfg  Config
	}{
		{"resnet", Config{}},
		{"", Config{}},
		{"resnet50", Config{Batch: -1}},
		{"resnet50", Config{Batch: 1 << 40}},
		{"resnet50", Config{Width: -1}},
		{"resnet50", Config{Width: math.NaN()}},
		{"resnet50", Config{Width: math.Inf(1)}},
		{"resnet50", Config{Width: 1e6}},
		{"resnet50", Config{Width: 0.001}}, // 64 channels × 0.001 rounds to 0
		{"bert-base", Config{Width: 0.0001}},
		{"resnet50", Config{ImageSize: -3}},
		{"vgg16", Config{ImageSize: 16}}, // the fifth pool has nothing left
		{"inception", Config{ImageSize: 64}},
		{"inception", Config{ImageSize: 1 << 20}},
		{"resnet50", Config{Classes: -1}},
		{"resnet50", Config{Dropout: 1}},
		{"resnet50", Config{Dropout: -0.1}},
		{"resnet50", Config{Dropout: float32(math.NaN())}},
		{"resnet50", Config{SeqLen: -1}}, // ignored by CNNs, but negative
		{"bert-base", Config{SeqLen: -1}},
		{"bert-base", Config{Layers: -2}},
		{"bert-base", Config{Layers: 1 << 20}},
		{"gpt", Config{Vocab: -5}},
		{"gpt", Config{Width: 1000, Layers: 4000, WeightsAsInputs: true}}, // > 2^40 weights
	}
	for _, c := range cases {
		m, err := Build(c.name, c.cfg)
		if err == nil || m != nil {
			t.Errorf("Build(%q, %+v) = %v, %v; want an error", c.name, c.cfg, m != nil, err)
			continue
		}
		if _, err := ParamCount(c.name, c.cfg); err == nil {
			t.Errorf("ParamCount(%q, %+v) succeeded", c.name, c.cfg)
		}
		t.Logf("%s %+v: %v", c.name, c.cfg, err)
	}
}

// writeModels writes models to dir and returns their paths.
func writeModels(t *testing.T, dir string, models map[string]*onnxpb.ModelProto) map[string]string {
	t.Helper()
	paths := map[string]string{}
	for key, m := range models {
		p := filepath.Join(dir, key+".onnx")
		if err := os.WriteFile(p, marshal(t, m), 0o644); err != nil {
			t.Fatal(err)
		}
		paths[key] = p
	}
	return paths
}

const checkScript = `
import json, sys
import onnx
from onnx import shape_inference
res = {}
for path in sys.argv[1:]:
    onnx.checker.check_model(path, full_check=True)
    m = shape_inference.infer_shapes(onnx.load(path), check_type=True, strict_mode=True)
    res[path] = [[d.dim_value if d.HasField("dim_value") else -1 for d in o.type.tensor_type.shape.dim] for o in m.graph.output]
print(json.dumps(res))
`

// TestONNXChecker runs the python onnx package's full checker and strict
// shape inference on small models, dropout variants and the default models
// (weights as inputs).
func TestONNXChecker(t *testing.T) {
	py := oracle.PythonONNX(t)
	models := map[string]*onnxpb.ModelProto{}
	for _, name := range Names() {
		cfg := SmallConfig(name)
		models[name+"_small"] = build(t, name, cfg)
		cfg.Dropout, cfg.Batch = 0.1, 2
		models[name+"_dropout"] = build(t, name, cfg)
		models[name+"_default"] = build(t, name, Config{WeightsAsInputs: true})
	}
	paths := writeModels(t, t.TempDir(), models)
	args := []string{"-c", checkScript}
	for _, p := range paths {
		args = append(args, p)
	}
	out, err := exec.Command(py, args...).Output()
	if err != nil {
		msg := ""
		if ee, ok := err.(*exec.ExitError); ok {
			msg = string(ee.Stderr)
		}
		t.Fatalf("onnx checker: %v\n%s", err, msg)
	}
	var res map[string][][]int64
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("checker output %q: %v", out, err)
	}
	for key, p := range paths {
		want := dimsOf(models[key].GetGraph().GetOutput()[0])
		if got := res[p]; len(got) != 1 || !slices.Equal(got[0], want) {
			t.Errorf("%s: onnx infers output dims %v, declared %v", key, got, want)
		}
	}
}

// randomInput is a seeded-random batch for model name at cfg.
func randomInput(name string, cfg Config, batch int64) map[string]*oracle.Tensor {
	r := rand.New(rand.NewPCG(1, 2))
	if isTransformer(name) {
		c := must(families[name].normalize(name, cfg))
		ids := make([]int64, batch*c.SeqLen)
		for i := range ids {
			ids[i] = r.Int64N(c.Vocab)
		}
		return map[string]*oracle.Tensor{"input_ids": oracle.FromInt64([]int64{batch, c.SeqLen}, ids)}
	}
	s := must(families[name].normalize(name, cfg)).ImageSize
	x := make([]float32, batch*3*s*s)
	for i := range x {
		x[i] = 2*r.Float32() - 1
	}
	return map[string]*oracle.Tensor{"input": oracle.FromFloat32([]int64{batch, 3, s, s}, x)}
}

func checkFinite(t *testing.T, out *oracle.Tensor, want []int64) {
	t.Helper()
	if out == nil || !slices.Equal(out.Dims, want) {
		t.Fatalf("ORT output %v, want dims %v", out, want)
	}
	for i, v := range out.Float32s() {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			t.Fatalf("ORT output element %d is %v", i, v)
		}
	}
}

// requireShapesJS skips the test unless ONNX Runtime (scripts/ort) and its
// shapes.js script are installed.
func requireShapesJS(t *testing.T) {
	t.Helper()
	if !oracle.ORTAvailable() {
		oracle.ORTShapes(t, "", 2) // skips, saying what is missing
	}
	root, err := oracle.ModuleRoot()
	if err != nil {
		t.Skip(err)
	}
	if _, err := os.Stat(filepath.Join(root, "scripts", "ort", "shapes.js")); err != nil {
		t.Skipf("scripts/ort/shapes.js is missing (%v); skipping the ONNX Runtime checks", err)
	}
}

// TestORT proves ONNX Runtime accepts every small model (shapes.js, with the
// symbolic batch set to 2) and that a forward pass, dropout included, stays
// finite (run.js without graph optimisation, so Dropout really runs).
func TestORT(t *testing.T) {
	requireShapesJS(t)
	dir := t.TempDir()
	for _, name := range Names() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			cfg := SmallConfig(name)
			drop := cfg
			drop.Dropout = 0.1
			paths := writeModels(t, dir, map[string]*onnxpb.ModelProto{
				name:           build(t, name, cfg),
				name + "_drop": build(t, name, drop),
			})
			want := []int64{2, cfg.Classes}
			if name == "gpt" {
				want = []int64{2, cfg.SeqLen, cfg.Vocab}
			}
			shapes := oracle.ORTShapes(t, paths[name], 2)
			if got := shapes["output"]; len(shapes) != 1 || !slices.Equal(got, want) {
				t.Errorf("shapes.js: outputs %v, want output %v", shapes, want)
			}
			for _, p := range []string{paths[name], paths[name+"_drop"]} {
				out := oracle.ORTRun(t, p, randomInput(name, cfg, 2), true)
				checkFinite(t, out["output"], want)
			}
		})
	}
}

// TestORTFullSize runs full-size models with their real weights through ONNX
// Runtime: activations must stay finite through the whole net.
func TestORTFullSize(t *testing.T) {
	if testing.Short() {
		t.Skip("full-size forward passes skipped in -short mode")
	}
	requireShapesJS(t)
	dir := t.TempDir()
	for _, c := range []struct {
		name string
		cfg  Config
	}{
		{"resnet50", Config{}},
		{"vgg16", Config{ImageSize: 64}},                          // 134 MB: below the 256 MiB limit
		{"bert-base", Config{Layers: 4, Vocab: 1000, SeqLen: 64}}, // width 1
		{"gpt", Config{Layers: 4, Vocab: 1000, SeqLen: 64, Dropout: 0.1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := build(t, c.name, c.cfg)
			if len(m.GetGraph().GetInput()) != 1 {
				t.Fatalf("weights are inputs")
			}
			p := writeModels(t, dir, map[string]*onnxpb.ModelProto{c.name: m})[c.name]
			out := oracle.ORTRun(t, p, randomInput(c.name, c.cfg, 1), true)
			checkFinite(t, out["output"], dimsWithBatch(m, 1))
		})
	}
}

func dimsWithBatch(m *onnxpb.ModelProto, batch int64) []int64 {
	d := dimsOf(m.GetGraph().GetOutput()[0])
	d[0] = batch
	return d
}

// TestGPTCausal checks the causal mask in ONNX Runtime: changing the last
// token changes no logits of the earlier positions.
func TestGPTCausal(t *testing.T) {
	requireShapesJS(t)
	cfg := SmallConfig("gpt")
	p := writeModels(t, t.TempDir(), map[string]*onnxpb.ModelProto{"gpt": build(t, "gpt", cfg)})["gpt"]
	in := randomInput("gpt", cfg, 1)
	a := oracle.ORTRun(t, p, in, false)["output"].Float32s()
	ids := in["input_ids"].Int64s()
	ids[len(ids)-1] = (ids[len(ids)-1] + 1) % cfg.Vocab
	in["input_ids"] = oracle.FromInt64([]int64{1, cfg.SeqLen}, ids)
	b := oracle.ORTRun(t, p, in, false)["output"].Float32s()
	v := int(cfg.Vocab)
	for i := range a {
		last := i/v == int(cfg.SeqLen)-1
		if d := math.Abs(float64(a[i] - b[i])); !last && d > 1e-5 {
			t.Fatalf("logit %d of position %d changed by %g when only the last token changed", i%v, i/v, d)
		}
	}
	if slices.Equal(a[len(a)-v:], b[len(b)-v:]) {
		t.Error("the last position's logits did not change with its token")
	}
}
