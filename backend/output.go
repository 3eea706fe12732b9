package backend

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"

	"google.golang.org/protobuf/proto"

	"github.com/tsplit/tsplit/ir"
	"github.com/tsplit/tsplit/onnxpb"
)

// Every file tsplit writes goes through CheckOutput and writeAtomic:
//
//   - only regular files are written. A path naming a folder, a device
//     (/dev/null), a FIFO or a socket is refused: renaming a temporary
//     file over it would replace the device node with a file (as root)
//     or fail late.
//   - a symlink is followed: the file it points to is replaced and the
//     link stays, as an editor saving through a link does. A link to a
//     missing file is refused rather than creating a file wherever it
//     points.
//   - the inputs are never written over: the model being written was
//     read from them, and its weights may still be read lazily from its
//     external data files (os.SameFile, so hard links and other spellings
//     of the same path count).
//   - the bytes go to a temporary file in the destination's folder,
//     created with mode 0666 less the umask, then renamed into place; it
//     is removed when the write fails or its context ends (the commands
//     cancel it on SIGINT and SIGTERM), so an interrupted write leaves
//     neither a partial output nor a hidden temporary file.

// CheckOutput returns the file a write to path replaces: path itself, or
// the file a symlink at path points to. It refuses what is not a regular
// file and any of protect (files the output must not replace: the input
// model and its external data). A path that does not exist yet is fine
// when its folder exists.
func CheckOutput(path string, protect ...string) (string, error) {
	if path == "" {
		return "", &OutputError{Reason: "no output path"}
	}
	dst := path
	lst, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		// A new file: its folder must be there to hold it.
		if st, err := os.Stat(filepath.Dir(path)); err != nil || !st.IsDir() {
			return "", &OutputError{Path: path, Reason: "cannot be created: its folder " + filepath.Dir(path) + " does not exist"}
		}
		return dst, nil
	case err != nil:
		return "", &OutputError{Path: path, Reason: err.Error()}
	case lst.Mode()&fs.ModeSymlink != 0:
		if dst, err = filepath.EvalSymlinks(path); err != nil {
			return "", &OutputError{Path: path, Reason: fmt.Sprintf("is a symlink to a missing or unreadable file (%v)", err)}
		}
	}
	st, err := os.Stat(dst)
	if err != nil {
		return "", &OutputError{Path: path, Reason: err.Error()}
	}
	if !st.Mode().IsRegular() {
		return "", &OutputError{Path: path, Reason: "is " + kindOf(st.Mode()) + ", not a regular file: tsplit writes only regular files"}
	}
	for _, p := range protect {
		if p == "" {
			continue
		}
		if ps, err := os.Stat(p); err == nil && os.SameFile(st, ps) {
			return "", &OutputError{Path: path, Reason: fmt.Sprintf("is the input %s: writing it would destroy what is being read", p)}
		}
	}
	return dst, nil
}

// OutputError is a path CheckOutput refuses: a mistake in what the
// caller asked for, which a command line reports as a usage error.
type OutputError struct {
	Path   string
	Reason string
}

func (e *OutputError) Error() string {
	if e.Path == "" {
		return "backend: " + e.Reason
	}
	return fmt.Sprintf("backend: output %s %s", e.Path, e.Reason)
}

// kindOf names a file type for the refusal message.
func kindOf(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a folder"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeSocket != 0:
		return "a socket"
	}
	return "not a regular file (" + m.Type().String() + ")"
}

// writeChunk is how much one write call hands the file: the context is
// checked between chunks, so a signal stops a large write promptly.
const writeChunk = 4 << 20

// writeAtomic writes what fill produces to dst (already checked by
// CheckOutput) through a temporary file renamed into place. The
// temporary file is removed unless the rename happened.
func writeAtomic(ctx context.Context, dst string, fill func(w io.Writer) error) (err error) {
	if err := ctx.Err(); err != nil {
		return err
	}
	tmp, err := createTemp(dst)
	if err != nil {
		return fmt.Errorf("backend: %v", err)
	}
	name := tmp.Name()
	committed := false
	defer func() {
		if !committed {
			tmp.Close()
			os.Remove(name)
		}
	}()
	if err := fill(&ctxWriter{ctx: ctx, w: tmp}); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("backend: writing %s: %v", dst, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("backend: writing %s: %v", dst, err)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := os.Rename(name, dst); err != nil {
		return fmt.Errorf("backend: %v", err)
	}
	committed = true
	return nil
}

// createTemp makes a new hidden file beside dst. Unlike os.CreateTemp
// (mode 0600) it asks for 0666, so the umask decides the output's mode
// as it does for any file a command creates.
func createTemp(dst string) (*os.File, error) {
	dir, base := filepath.Split(dst)
	for range 100 {
		name := filepath.Join(dir, fmt.Sprintf(".%s.tmp%08x", base, rand.Uint32()))
		f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o666)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		return f, err
	}
	return nil, fmt.Errorf("cannot create a temporary file beside %s", dst)
}

// ctxWriter writes in chunks and stops once its context is done.
type ctxWriter struct {
	ctx context.Context
	w   io.Writer
}

func (c *ctxWriter) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		if err := c.ctx.Err(); err != nil {
			return n, err
		}
		k := min(len(p), writeChunk)
		m, err := c.w.Write(p[:k])
		n += m
		if err != nil {
			return n, err
		}
		p = p[k:]
	}
	return n, nil
}

// WriteBytesAtomic writes data to path atomically (see CheckOutput for
// the paths it refuses).
func WriteBytesAtomic(path string, data []byte) error {
	return WriteBytesContext(context.Background(), path, data)
}

// WriteBytesContext is WriteBytesAtomic that never replaces a file of
// protect and gives up, leaving nothing behind, once ctx is done.
func WriteBytesContext(ctx context.Context, path string, data []byte, protect ...string) error {
	dst, err := CheckOutput(path, protect...)
	if err != nil {
		return err
	}
	return writeAtomic(ctx, dst, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// InputFiles are the files m was read from: its ONNX file and the
// external data files its initializers refer to. An output must not
// replace them.
func InputFiles(m *ir.Model) []string {
	if m.Path == "" {
		return nil
	}
	files := []string{m.Path}
	dir := filepath.Dir(m.Path)
	seen := map[string]bool{}
	for _, v := range m.Graph.Inits {
		if tp, ok := v.Src.(*onnxpb.TensorProto); ok {
			if loc := externalLocation(tp); loc != "" && !seen[loc] {
				seen[loc] = true
				files = append(files, filepath.Join(dir, filepath.FromSlash(loc)))
			}
		}
	}
	return files
}

// externalLocation is the location of a tensor kept as external data
// ("" for a tensor with its data in the file).
func externalLocation(tp *onnxpb.TensorProto) string {
	if tp.GetDataLocation() != onnxpb.TensorProto_EXTERNAL {
		return ""
	}
	for _, kv := range tp.ExternalData {
		if kv.GetKey() == "location" {
			return kv.GetValue()
		}
	}
	return ""
}

// sameFolder reports whether two paths are in the same folder.
func sameFolder(a, b string) bool {
	sa, err := os.Stat(filepath.Dir(a))
	if err != nil {
		return false
	}
	sb, err := os.Stat(filepath.Dir(b))
	return err == nil && os.SameFile(sa, sb)
}

// dataAlign aligns each tensor in a data file tsplit writes.
const dataAlign = 64

// external is a tensor of the output kept as external data: where its
// proto is and how to get its bytes.
type external struct {
	tp   **onnxpb.TensorProto
	data func() ([]byte, error)
	// off and n are where relocate put it in the data file.
	off, n int64
}

// relocate points the external tensors of mp (the proto of m) at a new
// data file, named by location, whose bytes come from m's values: an
// external location is relative to the model's folder, so a model
// written to another folder would no longer find its weights (and
// tsplit refuses a location climbing out with ".."). The protos are
// copied, never changed in place (they are shared with the source
// model; the slices holding them are ToProto's own). It returns the
// tensors to write, in file order.
func relocate(m *ir.Model, mp *onnxpb.ModelProto, location string) ([]external, error) {
	var out []external
	for i, tp := range mp.Graph.Initializer {
		if externalLocation(tp) == "" {
			continue
		}
		v := m.Graph.Lookup(tp.GetName())
		if v == nil {
			return nil, fmt.Errorf("backend: initializer %q is not in the graph", tp.GetName())
		}
		out = append(out, external{tp: &mp.Graph.Initializer[i], data: func() ([]byte, error) {
			t, err := v.Data()
			if err != nil || t == nil {
				return nil, fmt.Errorf("backend: initializer %q: no data (%v)", v.Name, err)
			}
			return t.Raw, nil
		}})
	}
	order := m.Graph.Order()
	for i, n := range mp.Graph.Node {
		for j, ap := range n.Attribute {
			if ap.T == nil || externalLocation(ap.T) == "" {
				continue
			}
			a := order[i].Attrs[j]
			// The attribute proto is the source's: copy it before
			// pointing its tensor elsewhere.
			c := proto.Clone(ap).(*onnxpb.AttributeProto)
			n.Attribute[j] = c
			out = append(out, external{tp: &c.T, data: func() ([]byte, error) {
				if a.Tensor == nil {
					return nil, fmt.Errorf("backend: %s: attribute %q has no data", order[i].Describe(), a.Name)
				}
				return a.Tensor.Raw, nil
			}})
		}
	}
	var off int64
	for k := range out {
		e := &out[k]
		src := *e.tp
		n, err := ir.Shape(src.GetDims()).Bytes(ir.DType(src.GetDataType()))
		if err != nil {
			return nil, fmt.Errorf("backend: tensor %q: %v", src.GetName(), err)
		}
		c := proto.Clone(src).(*onnxpb.TensorProto)
		c.ExternalData = []*onnxpb.StringStringEntryProto{
			{Key: proto.String("location"), Value: proto.String(location)},
			{Key: proto.String("offset"), Value: proto.String(strconv.FormatInt(off, 10))},
			{Key: proto.String("length"), Value: proto.String(strconv.FormatInt(n, 10))},
		}
		*e.tp = c
		e.off, e.n = off, n
		off += (n + dataAlign - 1) / dataAlign * dataAlign
	}
	return out, nil
}

// writeData writes the relocated tensors, each at its offset.
func writeData(w io.Writer, ext []external) error {
	var at int64
	for _, e := range ext {
		if pad := e.off - at; pad > 0 {
			if _, err := w.Write(make([]byte, pad)); err != nil {
				return err
			}
			at = e.off
		}
		b, err := e.data()
		if err != nil {
			return err
		}
		if int64(len(b)) != e.n {
			return fmt.Errorf("tensor %q has %d bytes of data, its type needs %d", (*e.tp).GetName(), len(b), e.n)
		}
		if _, err := w.Write(b); err != nil {
			return err
		}
		at += int64(len(b))
	}
	return nil
}
