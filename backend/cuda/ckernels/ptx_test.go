package ckernels

import (
	"slices"
	"testing"

	"github.com/tsplit/tsplit/backend/cuda/ptx"
)

// TestPTXCurrent: the committed PTX was compiled from these sources (run
// make ptx after changing a .cu file) and defines exactly the kernels
// the host launcher knows.
func TestPTXCurrent(t *testing.T) {
	want, err := SourceHash()
	if err != nil {
		t.Fatal(err)
	}
	if got := ptx.SourceHash(); got != want {
		t.Fatalf("backend/cuda/ptx/kernels.ptx was compiled from sources with hash %q, the sources now hash to %q: run make ptx", got, want)
	}
	got, host := ptx.Kernels(), Kernels()
	slices.Sort(got)
	slices.Sort(host)
	if !slices.Equal(got, host) {
		t.Fatalf("the PTX defines %v, the host launcher (list.h) knows %v", got, host)
	}
}
