// Package ptx embeds the CUDA kernels compiled to PTX (kernels.ptx,
// written by make ptx from backend/cuda/ckernels), so that building the
// CUDA device needs no nvcc. It is plain Go and builds by default; only
// package backend/cuda (build tag cuda) loads the module on a GPU.
package ptx

import (
	_ "embed"
	"regexp"
	"strings"
)

// Module is the PTX text of all.cu.
//
//go:embed kernels.ptx
var Module string

const hashPrefix = "// tsplit-sources-sha256: "

// SourceHash is the sha256 of the kernel sources the PTX was compiled
// from, as make ptx recorded it ("" when the header is missing).
func SourceHash() string {
	line, _, _ := strings.Cut(Module, "\n")
	h, ok := strings.CutPrefix(line, hashPrefix)
	if !ok {
		return ""
	}
	return strings.TrimSpace(h)
}

var entry = regexp.MustCompile(`(?m)^\.visible \.entry ([A-Za-z0-9_]+)\(`)

// Kernels lists the module's kernel entry points, in file order.
func Kernels() []string {
	var names []string
	for _, m := range entry.FindAllStringSubmatch(Module, -1) {
		names = append(names, m[1])
	}
	return names
}
