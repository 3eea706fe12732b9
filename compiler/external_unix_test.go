//go:build unix

package compiler

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	ot "github.com/tsplit/tsplit/internal/onnxtest"
)

// An external data location naming a FIFO is refused at once; opening
// it blocked the import forever (issue 12, item 10).
func TestExternalDataFIFO(t *testing.T) {
	dir := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(dir, "w.bin"), 0o644); err != nil {
		t.Skip("mkfifo:", err)
	}
	path := ot.Write(t, dir, "m.onnx", externalModel("w.bin"))
	done := make(chan error, 1)
	go func() {
		_, err := Import(path, Options{})
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Fatalf("want a not-a-regular-file error, got %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("import blocked on the FIFO")
	}
}
