package compiler

import (
	"os"
	"path/filepath"
	"testing"

	"google.golang.org/protobuf/proto"

	ot "github.com/tsplit/tsplit/internal/onnxtest"
)

// FuzzDecode feeds arbitrary bytes to the decoder and the whole frontend.
// Any input may be rejected; none may panic or hang. The seed corpus is
// every small model in testdata/onnx plus a hand-built one.
func FuzzDecode(f *testing.F) {
	if b, err := proto.Marshal(ot.ReluChain()); err == nil {
		f.Add(b)
	}
	files, _ := filepath.Glob(filepath.Join("..", "testdata", "onnx", "*.onnx"))
	for _, p := range files {
		if b, err := os.ReadFile(p); err == nil && len(b) < 64<<10 { // big seeds make minimization crawl
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := DecodeModel(data)
		if err != nil {
			return
		}
		if _, err := FromProto(m, "", Options{Batch: 2}); err != nil {
			return
		}
	})
}
