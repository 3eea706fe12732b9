#!/usr/bin/env bash
# Builds backend/cuda's test binary here, for a GPU machine that has the
# NVIDIA driver and a cuBLAS but no Go toolchain (how make test-gpu was
# run on an H100 on 2026-11-25: docs/cuda.md).
#
#   bash scripts/gpu-test-binary.sh [SONAME] [OUT]
#
# SONAME is the file name of the GPU machine's cuBLAS (default
# libcublas.so.13, CUDA 13). The headers here may be another CUDA's
# (Debian's 11.8): the entry points the device uses (cublasCreate_v2,
# cublasDestroy_v2, cublasSetStream_v2, cublasSgemmStridedBatched) keep
# their signatures across versions, but Debian's library tags its
# symbols with its own version, which another cuBLAS does not define.
# So the binary links against a small stand-in with the target's
# soname and untagged symbols; on the GPU machine the loader binds them
# to the real library (put its folder on LD_LIBRARY_PATH). Run there:
#
#   cd backend/cuda && TSPLIT_GPU=1 ../../$OUT -test.run TestGPUMatchesCPU -test.v
set -euo pipefail
soname=${1:-libcublas.so.13}
out=${2:-.gpu/cuda.test}
go=${GO:-go}
bash "$(dirname "$0")/install-cuda.sh"
stub=$(mktemp -d)
trap 'rm -rf "$stub"' EXIT
cat >"$stub/cublas.c" <<'C'
/* link-time stand-in: the entry points backend/cuda calls, untagged */
int cublasCreate_v2(void) { return 1; }
int cublasDestroy_v2(void) { return 1; }
int cublasSetStream_v2(void) { return 1; }
int cublasSgemmStridedBatched(void) { return 1; }
C
gcc -shared -fPIC -Wl,-soname,"$soname" -o "$stub/libcublas.so" "$stub/cublas.c"
mkdir -p "$(dirname "$out")"
# no openblas tag: the GPU machine may lack OpenBLAS; the CPU side of
# the comparison then uses gonum's BLAS
CGO_LDFLAGS="-L$stub" "$go" test -c -tags cuda -ldflags='-s -w' -o "$out" ./backend/cuda
echo "wrote $out (needs libcuda.so.1 and $soname on the GPU machine)"
