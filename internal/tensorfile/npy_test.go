package tensorfile

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"
)

// Every type and a scalar, a vector, a matrix and an empty tensor
// survive EncodeNPY and DecodeNPY, with the header numpy writes.
func TestNPYRoundTrip(t *testing.T) {
	for typ, size := range elemSizes {
		for _, dims := range [][]int64{{}, {3}, {2, 3}, {4, 0}} {
			data := make([]byte, prod(dims)*int64(size))
			for i := range data {
				data[i] = byte(i * 7)
			}
			if typ == "bool" {
				for i := range data {
					data[i] &= 1
				}
			}
			in := &Tensor{Type: typ, Dims: dims, Data: data}
			b, err := EncodeNPY(in)
			if err != nil {
				t.Fatalf("%v: %v", in, err)
			}
			hlen := int(binary.LittleEndian.Uint16(b[8:]))
			if string(b[:8]) != "\x93NUMPY\x01\x00" || (10+hlen)%64 != 0 || b[10+hlen-1] != '\n' {
				t.Errorf("%v: header %q is not numpy's version 1.0, aligned to 64 bytes", in, b[:10+hlen])
			}
			out, err := DecodeNPY(b)
			if err != nil {
				t.Fatalf("%v: %v", in, err)
			}
			if out.Type != typ || len(out.Dims) != len(dims) || !bytes.Equal(out.Data, data) {
				t.Errorf("%v came back as %v", in, out)
			}
			for i := range dims {
				if out.Dims[i] != dims[i] {
					t.Errorf("%v came back as %v", in, out)
				}
			}
		}
	}
}

// The header's shape is a Python tuple: () for a scalar, (3,) for a
// vector.
func TestNPYHeaderShapes(t *testing.T) {
	for _, c := range []struct {
		dims []int64
		want string
	}{{nil, "'shape': ()"}, {[]int64{3}, "'shape': (3,)"}, {[]int64{2, 3}, "'shape': (2, 3)"}} {
		b, err := EncodeNPY(FromFloat32(c.dims, make([]float32, prod(c.dims))))
		if err != nil {
			t.Fatal(err)
		}
		if h := string(b[10:]); !strings.Contains(h, "{'descr': '<f4', 'fortran_order': False, "+c.want+", }") {
			t.Errorf("dims %v: header %q, want %s", c.dims, h[:strings.IndexByte(h, '\n')], c.want)
		}
	}
}

func prod(dims []int64) int64 {
	n := int64(1)
	for _, d := range dims {
		n *= d
	}
	return n
}

// Files DecodeNPY cannot read are errors, not panics.
func TestNPYBadFiles(t *testing.T) {
	good, _ := EncodeNPY(FromFloat32([]int64{2}, []float32{1, 2}))
	header := func(h string) []byte {
		b := []byte("\x93NUMPY\x01\x00")
		b = binary.LittleEndian.AppendUint16(b, uint16(len(h)))
		return append(b, h...)
	}
	for name, b := range map[string][]byte{
		"empty":         nil,
		"no magic":      []byte("PK\x03\x04 not numpy at all"),
		"truncated":     good[:len(good)-1],
		"long header":   good[:12],
		"version 9":     append([]byte("\x93NUMPY\x09\x00"), good[8:]...),
		"object dtype":  header("{'descr': '|O', 'fortran_order': False, 'shape': (0,), }\n"),
		"big-endian":    append(header("{'descr': '>f4', 'fortran_order': False, 'shape': (1,), }\n"), 0, 0, 0, 0),
		"fortran order": append(header("{'descr': '<f4', 'fortran_order': True, 'shape': (1,), }\n"), 0, 0, 0, 0),
		"bad shape":     header("{'descr': '<f4', 'fortran_order': False, 'shape': (-1,), }\n"),
		"no shape":      header("{'descr': '<f4', 'fortran_order': False}\n"),
	} {
		if _, err := DecodeNPY(b); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
