package compiler

import (
	"errors"
	"fmt"
	"os"

	"google.golang.org/protobuf/proto"

	"github.com/tsplit/tsplit/onnxpb"
)

// MaxModelBytes bounds the protobuf file tsplit reads (protobuf itself
// cannot exceed 2 GiB; bigger models keep weights as external data).
const MaxModelBytes = 2<<30 - 1

// ReadModelProto reads and decodes an ONNX file.
func ReadModelProto(path string) (*onnxpb.ModelProto, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, &Error{File: path, Err: err}
	}
	if st.IsDir() {
		return nil, &Error{File: path, Err: errors.New("is a directory, not an ONNX file")}
	}
	if st.Size() > MaxModelBytes {
		return nil, &Error{File: path, Err: fmt.Errorf("file is %d bytes, over the 2 GiB protobuf limit (keep weights as external data)", st.Size())}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, &Error{File: path, Err: err}
	}
	m, err := DecodeModel(data)
	if err != nil {
		return nil, &Error{File: path, Err: err}
	}
	return m, nil
}

// DecodeModel decodes ONNX bytes and checks that they are a model at all.
func DecodeModel(data []byte) (*onnxpb.ModelProto, error) {
	if len(data) == 0 {
		return nil, errors.New("file is empty, not an ONNX model")
	}
	m := &onnxpb.ModelProto{}
	if err := proto.Unmarshal(data, m); err != nil {
		return nil, fmt.Errorf("not a valid ONNX protobuf (truncated or corrupt): %v", err)
	}
	if m.Graph == nil {
		return nil, errors.New("not an ONNX model: it has no graph (truncated, or not an ONNX file)")
	}
	if m.GetIrVersion() <= 0 {
		return nil, errors.New("not an ONNX model: ir_version is missing")
	}
	return m, nil
}

// EncodeModel encodes a model deterministically: the same model always
// gives the same bytes.
func EncodeModel(m *onnxpb.ModelProto) ([]byte, error) {
	return proto.MarshalOptions{Deterministic: true}.Marshal(m)
}
