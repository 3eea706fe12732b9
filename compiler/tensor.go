package compiler

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/tsplit/tsplit/ir"
	"github.com/tsplit/tsplit/onnxpb"
)

// dataSource reads external tensor data; nil when the model has no
// folder to read from.
type dataSource interface {
	read(location string, offset, length int64) ([]byte, error)
}

// TensorFromProto decodes a TensorProto into an ir.Tensor, from raw_data,
// the typed data fields, or external data through src.
func tensorFromProto(tp *onnxpb.TensorProto, src dataSource) (*ir.Tensor, error) {
	dt := ir.DType(tp.GetDataType())
	if !dt.Valid() {
		return nil, fmt.Errorf("tensor %q has unknown data type %d", tp.GetName(), tp.GetDataType())
	}
	shape := ir.Shape(append([]int64(nil), tp.GetDims()...))
	want, err := shape.Bytes(dt)
	if err != nil {
		return nil, fmt.Errorf("tensor %q: %v", tp.GetName(), err)
	}
	if tp.Segment != nil {
		return nil, fmt.Errorf("tensor %q is segmented, which tsplit does not read", tp.GetName())
	}
	if dt == ir.String {
		return nil, fmt.Errorf("tensor %q holds strings, which tsplit does not compute with", tp.GetName())
	}
	n, _ := shape.NumElements()
	var raw []byte
	switch {
	case tp.GetDataLocation() == onnxpb.TensorProto_EXTERNAL:
		raw, err = readExternal(tp, src, want)
		if err != nil {
			return nil, err
		}
	case tp.RawData != nil:
		raw = tp.RawData
	default:
		raw, err = typedData(tp, dt, n, want)
		if err != nil {
			return nil, err
		}
	}
	if int64(len(raw)) != want {
		return nil, fmt.Errorf("tensor %q of %v%v needs %d bytes of data, has %d", tp.GetName(), dt, shape, want, len(raw))
	}
	return &ir.Tensor{DType: dt, Shape: shape, Raw: raw}, nil
}

// typedData converts the typed repeated fields into raw little-endian
// bytes.
func typedData(tp *onnxpb.TensorProto, dt ir.DType, n, want int64) ([]byte, error) {
	count := func(have int, per int64) error {
		if int64(have) != n*per {
			return fmt.Errorf("tensor %q has %d data elements, its shape needs %d", tp.GetName(), have, n*per)
		}
		return nil
	}
	raw := make([]byte, want)
	switch dt {
	case ir.Float, ir.Complex64:
		per := int64(1)
		if dt == ir.Complex64 {
			per = 2
		}
		if err := count(len(tp.FloatData), per); err != nil {
			return nil, err
		}
		for i, f := range tp.FloatData {
			binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(f))
		}
	case ir.Double, ir.Complex128:
		per := int64(1)
		if dt == ir.Complex128 {
			per = 2
		}
		if err := count(len(tp.DoubleData), per); err != nil {
			return nil, err
		}
		for i, f := range tp.DoubleData {
			binary.LittleEndian.PutUint64(raw[8*i:], math.Float64bits(f))
		}
	case ir.Int64:
		if err := count(len(tp.Int64Data), 1); err != nil {
			return nil, err
		}
		for i, v := range tp.Int64Data {
			binary.LittleEndian.PutUint64(raw[8*i:], uint64(v))
		}
	case ir.Uint32, ir.Uint64:
		if err := count(len(tp.Uint64Data), 1); err != nil {
			return nil, err
		}
		for i, v := range tp.Uint64Data {
			if dt == ir.Uint32 {
				binary.LittleEndian.PutUint32(raw[4*i:], uint32(v))
			} else {
				binary.LittleEndian.PutUint64(raw[8*i:], v)
			}
		}
	case ir.Uint4, ir.Int4:
		// Two 4-bit elements per int32 entry's low byte, as the spec packs them.
		if int64(len(tp.Int32Data)) != want {
			return nil, fmt.Errorf("tensor %q has %d packed int4 entries, needs %d", tp.GetName(), len(tp.Int32Data), want)
		}
		for i, v := range tp.Int32Data {
			raw[i] = byte(v)
		}
	default:
		// int32_data holds INT32, INT16, INT8, UINT16, UINT8, BOOL and the
		// 16- and 8-bit float types (as their bit patterns).
		if err := count(len(tp.Int32Data), 1); err != nil {
			return nil, err
		}
		size := dt.Bits() / 8
		for i, v := range tp.Int32Data {
			switch size {
			case 4:
				binary.LittleEndian.PutUint32(raw[4*i:], uint32(v))
			case 2:
				binary.LittleEndian.PutUint16(raw[2*i:], uint16(v))
			case 1:
				raw[i] = byte(v)
			}
		}
	}
	return raw, nil
}

func readExternal(tp *onnxpb.TensorProto, src dataSource, want int64) ([]byte, error) {
	location, offset, err := externalRef(tp, want)
	if err != nil {
		return nil, err
	}
	if src == nil {
		return nil, fmt.Errorf("tensor %q: external data %q but the model was not read from a file", tp.GetName(), location)
	}
	return src.read(location, offset, want)
}

// externalRef reads an external tensor's location and offset, checking
// that a declared length is the want bytes its type and shape need.
func externalRef(tp *onnxpb.TensorProto, want int64) (string, int64, error) {
	var location string
	offset, length := int64(0), int64(-1)
	for _, kv := range tp.ExternalData {
		var err error
		switch kv.GetKey() {
		case "location":
			location = kv.GetValue()
		case "offset":
			_, err = fmt.Sscan(kv.GetValue(), &offset)
		case "length":
			_, err = fmt.Sscan(kv.GetValue(), &length)
		}
		if err != nil {
			return "", 0, fmt.Errorf("tensor %q: external data %s %q is not a number", tp.GetName(), kv.GetKey(), kv.GetValue())
		}
	}
	if location == "" {
		return "", 0, fmt.Errorf("tensor %q: external data has no location", tp.GetName())
	}
	if offset < 0 || (length >= 0 && length != want) {
		return "", 0, fmt.Errorf("tensor %q: external data offset %d length %d does not fit its %d bytes", tp.GetName(), offset, length, want)
	}
	return location, offset, nil
}
