package native

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"os"

	"google.golang.org/protobuf/proto"

	"github.com/tsplit/tsplit/backend"
	"github.com/tsplit/tsplit/backend/native/planpb"
)

// Magic starts every .tsplan file: a non-ASCII first byte (a file
// mangled as text is caught) and a newline.
const Magic = "\x89TSPLAN\n"

// Version is the format version this package writes and reads.
const Version = 1

// headerBytes is the magic and the 4-byte version.
const headerBytes = len(Magic) + 4

// IsPlan reports whether data starts like a native plan (of any
// version): how `tsplitc run` tells a plan from an ONNX model.
func IsPlan(data []byte) bool { return bytes.HasPrefix(data, []byte(Magic)) }

// IsPlanFile reports whether the file at path starts like a native
// plan; false when it cannot be read (the reader of models says why).
func IsPlanFile(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	head := make([]byte, len(Magic))
	if _, err := io.ReadFull(f, head); err != nil {
		return false
	}
	return IsPlan(head)
}

// Encode renders a plan as the bytes of a .tsplan file. The encoding is
// deterministic: the same plan always gives the same bytes.
func Encode(p *planpb.Plan) ([]byte, error) {
	body, err := proto.MarshalOptions{Deterministic: true}.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("native: encoding the plan: %v", err)
	}
	out := make([]byte, 0, headerBytes+len(body))
	out = append(out, Magic...)
	out = binary.LittleEndian.AppendUint32(out, Version)
	return append(out, body...), nil
}

// Decode parses the bytes of a .tsplan file (file names it in errors).
// It checks the header and the protobuf encoding only; Load checks the
// plan itself.
func Decode(data []byte, file string) (*planpb.Plan, error) {
	if !IsPlan(data) {
		return nil, &Error{File: file, Reason: "not a native plan (no .tsplan header)"}
	}
	if len(data) < headerBytes {
		return nil, &Error{File: file, Reason: "truncated header"}
	}
	if v := binary.LittleEndian.Uint32(data[len(Magic):]); v != Version {
		return nil, &Error{File: file, Reason: fmt.Sprintf("format version %d; this tsplit reads version %d", v, Version)}
	}
	p := &planpb.Plan{}
	if err := proto.Unmarshal(data[headerBytes:], p); err != nil {
		return nil, &Error{File: file, Reason: fmt.Sprintf("corrupt plan: %v", err)}
	}
	return p, nil
}

// WriteFile writes a plan to path atomically, never replacing a file of
// protect (the model it was lowered from); see backend.CheckOutput for
// the paths it refuses.
func WriteFile(ctx context.Context, p *planpb.Plan, path string, protect ...string) error {
	data, err := Encode(p)
	if err != nil {
		return err
	}
	return backend.WriteBytesContext(ctx, path, data, protect...)
}

// Error is a plan that cannot be read or fails a check.
type Error struct {
	// File is the plan's path ("" for one in memory).
	File string
	// Where names the part at fault: `stream h2d command 17 (wait 4)`,
	// `value "x"`, `op 12 (Conv "conv1")`; "" for the plan as a whole.
	Where  string
	Reason string
}

func (e *Error) Error() string {
	s := "native plan"
	if e.File != "" {
		s += " " + e.File
	}
	if e.Where != "" {
		s += ": " + e.Where
	}
	return s + ": " + e.Reason
}
