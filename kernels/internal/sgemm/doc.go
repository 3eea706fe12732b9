// Package sgemm is tsplit's own float32 matrix product for processors
// with AVX-512: a packed, cache-blocked GEMM (the layout of GotoBLAS and
// BLIS) around a 12×32 micro-kernel in assembly (sgemm_amd64.s).
//
// It exists because the BLAS libraries at hand leave half of such a
// machine unused: gonum is pure Go, and Debian's OpenBLAS runs its AVX2
// (Haswell) kernels wherever OPENBLAS_CORETYPE says so, as it does on
// this project's machines (older OpenBLAS releases misbehave on some
// newer processors). Package kernels calls Gemm for every float32
// product when Enabled, and its BLAS otherwise; docs/blas.md has the
// measurements. It is a package of its own because Go assembly cannot
// share a package with cgo (the openblas build of package kernels).
//
// Blocking: op(B) is packed KC rows × NC columns at a time into panels
// of 32 columns (k-major), op(A) MC rows × KC at a time into panels of
// 12 rows; the micro-kernel multiplies one A panel by one B panel into a
// 12×32 tile, which is then added into C (scaled by alpha, C by beta on
// the first K block). A B panel (KC·32 floats, 32 KiB) stays in L1 while
// the A panels (MC·KC floats, 240 KiB) stream from L2. Panels past the
// edges of the matrices are padded with zeros, so the micro-kernel has
// one shape. The packing buffers (about 3.3 MiB) come from a sync.Pool,
// like a BLAS library's own: they are not part of any tensor.
//
// Every element of C is summed over K in the same order whatever the
// blocking of M and N (FMA after FMA, one K block at a time), so results
// do not depend on how a caller splits a product into column or row
// blocks. Gemm runs on the calling goroutine.
package sgemm
