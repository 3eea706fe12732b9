package compiler

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	ot "github.com/tsplit/tsplit/internal/onnxtest"
	"github.com/tsplit/tsplit/onnxpb"
)

// Each bad model must give an error that names the file and says why,
// and must not panic.
func TestBadInput(t *testing.T) {
	dir := t.TempDir()
	valid, err := proto.Marshal(ot.ReluChain())
	if err != nil {
		t.Fatal(err)
	}

	// An 8-byte data file for models declaring more than it holds.
	ot.WriteBytes(t, dir, "tiny.bin", make([]byte, 8))
	cases := []struct {
		name  string
		model func() []byte
		want  []string // substrings of the error
	}{
		{"truncated", func() []byte { return valid[:len(valid)/2] }, []string{"truncated"}},
		{"not-protobuf", func() []byte { return []byte("this is not an onnx file\n\x00\xff") }, []string{"not"}},
		{"empty", func() []byte { return nil }, []string{"empty"}},
		{"cycle", func() []byte {
			m := ot.ReluChain()
			m.Graph.Node = []*onnxpb.NodeProto{
				ot.Node("Add", "a", []string{"x", "q"}, []string{"p"}),
				ot.Node("Relu", "b", []string{"p"}, []string{"q"}),
				ot.Node("Relu", "c", []string{"q"}, []string{"y"}),
			}
			return enc(t, m)
		}, []string{"cycle", `"a"`, `"b"`}},
		{"undefined-input", func() []byte {
			m := ot.ReluChain()
			m.Graph.Node[1].Input[1] = "nowhere"
			return enc(t, m)
		}, []string{`node "add" (Add)`, `"nowhere"`, "never defined"}},
		{"duplicate-definition", func() []byte {
			m := ot.ReluChain()
			m.Graph.Node[1].Output[0] = "h"
			return enc(t, m)
		}, []string{`node "add" (Add)`, `"h"`, "already defined"}},
		{"duplicate-initializer", func() []byte {
			m := ot.ReluChain()
			m.Graph.Initializer = append(m.Graph.Initializer, m.Graph.Initializer[0])
			return enc(t, m)
		}, []string{`"b"`, "twice"}},
		{"negative-dim", func() []byte {
			m := ot.ReluChain()
			m.Graph.Input[0] = ot.Input("x", ot.Float, "batch", -4)
			return enc(t, m)
		}, []string{`"x"`, "negative"}},
		{"overflowing-dims", func() []byte {
			m := ot.ReluChain()
			m.Graph.Input[0] = ot.Input("x", ot.Float, 1<<40, 1<<40)
			return enc(t, m)
		}, []string{`"x"`, "overflows"}},
		{"overflowing-bytes", func() []byte {
			m := ot.ReluChain()
			m.Graph.Input[0] = ot.Input("x", ot.Float, int64(1)<<31, int64(1)<<31)
			return enc(t, m)
		}, []string{`"x"`, "overflows"}},
		{"unknown-op", func() []byte {
			m := ot.ReluChain()
			m.Graph.Node[0].OpType = proto.String("FrobnicateV9")
			return enc(t, m)
		}, []string{`node "relu" (FrobnicateV9)`, "not supported", "value_info"}},
		{"no-graph", func() []byte { return enc(t, &onnxpb.ModelProto{IrVersion: proto.Int64(8)}) }, []string{"no graph"}},
		{"external-dotdot", func() []byte { return enc(t, externalModel("../secret.bin")) }, []string{"leaves the model's folder"}},
		{"external-absolute", func() []byte { return enc(t, externalModel("/etc/passwd")) }, []string{"relative path inside the model's folder"}},
		{"external-nested-dotdot", func() []byte { return enc(t, externalModel("sub/../../x.bin")) }, []string{"leaves the model's folder"}},
		{"initializer-short-data", func() []byte {
			m := ot.ReluChain()
			m.Graph.Initializer[0].RawData = m.Graph.Initializer[0].RawData[:6]
			return enc(t, m)
		}, []string{`"b"`, "needs 16 bytes"}},
		{"bad-shape-mismatch", func() []byte {
			m := ot.ReluChain()
			m.Graph.Initializer[0] = ot.FloatTensor("b", []int64{3}, []float32{1, 2, 3})
			return enc(t, m)
		}, []string{`node "add" (Add)`, "broadcast"}},
		// Issue 12, item 10: a function calling another ten times, eight
		// levels deep, is 10^8 nodes from a 2 KB file; it is refused
		// before anything is copied.
		{"inline-bomb", func() []byte { return enc(t, inlineBomb(8, 10)) }, []string{"more than 1048576 nodes", "inlined"}},
		{"inline-recursion", func() []byte {
			m := inlineBomb(1, 1)
			m.Functions[1].Node[0].OpType = proto.String("F1") // F1 calls itself
			return enc(t, m)
		}, []string{`function "F1" calls itself`}},
		// An 89-byte model declaring 4 GiB of external weights: checked
		// against the file's size at import, before anything is sized
		// after the declaration.
		{"external-past-file", func() []byte {
			m := externalModel("tiny.bin")
			m.Graph.Initializer[0].Dims = []int64{1 << 30}
			m.Graph.Input[0] = ot.Input("x", ot.Float, "batch", 1<<30)
			m.Graph.Output[0] = ot.Input("y", ot.Float, "batch", 1<<30)
			return enc(t, m)
		}, []string{`initializer "b"`, `"tiny.bin"`, "past its end (8 bytes)"}},
		{"external-offset-past-file", func() []byte {
			m := externalModel("tiny.bin")
			m.Graph.Initializer[0].ExternalData = append(m.Graph.Initializer[0].ExternalData,
				&onnxpb.StringStringEntryProto{Key: proto.String("offset"), Value: proto.String("9223372036854775800")})
			return enc(t, m)
		}, []string{`initializer "b"`, "past its end"}},
		{"external-folder", func() []byte { return enc(t, externalModel(".")) }, []string{`initializer "b"`, "not a regular file"}},
		// Issue 12, item 9: training metadata naming values the graph
		// does not have.
		{"training-missing-loss", func() []byte {
			return enc(t, withTraining(`{"loss":"nope","loss_kind":"mse","optimizer":"sgd","params":["b"]}`))
		}, []string{"tsplit.training", `the loss "nope" is not a graph output`}},
		{"training-loss-not-scalar", func() []byte {
			return enc(t, withTraining(`{"loss":"y","loss_kind":"mse","optimizer":"sgd","params":["b"]}`))
		}, []string{`the loss "y" is f32[2,4]`}},
		{"training-missing-param", func() []byte {
			return enc(t, withTraining(`{"loss":"l","loss_kind":"mse","optimizer":"sgd","params":["w"]}`))
		}, []string{`the parameter "w" is not a graph input`}},
		{"training-feedback-type", func() []byte {
			return enc(t, withTraining(`{"loss":"l","loss_kind":"mse","optimizer":"sgd","params":["b"],"feedback":[["y","b"]]}`))
		}, []string{`"y" (f32[2,4]) is fed back into "b" of another type (f32[4])`}},
		{"training-feedback-missing", func() []byte {
			return enc(t, withTraining(`{"loss":"l","loss_kind":"mse","optimizer":"sgd","params":["b"],"feedback":[["gone","b"]]}`))
		}, []string{`the fed-back value "gone" is not a graph output`}},
		{"training-labels-missing", func() []byte {
			return enc(t, withTraining(`{"loss":"l","loss_kind":"mse","labels":"t","optimizer":"sgd","params":["b"]}`))
		}, []string{`the labels "t" are not a graph input`}},
		// Issue 12, item 8: an empty batch (--dim batch=0) is refused as
		// --batch 0 is; empty tensors elsewhere are supported.
		{"batch-dim-zero", func() []byte { return valid }, []string{`batch dimension "batch" bound to 0`}},
		{"undefined-output", func() []byte {
			m := ot.ReluChain()
			m.Graph.Output[0] = ot.Input("zz", ot.Float, "batch", 4)
			return enc(t, m)
		}, []string{`"zz"`, "never defined"}},
	}
	// Cases importing with other options than batch 2.
	optionsOf := map[string]Options{"batch-dim-zero": {Dims: map[string]int64{"batch": 0}}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := ot.WriteBytes(t, dir, c.name+".onnx", c.model())
			opts, ok := optionsOf[c.name]
			if !ok {
				opts = Options{Batch: 2}
			}
			_, err := Import(path, opts)
			if err == nil {
				t.Fatalf("Import succeeded, want an error")
			}
			msg := err.Error()
			if !strings.Contains(msg, path) {
				t.Errorf("error does not name the file %s: %v", path, msg)
			}
			for _, w := range c.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not contain %q", msg, w)
				}
			}
		})
	}
}

func enc(t *testing.T, m *onnxpb.ModelProto) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// inlineBomb is x → F<depth> → y where F<k> calls F<k-1> fan times in
// a chain and F0 is a Relu: fan^depth nodes once inlined.
func inlineBomb(depth, fan int) *onnxpb.ModelProto {
	call := func(fn, name, in, out string) *onnxpb.NodeProto {
		n := ot.Node(fn, name, []string{in}, []string{out})
		n.Domain = proto.String("bomb")
		return n
	}
	m := ot.Graph([]*onnxpb.NodeProto{call(fmt.Sprintf("F%d", depth), "call", "x", "y")},
		[]*onnxpb.ValueInfoProto{ot.Input("x", ot.Float, "batch", 4)}, []*onnxpb.ValueInfoProto{ot.Input("y", ot.Float, "batch", 4)})
	opsets := append(m.OpsetImport, &onnxpb.OperatorSetIdProto{Domain: proto.String("bomb"), Version: proto.Int64(1)})
	m.OpsetImport = opsets
	fn := func(name string, nodes ...*onnxpb.NodeProto) *onnxpb.FunctionProto {
		return &onnxpb.FunctionProto{Name: proto.String(name), Domain: proto.String("bomb"), Input: []string{"a"}, Output: []string{"b"}, Node: nodes, OpsetImport: opsets}
	}
	m.Functions = append(m.Functions, fn("F0", ot.Node("Relu", "r", []string{"a"}, []string{"b"})))
	for k := 1; k <= depth; k++ {
		var nodes []*onnxpb.NodeProto
		prev := "a"
		for j := range fan {
			out := fmt.Sprintf("t%d", j)
			if j == fan-1 {
				out = "b"
			}
			nodes = append(nodes, call(fmt.Sprintf("F%d", k-1), fmt.Sprintf("c%d", j), prev, out))
			prev = out
		}
		m.Functions = append(m.Functions, fn(fmt.Sprintf("F%d", k), nodes...))
	}
	return m
}

// withTraining is ReluChain with a scalar l = ReduceSum(y) output and
// the given training-step metadata.
func withTraining(meta string) *onnxpb.ModelProto {
	m := ot.ReluChain()
	m.Graph.Node = append(m.Graph.Node, ot.Node("ReduceSum", "sum", []string{"y"}, []string{"l"}, ot.Int("keepdims", 0)))
	m.Graph.Output = append(m.Graph.Output, ot.Input("l", ot.Float))
	m.MetadataProps = append(m.MetadataProps, &onnxpb.StringStringEntryProto{Key: proto.String(TrainingKey), Value: proto.String(meta)})
	return m
}

func externalModel(location string) *onnxpb.ModelProto {
	m := ot.ReluChain()
	b := m.Graph.Initializer[0]
	b.RawData = nil
	b.DataLocation = onnxpb.TensorProto_EXTERNAL.Enum()
	b.ExternalData = []*onnxpb.StringStringEntryProto{{Key: proto.String("location"), Value: proto.String(location)}}
	return m
}

// A symlink inside the folder that points outside it is refused too.
func TestExternalDataSymlinkEscape(t *testing.T) {
	outside := t.TempDir()
	dir := t.TempDir()
	secret := filepath.Join(outside, "w.bin")
	if err := os.WriteFile(secret, make([]byte, 16), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, filepath.Join(dir, "w.bin")); err != nil {
		t.Skip("symlinks unsupported:", err)
	}
	path := ot.Write(t, dir, "m.onnx", externalModel("w.bin"))
	_, err := Import(path, Options{})
	if err == nil || !strings.Contains(err.Error(), "outside the model's folder") {
		t.Fatalf("want an escape error, got %v", err)
	}
}

// External data inside the folder is read, with offsets.
func TestExternalDataInside(t *testing.T) {
	dir := t.TempDir()
	ref := ot.FloatTensor("b", []int64{4}, []float32{1, 2, 3, 4}).RawData
	data := append(make([]byte, 8), ref...)
	if err := os.MkdirAll(filepath.Join(dir, "weights"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "weights", "w.bin"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	m := externalModel("weights/w.bin")
	m.Graph.Initializer[0].ExternalData = append(m.Graph.Initializer[0].ExternalData,
		&onnxpb.StringStringEntryProto{Key: proto.String("offset"), Value: proto.String("8")},
		&onnxpb.StringStringEntryProto{Key: proto.String("length"), Value: proto.String("16")})
	path := ot.Write(t, dir, "m.onnx", m)
	im, err := Import(path, Options{Batch: 3})
	if err != nil {
		t.Fatal(err)
	}
	v := im.Graph.Lookup("b")
	d, err := v.Data()
	if err != nil {
		t.Fatal(err)
	}
	if got := d.Float32s(); got[0] != 1 || got[3] != 4 {
		t.Fatalf("external data read wrong: %v", got)
	}
	if y := im.Graph.Lookup("y"); y.Shape.String() != "[3,4]" {
		t.Fatalf("y shape %v, want [3,4]", y.Shape)
	}
}

// An unknown op whose outputs have value_info is carried through.
func TestOpaqueOpWithValueInfo(t *testing.T) {
	m := ot.ReluChain()
	m.Graph.Node[0].OpType = proto.String("FrobnicateV9")
	m.Graph.Node[0].Domain = proto.String("com.example")
	m.Graph.ValueInfo = append(m.Graph.ValueInfo, ot.Input("h", ot.Float, "batch", 4))
	path := ot.Write(t, t.TempDir(), "m.onnx", m)
	im, err := Import(path, Options{Batch: 5})
	if err != nil {
		t.Fatal(err)
	}
	if h := im.Graph.Lookup("h"); h.Shape.String() != "[5,4]" {
		t.Fatalf("opaque output shape %v", h.Shape)
	}
}

// A training step whose gradients need a constant sized by the batch
// (MaxPool's batch × channels plane offsets) is refused with an error
// naming the op when the batch is absurd; --batch 4294967296 allocated
// 256 GiB (issue 12, item 10).
func TestHugeGradientConstantRefused(t *testing.T) {
	m := ot.Graph(
		[]*onnxpb.NodeProto{
			ot.Node("Conv", "conv", []string{"x", "cw"}, []string{"c"}),
			ot.Node("MaxPool", "pool", []string{"c"}, []string{"p"}, ot.Ints("kernel_shape", 2, 2)),
			ot.Node("Flatten", "flat", []string{"p"}, []string{"f"}),
			ot.Node("MatMul", "fc", []string{"f", "w"}, []string{"y"}),
		},
		[]*onnxpb.ValueInfoProto{ot.Input("x", ot.Float, "batch", 2, 4, 4)},
		[]*onnxpb.ValueInfoProto{ot.Input("y", ot.Float, "batch", 3)},
		ot.FloatTensor("cw", []int64{2, 2, 1, 1}, make([]float32, 4)),
		ot.FloatTensor("w", []int64{18, 3}, make([]float32, 54)),
	)
	path := ot.Write(t, t.TempDir(), "pool.onnx", m)
	for _, c := range []struct {
		batch int64
		want  string // "" : builds
	}{
		{4, ""},
		{1 << 32, `gradient of node "pool" (MaxPool): needs a compile-time constant (batch × channels plane offsets) of 4294967296×2 elements`},
	} {
		im, err := Import(path, Options{Batch: c.batch})
		if err != nil {
			t.Fatal(err)
		}
		_, err = BuildTrainingStep(im, TrainOptions{})
		switch {
		case c.want == "" && err != nil:
			t.Errorf("batch %d: %v", c.batch, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("batch %d: got %v, want an error containing %q", c.batch, err, c.want)
		}
	}
}
