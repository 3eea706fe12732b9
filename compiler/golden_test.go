package compiler

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tsplit/tsplit/ir"
)

var update = flag.Bool("update", false, "rewrite golden files")

// TestGoldenDump imports every model in testdata/onnx at batch 2,
// verifies it, and compares its IR dump (ir.DumpModel, which ir.Parse
// reads back) with NAME.ir beside it.
// Regenerate with `go test ./compiler -update`.
func TestGoldenDump(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "testdata", "onnx", "*.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no models in testdata/onnx (make models)")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			m, err := Import(f, Options{Batch: 2})
			if err != nil {
				t.Fatal(err)
			}
			if err := ir.Verify(m); err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			if err := ir.DumpModel(&buf, m); err != nil {
				t.Fatal(err)
			}
			golden := strings.TrimSuffix(f, ".onnx") + ".ir"
			if *update {
				if err := os.WriteFile(golden, buf.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test ./compiler -update)", err)
			}
			if !bytes.Equal(buf.Bytes(), want) {
				t.Errorf("IR dump of %s differs from %s (run go test ./compiler -update and review the diff)", f, golden)
			}
		})
	}
}
