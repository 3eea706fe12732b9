#!/usr/bin/env bash
# The GPU checks of docs/cuda.md in one run, for a lent GPU machine that
# has the NVIDIA driver and a cuBLAS but no Go (the test binary is built
# here first: make gpu-test-binary). Each check has its own time limit
# and writes its log into OUT as it goes, so a run cut short still
# returns what it did.
#
#   bash scripts/gpu-checks.sh OUT [SECONDS_MATCH] [SECONDS_PREDICT] [PREDICT_LIST]
#
# The binary links against a cuBLAS with the soname it was built for
# (libcublas.so.13 by default); where the machine's cuBLAS has another
# soname, a folder in OUT's parent with a link of that name stands in
# (the four entry points used keep their signatures across versions).
set -uo pipefail
out=${1:?usage: gpu-checks.sh OUT [SECONDS_MATCH] [SECONDS_PREDICT] [PREDICT_LIST]}
tmatch=${2:-240}
tpredict=${3:-180}
predict=${4:-../../testdata/torch/resnet18.onnx:32,../../testdata/onnx/bert-base-small.onnx:32,../../testdata/torch/transformer.onnx:32}
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$root/.gpu/cuda.test
mkdir -p "$out"
out=$(cd "$out" && pwd)
{
	date -u
	nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
	nproc
} >"$out/machine.txt" 2>&1

want=${CUBLAS_SONAME:-libcublas.so.13} # what make gpu-test-binary linked
have=$( (ldconfig -p | awk '/libcublas\.so/ {print $NF}'; ls /usr/local/cuda*/lib64/libcublas.so* /usr/local/cuda*/targets/*/lib/libcublas.so* 2>/dev/null) | grep -v Lt | sort -u)
echo "binary wants $want; found: $have" >>"$out/machine.txt"
libs=$(mktemp -d)
real=$(echo "$have" | grep -F "/$want" | head -1)
[ -n "$real" ] || real=$(echo "$have" | grep -E 'libcublas\.so\.[0-9]+$' | head -1)
if [ -z "$real" ]; then
	echo "no cuBLAS found" >>"$out/machine.txt"
	exit 1
fi
ln -s "$real" "$libs/$want"
export LD_LIBRARY_PATH="$libs:$(dirname "$real")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

cd "$root/backend/cuda" || exit 1
TSPLIT_GPU=1 timeout "$tmatch" "$bin" -test.run 'TestGPUMatchesCPU' -test.v -test.timeout "${tmatch}s" >"$out/matches.log" 2>&1
echo "exit $?" >>"$out/matches.log"
TSPLIT_GPU_PREDICT=$predict timeout "$tpredict" "$bin" -test.run 'TestGPUPredicted' -test.v -test.timeout "${tpredict}s" >"$out/predicted.log" 2>&1
echo "exit $?" >>"$out/predicted.log"
