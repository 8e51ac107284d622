#!/usr/bin/env bash
# Installs every Debian package Braid needs, skipping what is already present.
# Idempotent: safe to run on every invocation of the README commands and CI.
set -euo pipefail

packages=(
  cmake ninja-build ccache g++
  libmlir-22-dev mlir-22-tools llvm-22-dev llvm-22-tools clang-22 lld
  libclang-rt-22-dev libjansson-dev
  libgtest-dev libgmock-dev
  libopenmpi-dev openmpi-bin libopenblas-dev libdnnl-dev
  python3 python3-numpy python3-pytest python3-torch python3-torchvision
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "setup-deps: installing ${missing[*]}" >&2
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
