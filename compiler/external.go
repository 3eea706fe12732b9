package compiler

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// dirSource reads external data files confined to one folder: the
// folder that holds the model. A location that is absolute, climbs out
// with "..", or resolves through a symlink to a place outside the
// folder is refused, so a model cannot make tsplit read arbitrary files.
type dirSource struct{ dir string }

func (d dirSource) resolve(location string) (string, error) {
	if location == "" || filepath.IsAbs(location) || strings.HasPrefix(location, "/") || strings.HasPrefix(location, `\`) || filepath.VolumeName(location) != "" {
		return "", fmt.Errorf("external data location %q must be a relative path inside the model's folder", location)
	}
	clean := filepath.Clean(filepath.FromSlash(location))
	if clean == ".." || strings.HasPrefix(clean, ".."+string(filepath.Separator)) {
		return "", fmt.Errorf("external data location %q leaves the model's folder", location)
	}
	for _, part := range strings.Split(filepath.ToSlash(location), "/") {
		if part == ".." {
			return "", fmt.Errorf("external data location %q leaves the model's folder", location)
		}
	}
	full := filepath.Join(d.dir, clean)
	real, err := filepath.EvalSymlinks(full)
	if err != nil {
		return "", fmt.Errorf("external data %q: %v", location, err)
	}
	base, err := filepath.EvalSymlinks(d.dir)
	if err != nil {
		return "", fmt.Errorf("external data %q: %v", location, err)
	}
	rel, err := filepath.Rel(base, real)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "", fmt.Errorf("external data location %q resolves outside the model's folder", location)
	}
	return real, nil
}

func (d dirSource) read(location string, offset, length int64) ([]byte, error) {
	path, err := d.resolve(location)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("external data: %v", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("external data: %v", err)
	}
	if offset+length > st.Size() || offset+length < 0 {
		return nil, fmt.Errorf("external data %q: bytes %d..%d are past its end (%d bytes)", location, offset, offset+length, st.Size())
	}
	buf := make([]byte, length)
	if _, err := f.ReadAt(buf, offset); err != nil && err != io.EOF {
		return nil, fmt.Errorf("external data %q: %v", location, err)
	}
	return buf, nil
}
