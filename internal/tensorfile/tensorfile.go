package tensorfile

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"sort"
)

// Tensor is a dense tensor as stored in the oracles' JSON tensor files.
// Type is the ONNX Runtime JS type name ("float32", "float64", "int64",
// "int32", "bool", ...), Dims the shape, Data the little-endian raw bytes of
// the elements in row-major order.
type Tensor struct {
	Type string
	Dims []int64
	Data []byte
}

// elemSizes maps the supported type names to element sizes in bytes.
var elemSizes = map[string]int{
	"float32": 4, "float64": 8, "float16": 2,
	"int8": 1, "uint8": 1, "int16": 2, "uint16": 2,
	"int32": 4, "uint32": 4, "int64": 8, "uint64": 8,
	"bool": 1,
}

// ElemSize returns the size in bytes of one element of the named type, or 0
// if the type is not supported.
func ElemSize(typ string) int { return elemSizes[typ] }

// NumElements returns the product of the dimensions (1 for a scalar).
func (t *Tensor) NumElements() int64 {
	n := int64(1)
	for _, d := range t.Dims {
		n *= d
	}
	return n
}

// Validate checks that the type is supported, the dims are non-negative and
// Data has exactly the right length.
func (t *Tensor) Validate() error {
	size := ElemSize(t.Type)
	if size == 0 {
		return fmt.Errorf("unsupported tensor type %q", t.Type)
	}
	for _, d := range t.Dims {
		if d < 0 {
			return fmt.Errorf("negative dimension in %v", t.Dims)
		}
	}
	if want := t.NumElements() * int64(size); int64(len(t.Data)) != want {
		return fmt.Errorf("%s%v needs %d bytes of data, has %d", t.Type, t.Dims, want, len(t.Data))
	}
	return nil
}

func (t *Tensor) String() string {
	return fmt.Sprintf("%s%v", t.Type, t.Dims)
}

type wireTensor struct {
	Type    string  `json:"type"`
	Dims    []int64 `json:"dims"`
	DataB64 string  `json:"data_b64"`
}

// MarshalJSON writes the tensor file format's per-tensor object.
func (t *Tensor) MarshalJSON() ([]byte, error) {
	dims := t.Dims
	if dims == nil {
		dims = []int64{}
	}
	return json.Marshal(wireTensor{Type: t.Type, Dims: dims, DataB64: base64.StdEncoding.EncodeToString(t.Data)})
}

// UnmarshalJSON reads the tensor file format's per-tensor object.
func (t *Tensor) UnmarshalJSON(b []byte) error {
	var w wireTensor
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	data, err := base64.StdEncoding.DecodeString(w.DataB64)
	if err != nil {
		return fmt.Errorf("data_b64: %w", err)
	}
	dims := w.Dims
	if dims == nil {
		dims = []int64{}
	}
	*t = Tensor{Type: w.Type, Dims: dims, Data: data}
	return nil
}

// ReadTensors reads a JSON tensor file and validates every tensor in it.
func ReadTensors(path string) (map[string]*Tensor, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var m map[string]*Tensor
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	for _, name := range sortedNames(m) {
		if m[name] == nil {
			return nil, fmt.Errorf("%s: tensor %q is null", path, name)
		}
		if err := m[name].Validate(); err != nil {
			return nil, fmt.Errorf("%s: tensor %q: %w", path, name, err)
		}
	}
	return m, nil
}

// WriteTensors validates the tensors and writes them to a JSON tensor file.
func WriteTensors(path string, m map[string]*Tensor) error {
	for _, name := range sortedNames(m) {
		if m[name] == nil {
			return fmt.Errorf("tensor %q is nil", name)
		}
		if err := m[name].Validate(); err != nil {
			return fmt.Errorf("tensor %q: %w", name, err)
		}
	}
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

func sortedNames(m map[string]*Tensor) []string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func checkElems(dims []int64, n int) {
	want := int64(1)
	for _, d := range dims {
		want *= d
	}
	if want != int64(n) {
		panic(fmt.Sprintf("oracle: dims %v hold %d elements, got %d values", dims, want, n))
	}
}

func (t *Tensor) mustBe(typ string) {
	if t.Type != typ {
		panic(fmt.Sprintf("oracle: tensor is %s, not %s", t, typ))
	}
	if err := t.Validate(); err != nil {
		panic("oracle: " + err.Error())
	}
}

// FromFloat32 builds a float32 tensor; len(vals) must match dims.
func FromFloat32(dims []int64, vals []float32) *Tensor {
	checkElems(dims, len(vals))
	data := make([]byte, 4*len(vals))
	for i, v := range vals {
		binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(v))
	}
	return &Tensor{Type: "float32", Dims: append([]int64{}, dims...), Data: data}
}

// Float32s returns the elements of a float32 tensor; it panics on another type.
func (t *Tensor) Float32s() []float32 {
	t.mustBe("float32")
	out := make([]float32, len(t.Data)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(t.Data[4*i:]))
	}
	return out
}

// FromFloat64 builds a float64 tensor; len(vals) must match dims.
func FromFloat64(dims []int64, vals []float64) *Tensor {
	checkElems(dims, len(vals))
	data := make([]byte, 8*len(vals))
	for i, v := range vals {
		binary.LittleEndian.PutUint64(data[8*i:], math.Float64bits(v))
	}
	return &Tensor{Type: "float64", Dims: append([]int64{}, dims...), Data: data}
}

// Float64s returns the elements of a float64 tensor; it panics on another type.
func (t *Tensor) Float64s() []float64 {
	t.mustBe("float64")
	out := make([]float64, len(t.Data)/8)
	for i := range out {
		out[i] = math.Float64frombits(binary.LittleEndian.Uint64(t.Data[8*i:]))
	}
	return out
}

// FromInt64 builds an int64 tensor; len(vals) must match dims.
func FromInt64(dims []int64, vals []int64) *Tensor {
	checkElems(dims, len(vals))
	data := make([]byte, 8*len(vals))
	for i, v := range vals {
		binary.LittleEndian.PutUint64(data[8*i:], uint64(v))
	}
	return &Tensor{Type: "int64", Dims: append([]int64{}, dims...), Data: data}
}

// Int64s returns the elements of an int64 tensor; it panics on another type.
func (t *Tensor) Int64s() []int64 {
	t.mustBe("int64")
	out := make([]int64, len(t.Data)/8)
	for i := range out {
		out[i] = int64(binary.LittleEndian.Uint64(t.Data[8*i:]))
	}
	return out
}
