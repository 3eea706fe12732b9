package ckernels

import (
	"testing"

	"github.com/tsplit/tsplit/backend/cuda/ptx"
)

// TestPTXCurrent: the committed PTX was compiled from these sources (run
// make ptx after changing a .cu file) and defines exactly the kernels
// the host launcher knows (TestPTXKernels, which needs cgo).
func TestPTXCurrent(t *testing.T) {
	want, err := SourceHash()
	if err != nil {
		t.Fatal(err)
	}
	if got := ptx.SourceHash(); got != want {
		t.Fatalf("backend/cuda/ptx/kernels.ptx was compiled from sources with hash %q, the sources now hash to %q: run make ptx", got, want)
	}
}
