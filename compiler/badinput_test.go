package compiler

import (
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
		{"undefined-output", func() []byte {
			m := ot.ReluChain()
			m.Graph.Output[0] = ot.Input("zz", ot.Float, "batch", 4)
			return enc(t, m)
		}, []string{`"zz"`, "never defined"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := ot.WriteBytes(t, dir, c.name+".onnx", c.model())
			_, err := Import(path, Options{Batch: 2})
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
