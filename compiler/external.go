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
// Only regular files are opened: a FIFO would block the import forever
// and a device could be read without end.
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

// open opens the external data file of location for reading, checking
// that it is a regular file holding bytes [offset, offset+length). The
// mode is checked before the open (which would block on a FIFO) and
// again on the open file (the path could have been swapped between).
func (d dirSource) open(location string, offset, length int64) (*os.File, error) {
	path, err := d.resolve(location)
	if err != nil {
		return nil, err
	}
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("external data %q: %v", location, err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("external data %q is not a regular file (%v)", location, st.Mode().Type())
	}
	f, err := os.OpenFile(path, os.O_RDONLY|openNoBlock, 0)
	if err != nil {
		return nil, fmt.Errorf("external data %q: %v", location, err)
	}
	st, err = f.Stat()
	if err == nil && !st.Mode().IsRegular() {
		err = fmt.Errorf("is not a regular file (%v)", st.Mode().Type())
	}
	if err == nil && (offset < 0 || length < 0 || offset > st.Size() || length > st.Size()-offset) {
		err = fmt.Errorf("bytes %d..%d are past its end (%d bytes)", offset, offset+length, st.Size())
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("external data %q: %v", location, err)
	}
	return f, nil
}

// check is open without the read: import calls it for every external
// initializer, so that a location the file cannot serve is an error
// before any memory is sized after the declared shape.
func (d dirSource) check(location string, offset, length int64) error {
	f, err := d.open(location, offset, length)
	if err != nil {
		return err
	}
	return f.Close()
}

func (d dirSource) read(location string, offset, length int64) ([]byte, error) {
	f, err := d.open(location, offset, length)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	buf := make([]byte, length)
	if _, err := f.ReadAt(buf, offset); err != nil && err != io.EOF {
		return nil, fmt.Errorf("external data %q: %v", location, err)
	}
	return buf, nil
}
