#!/usr/bin/env bash
# Installs what building with the `cuda` tag needs, from Debian's
# non-free component (which a stock image does not enable: the script
# adds its own sources file for contrib/non-free and leaves the image's
# sources alone).
#
#   bash scripts/install-cuda.sh         # headers + stub libraries (make cuda-check)
#   bash scripts/install-cuda.sh --nvcc  # apt-get install nvidia-cuda-toolkit (make ptx)
#
# The build needs only cuda.h, cublas_v2.h (and the headers they
# include) and the stub libcuda.so/libcublas.so that let a binary link
# on a machine without a GPU. Installing nvidia-cuda-dev with apt pulls
# 1.6 GB of runtime libraries and takes minutes; instead the default
# mode downloads the nvidia-cuda-dev package alone (774 MB) and unpacks
# just usr/include and the stubs into /usr/local/cuda/{include,lib64},
# where gorgonia.org/cu and package backend/cuda look (16 MB on disk).
# Nothing is done when the headers are already there (either place).
set -euo pipefail

sudo=""
[ "$(id -u)" = 0 ] || sudo="sudo"

enable_nonfree() {
	local src=/etc/apt/sources.list.d/tsplit-nonfree.sources
	if [ ! -e "$src" ]; then
		local codename
		codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-bookworm}")
		$sudo tee "$src" >/dev/null <<SRC
Types: deb
URIs: http://deb.debian.org/debian
Suites: $codename $codename-updates
Components: contrib non-free
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
	fi
	$sudo apt-get update -qq
}

if [ "${1:-}" = "--nvcc" ]; then
	command -v nvcc >/dev/null && exit 0
	enable_nonfree
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y --no-install-recommends nvidia-cuda-toolkit
	exit 0
fi

for inc in /usr/include /usr/local/cuda/include; do
	if [ -e "$inc/cuda.h" ] && [ -e "$inc/cublas_v2.h" ]; then
		exit 0
	fi
done

enable_nonfree
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
chmod 755 "$tmp" # apt downloads as the _apt user when it can
(cd "$tmp" && apt-get download nvidia-cuda-dev >/dev/null)
mkdir -p "$tmp/root"
dpkg-deb --fsys-tarfile "$tmp"/nvidia-cuda-dev_*.deb |
	tar -x -C "$tmp/root" --wildcards './usr/include/*' './usr/lib/x86_64-linux-gnu/stubs/*'
$sudo mkdir -p /usr/local/cuda/include /usr/local/cuda/lib64
$sudo cp -a "$tmp/root/usr/include/." /usr/local/cuda/include/
$sudo cp -a "$tmp/root/usr/lib/x86_64-linux-gnu/stubs/." /usr/local/cuda/lib64/
echo "cuda headers and stub libraries in /usr/local/cuda (from $(ls "$tmp"/nvidia-cuda-dev_*.deb | xargs -n1 basename))"
