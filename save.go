package tsplit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/tsplit/tsplit/backend"
	"github.com/tsplit/tsplit/internal/tensorfile"
	"github.com/tsplit/tsplit/ir"
)

// checkSaveDir refuses a SaveOutputs path that exists and is not a
// folder, before the run.
func checkSaveDir(dir string) error {
	if dir == "" {
		return nil
	}
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil // created when the outputs are saved
	case err != nil:
		return usage("SaveOutputs", "%v", err)
	case !st.IsDir():
		return usage("SaveOutputs", "%s is not a folder", dir)
	}
	return nil
}

// saveOutputs writes each output to dir as a .npy file and index.json,
// which maps the outputs' names to their files: a name becomes a file
// name with what is not a letter, a digit, '-', '_' or '.' replaced
// ('/' in exported names, a leading '.'), so two names may need a
// suffix to stay apart. Files are written as every output is (backend:
// regular files only, never over protect, through a temporary file).
func saveOutputs(ctx context.Context, dir string, outs []Output, protect []string) ([]SavedOutput, error) {
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return nil, usage("SaveOutputs", "%v", err)
	}
	taken := map[string]bool{"index.json": true}
	index := map[string]string{}
	var saved []SavedOutput
	for i := range outs {
		o := &outs[i]
		t, err := npyTensor(o)
		if err != nil {
			return saved, err
		}
		data, err := tensorfile.EncodeNPY(t)
		if err != nil {
			return saved, fmt.Errorf("tsplit: output %q: %v", o.Name, err)
		}
		base := fileName(o.Name)
		name := base + ".npy"
		for k := 2; taken[name]; k++ {
			name = fmt.Sprintf("%s~%d.npy", base, k)
		}
		taken[name] = true
		path := filepath.Join(dir, name)
		if err := writeBytes(ctx, path, data, protect); err != nil {
			return saved, err
		}
		saved = append(saved, SavedOutput{Name: o.Name, File: path})
		index[o.Name] = name
	}
	js, err := json.MarshalIndent(index, "", "  ")
	if err != nil {
		return saved, err
	}
	return saved, writeBytes(ctx, filepath.Join(dir, "index.json"), append(js, '\n'), protect)
}

// writeBytes writes a file of SaveOutputs; a path backend refuses is
// the caller's mistake.
func writeBytes(ctx context.Context, path string, data []byte, protect []string) error {
	err := backend.WriteBytesContext(ctx, path, data, protect...)
	var oe *backend.OutputError
	if errors.As(err, &oe) {
		return &UsageError{Option: "SaveOutputs", Err: err}
	}
	return err
}

// npyTensor is an output as a tensor numpy reads. bfloat16, which numpy
// lacks, is widened to float32 (exactly: it is float32's upper half);
// types with no numpy counterpart (strings, 8- and 4-bit floats, packed
// 4-bit integers, complex) are an error naming the output.
func npyTensor(o *Output) (*tensorfile.Tensor, error) {
	if o.DType == ir.BFloat16 {
		out := make([]byte, 2*len(o.Data))
		for i := 0; i+1 < len(o.Data); i += 2 {
			out[2*i+2], out[2*i+3] = o.Data[i], o.Data[i+1]
		}
		return &tensorfile.Tensor{Type: "float32", Dims: o.Shape, Data: out}, nil
	}
	for name, dt := range tensorTypes {
		if dt == o.DType {
			return &tensorfile.Tensor{Type: name, Dims: o.Shape, Data: o.Data}, nil
		}
	}
	return nil, fmt.Errorf("tsplit: output %q is %v, which a .npy file cannot hold", o.Name, o.DType)
}

// fileName turns an output's name into a file name (without extension).
func fileName(name string) string {
	var b strings.Builder
	for i, r := range name {
		ok := r == '-' || r == '_' || r == '.' && i > 0 ||
			'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9'
		if ok {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	s := b.String()
	const most = 200 // file names are at most 255 bytes
	if len(s) > most {
		s = s[:most]
	}
	if s == "" {
		s = "_"
	}
	return s
}
