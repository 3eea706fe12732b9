//go:build unix

package backend_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/tsplit/tsplit/backend"
	"github.com/tsplit/tsplit/compiler"
	ot "github.com/tsplit/tsplit/internal/onnxtest"
	"github.com/tsplit/tsplit/ir"
	"github.com/tsplit/tsplit/onnxpb"
)

// externalChain writes ReluChain with its bias as external data into
// dir (m.onnx, w.bin) and imports it.
func externalChain(t *testing.T, dir string) *ir.Model {
	return externalModel(t, dir, false)
}

// externalModel is externalChain, or with constant set, the bias given
// by a Constant node whose value tensor is the external data.
func externalModel(t *testing.T, dir string, constant bool) *ir.Model {
	t.Helper()
	mp := ot.ReluChain()
	b := mp.Graph.Initializer[0]
	ot.WriteBytes(t, dir, "w.bin", b.RawData)
	b.RawData = nil
	b.DataLocation = onnxpb.TensorProto_EXTERNAL.Enum()
	b.ExternalData = []*onnxpb.StringStringEntryProto{{Key: proto.String("location"), Value: proto.String("w.bin")}}
	if constant {
		mp.Graph.Initializer = nil
		value := &onnxpb.AttributeProto{Name: proto.String("value"), Type: onnxpb.AttributeProto_TENSOR.Enum(), T: b}
		mp.Graph.Node = append([]*onnxpb.NodeProto{ot.Node("Constant", "bias", nil, []string{"b"}, value)}, mp.Graph.Node...)
	}
	m, err := compiler.Import(ot.Write(t, dir, "m.onnx", mp), compiler.Options{Batch: 2})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// Outputs are written only to regular files and never onto the model's
// own inputs; symlinks are followed to the file they name (issue 12,
// item 11: -o /dev/null replaced the device with a file, -o could be
// the input or its weights).
func TestOutputPaths(t *testing.T) {
	dir := t.TempDir()
	m := externalChain(t, dir)
	ot.WriteBytes(t, dir, "old.onnx", []byte("old"))
	os.Mkdir(filepath.Join(dir, "folder"), 0o755)
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	ot.WriteBytes(t, dir, "target.onnx", []byte("target"))
	os.Symlink("target.onnx", filepath.Join(dir, "link.onnx"))
	os.Symlink("missing.onnx", filepath.Join(dir, "dangling.onnx"))
	os.Link(filepath.Join(dir, "m.onnx"), filepath.Join(dir, "hardlink.onnx"))
	os.Symlink("w.bin", filepath.Join(dir, "weights-link"))
	cases := []struct {
		name    string
		path    string
		want    string // substring of the error; "" : written
		written string // the file that gets the model ("" : path)
	}{
		{"new-file", "new.onnx", "", ""},
		{"existing-file", "old.onnx", "", ""},
		{"folder", "folder", "is a folder, not a regular file", ""},
		{"device", "/dev/null", "is a character device, not a regular file", ""},
		{"fifo", "fifo", "is a FIFO, not a regular file", ""},
		{"symlink", "link.onnx", "", "target.onnx"},
		{"dangling-symlink", "dangling.onnx", "symlink to a missing", ""},
		{"missing-folder", "nowhere/x.onnx", "its folder " + filepath.Join(dir, "nowhere") + " does not exist", ""},
		{"the-input", "m.onnx", "is the input", ""},
		{"the-input-hard-link", "hardlink.onnx", "is the input", ""},
		{"the-input-weights", "w.bin", "is the input", ""},
		{"the-input-weights-by-link", "weights-link", "is the input", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := c.path
			if !filepath.IsAbs(path) {
				path = filepath.Join(dir, path)
			}
			err := backend.WriteFile(m, path)
			if c.want != "" {
				if err == nil || !strings.Contains(err.Error(), c.want) {
					t.Fatalf("got %v, want an error containing %q", err, c.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			written := path
			if c.written != "" {
				written = filepath.Join(dir, c.written)
				if st, err := os.Lstat(path); err != nil || st.Mode()&os.ModeSymlink == 0 {
					t.Fatalf("the symlink %s was replaced", path)
				}
			}
			if _, err := compiler.Import(written, compiler.Options{Batch: 2}); err != nil {
				t.Fatalf("the written model does not load: %v", err)
			}
		})
	}
	if st, err := os.Stat("/dev/null"); err != nil || st.Mode()&os.ModeCharDevice == 0 {
		t.Fatal("/dev/null is no longer a device")
	}
	assertNoTemp(t, dir)
}

func assertNoTemp(t *testing.T, dir string) {
	t.Helper()
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".") {
			t.Errorf("temporary file %s left behind", e.Name())
		}
	}
}

// A model written to another folder than its own gets its external
// data beside it (locations are relative to the model's folder); in its
// own folder it keeps them (issue 12, item 11).
func TestOutputRelocatesExternalData(t *testing.T) {
	for _, constant := range []bool{false, true} {
		t.Run(map[bool]string{false: "initializer", true: "constant-node"}[constant], func(t *testing.T) {
			relocates(t, constant)
		})
	}
}

func relocates(t *testing.T, constant bool) {
	src := t.TempDir()
	m := externalModel(t, src, constant)
	other := filepath.Join(t.TempDir(), "other", "dir")
	os.MkdirAll(other, 0o755)
	out := filepath.Join(other, "x.onnx")
	if err := backend.WriteFile(m, out); err != nil {
		t.Fatal(err)
	}
	back, err := compiler.Import(out, compiler.Options{Batch: 2})
	if err != nil {
		t.Fatalf("the output in another folder does not load: %v", err)
	}
	want := ot.ReluChain().Graph.Initializer[0].RawData
	got, err := back.Graph.Lookup("b").Data()
	if err != nil || got == nil || string(got.Raw) != string(want) {
		t.Fatalf("relocated weights differ: %v, %v", got, err)
	}
	if _, err := os.Stat(out + ".data"); err != nil {
		t.Fatal("no data file beside the output")
	}
	// In the model's own folder the locations stay and no data file is
	// written.
	same := filepath.Join(src, "y.onnx")
	if err := backend.WriteFile(m, same); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(same + ".data"); err == nil {
		t.Fatal("a data file was written beside an output in the model's folder")
	}
	if _, err := compiler.Import(same, compiler.Options{Batch: 2}); err != nil {
		t.Fatal(err)
	}
	assertNoTemp(t, other)
	assertNoTemp(t, src)
}

// New outputs get mode 0666 less the umask, not a forced 0644.
func TestOutputRespectsUmask(t *testing.T) {
	dir := t.TempDir()
	for _, mask := range []int{0o022, 0o077, 0o002} {
		old := syscall.Umask(mask)
		path := filepath.Join(dir, "u.onnx")
		os.Remove(path)
		err := backend.WriteBytesAtomic(path, []byte("x"))
		syscall.Umask(old)
		if err != nil {
			t.Fatal(err)
		}
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := st.Mode().Perm(), os.FileMode(0o666&^mask); got != want {
			t.Errorf("umask %03o: mode %v, want %v", mask, got, want)
		}
	}
}

// A write whose context ends (the commands cancel it on SIGINT and
// SIGTERM) leaves the destination as it was and no temporary file.
func TestOutputCancelled(t *testing.T) {
	dir := t.TempDir()
	path := ot.WriteBytes(t, dir, "x.onnx", []byte("before"))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := backend.WriteBytesContext(ctx, path, make([]byte, 64<<20)); err != context.Canceled {
		t.Fatalf("got %v, want context.Canceled", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "before" {
		t.Fatal("the destination changed")
	}
	assertNoTemp(t, dir)
}
