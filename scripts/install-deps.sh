#!/usr/bin/env bash
# Installs the outside oracles that tsplit's tests compare against:
#   - Debian packages: protoc, PyTorch + torchvision + python onnx + numpy
#     (used through /usr/bin/python3), OpenBLAS (torch is ~20x slower without),
#     CBC (coinor-cbc: the MILP solver of package bound's exact model);
#   - ONNX Runtime for Node.js (CPU), pinned in scripts/ort/package-lock.json.
# Idempotent and silent when everything is already installed; prints one line
# per thing it installs. Runs as root (CI) or through sudo.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

APT_PACKAGES=(protobuf-compiler python3-torch python3-torchvision python3-onnx python3-numpy libopenblas0 libopenblas-dev chromium coinor-cbc)

SUDO=()
if [[ "$(id -u)" != 0 ]]; then
    if command -v sudo >/dev/null 2>&1; then
        SUDO=(sudo)
    else
        echo "install-deps: not root and no sudo; cannot apt-get install" >&2
        exit 1
    fi
fi

log="$(mktemp -t install-deps.XXXXXX)"
trap 'rm -f "$log"' EXIT

# quiet CMD...: runs CMD with its output in $log, shown only if it fails.
quiet() {
    if ! "$@" >"$log" 2>&1; then
        echo "install-deps: failed: $*" >&2
        cat "$log" >&2
        exit 1
    fi
}

installed() {
    [[ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null || true)" == "install ok installed" ]]
}

apt_updated=false
apt_install() {
    local p
    for p in "$@"; do echo "install-deps: installing $p (apt)"; done
    if ! $apt_updated; then
        quiet "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q
        apt_updated=true
    fi
    quiet "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive \
        apt-get install -y -q --no-install-recommends "$@"
}

missing=()
for p in "${APT_PACKAGES[@]}"; do
    installed "$p" || missing+=("$p")
done
# Node.js and npm run the ONNX Runtime oracle; take Debian's if there is none.
if ! command -v node >/dev/null 2>&1; then missing+=(nodejs); fi
if ! command -v npm >/dev/null 2>&1; then missing+=(npm); fi
if ((${#missing[@]})); then
    apt_install "${missing[@]}"
fi

# onnxruntime-node, at the version package-lock.json pins. Its install script
# downloads GPU binaries (which fails offline); the CPU library ships inside
# the npm package, so skip the script.
ort="$here/ort"
want="$(cd "$ort" && node -p "require('./package-lock.json').packages['node_modules/onnxruntime-node'].version")"
have="$(cd "$ort" && node -p "try { require('./node_modules/onnxruntime-node/package.json').version } catch (e) { '' }")"
if [[ "$have" != "$want" ]]; then
    echo "install-deps: installing onnxruntime-node@$want (npm ci in scripts/ort)"
    (cd "$ort" && quiet env ONNXRUNTIME_NODE_INSTALL=skip \
        npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)
fi
