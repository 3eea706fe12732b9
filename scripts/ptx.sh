#!/usr/bin/env bash
# make ptx: compiles the CUDA kernels (backend/cuda/ckernels/all.cu) to
# PTX with nvcc and writes backend/cuda/ptx/kernels.ptx, which package
# backend/cuda/ptx embeds, so that no build needs nvcc. PTX for the
# virtual architecture compute_60: the driver compiles it for the GPU at
# hand (Pascal and newer). The header records the sha256 of the sources
# (the scheme of ckernels.SourceHash) so a test can tell a stale PTX
# from a current one; nvcc's output is deterministic, so a rerun on
# unchanged sources rewrites the same bytes.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-cuda.sh --nvcc
src=backend/cuda/ckernels
out=backend/cuda/ptx/kernels.ptx
arch=compute_60
hash=$(cd "$src" && for f in $(ls *.cu *.h | grep -vx emu.h | LC_ALL=C sort); do
	printf '%s %d\n' "$f" "$(stat -c %s "$f")"
	cat "$f"
done | sha256sum | cut -d' ' -f1)
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
nvcc -ptx -arch=$arch -o "$tmp" "$src/all.cu"
{
	echo "// tsplit-sources-sha256: $hash"
	echo "// nvcc -ptx -arch=$arch backend/cuda/ckernels/all.cu ($(nvcc --version | grep -o 'release [0-9.]*'))"
	cat "$tmp"
} > "$out.new"
mv "$out.new" "$out"
echo "wrote $out ($(wc -c < "$out") bytes, sources $hash)"
