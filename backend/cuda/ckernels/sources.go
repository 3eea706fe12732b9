package ckernels

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"sort"
)

// Sources are the kernel sources nvcc compiles (make ptx).
//
//go:embed *.cu *.h
var Sources embed.FS

// SourceHash is the sha256 of the kernel sources: for each file but
// emu.h, in name order, a line "name size" and its bytes (what
// scripts/ptx.sh hashes with printf, cat and sha256sum). make ptx writes
// it into the PTX's header, and a test compares the two.
func SourceHash() (string, error) {
	names, err := fs.Glob(Sources, "*")
	if err != nil {
		return "", err
	}
	sort.Strings(names)
	h := sha256.New()
	for _, n := range names {
		if n == "emu.h" {
			continue // the host launcher's header, not a kernel source
		}
		b, err := Sources.ReadFile(n)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s %d\n", n, len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
