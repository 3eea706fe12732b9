package tensorfile

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// The .npy format (numpy's format.py, version 1.0): the magic string
// "\x93NUMPY", the version bytes 1 0, a little-endian uint16 header
// length, then the header, a Python dict literal with 'descr' (the
// element type), 'fortran_order' and 'shape', padded with spaces and a
// final newline so that the data starts at a multiple of 64 bytes, then
// the elements in row-major (C) order.

const npyMagic = "\x93NUMPY"

// npyDescr maps the tensor file's type names to numpy's type strings
// ('<' little-endian, '|' byte-sized, where order does not apply).
var npyDescr = map[string]string{
	"float32": "<f4", "float64": "<f8", "float16": "<f2",
	"int8": "|i1", "uint8": "|u1", "int16": "<i2", "uint16": "<u2",
	"int32": "<i4", "uint32": "<u4", "int64": "<i8", "uint64": "<u8",
	"bool": "|b1",
}

// EncodeNPY returns t as the bytes of a .npy file.
func EncodeNPY(t *Tensor) ([]byte, error) {
	if err := t.Validate(); err != nil {
		return nil, err
	}
	descr := npyDescr[t.Type]
	dims := make([]string, len(t.Dims))
	for i, d := range t.Dims {
		dims[i] = strconv.FormatInt(d, 10)
	}
	shape := strings.Join(dims, ", ")
	if len(dims) == 1 {
		shape += "," // a one-element Python tuple
	}
	header := fmt.Sprintf("{'descr': '%s', 'fortran_order': False, 'shape': (%s), }", descr, shape)
	const prefix = len(npyMagic) + 2 + 2
	pad := 64 - (prefix+len(header)+1)%64
	if pad == 64 {
		pad = 0
	}
	header += strings.Repeat(" ", pad) + "\n"
	if len(header) > 0xffff {
		return nil, fmt.Errorf("npy: the header of %s is too long for version 1.0", t)
	}
	var b bytes.Buffer
	b.Grow(prefix + len(header) + len(t.Data))
	b.WriteString(npyMagic)
	b.Write([]byte{1, 0})
	binary.Write(&b, binary.LittleEndian, uint16(len(header)))
	b.WriteString(header)
	b.Write(t.Data)
	return b.Bytes(), nil
}

// DecodeNPY reads the bytes of a .npy file of version 1.0, 2.0 or 3.0
// holding a little-endian, C-ordered array of a type the tensor file
// format has.
func DecodeNPY(b []byte) (*Tensor, error) {
	if len(b) < len(npyMagic)+4 || string(b[:len(npyMagic)]) != npyMagic {
		return nil, fmt.Errorf("npy: not a .npy file (no magic string)")
	}
	major := b[len(npyMagic)]
	rest := b[len(npyMagic)+2:]
	var hlen int
	switch major {
	case 1:
		hlen = int(binary.LittleEndian.Uint16(rest))
		rest = rest[2:]
	case 2, 3:
		if len(rest) < 4 {
			return nil, fmt.Errorf("npy: truncated header length")
		}
		n := binary.LittleEndian.Uint32(rest)
		if int64(n) > int64(len(rest)) {
			return nil, fmt.Errorf("npy: header length %d past the end of the file", n)
		}
		hlen = int(n)
		rest = rest[4:]
	default:
		return nil, fmt.Errorf("npy: unsupported version %d", major)
	}
	if hlen > len(rest) {
		return nil, fmt.Errorf("npy: header length %d past the end of the file", hlen)
	}
	header, data := string(rest[:hlen]), rest[hlen:]
	descr, err := npyField(header, "descr")
	if err != nil {
		return nil, err
	}
	typ := ""
	for name, d := range npyDescr {
		if strings.Trim(descr, "'\"") == d {
			typ = name
		}
	}
	if typ == "" {
		return nil, fmt.Errorf("npy: unsupported element type %s", descr)
	}
	order, err := npyField(header, "fortran_order")
	if err != nil {
		return nil, err
	}
	if order != "False" {
		return nil, fmt.Errorf("npy: Fortran-ordered arrays are not supported")
	}
	shape, err := npyField(header, "shape")
	if err != nil {
		return nil, err
	}
	dims := []int64{}
	for _, s := range strings.Split(strings.Trim(shape, "()"), ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		d, err := strconv.ParseInt(s, 10, 64)
		if err != nil || d < 0 {
			return nil, fmt.Errorf("npy: bad shape %s", shape)
		}
		dims = append(dims, d)
	}
	t := &Tensor{Type: typ, Dims: dims, Data: data}
	if err := t.Validate(); err != nil {
		return nil, fmt.Errorf("npy: %v", err)
	}
	return t, nil
}

// npyField is the text of one key's value in the header dict: a quoted
// string, a word or a parenthesized tuple.
func npyField(header, key string) (string, error) {
	for _, q := range []string{"'", "\""} {
		i := strings.Index(header, q+key+q)
		if i < 0 {
			continue
		}
		v := strings.TrimSpace(header[i+len(key)+2:])
		if !strings.HasPrefix(v, ":") {
			break
		}
		v = strings.TrimSpace(v[1:])
		end := strings.IndexAny(v, ",}")
		if strings.HasPrefix(v, "(") {
			end = strings.Index(v, ")") + 1
		}
		if end <= 0 {
			break
		}
		return strings.TrimSpace(v[:end]), nil
	}
	return "", fmt.Errorf("npy: the header has no %s", key)
}

// ReadNPY reads a .npy file.
func ReadNPY(path string) (*Tensor, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	t, err := DecodeNPY(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}
