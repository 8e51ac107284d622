#!/usr/bin/env bash
# Installs what is missing, configures (once) and builds Braid into build/.
# Usage: scripts/build.sh [extra ninja targets]
# BRAID_BUILD_DIR names the build directory (default build); BRAID_CMAKE_CACHE
# a CMake initial-cache file (cmake -C) for its first configuration, as
# scripts/sanitize.sh uses.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

bash scripts/setup-deps.sh

# ccache hits across clones only when paths are relative to the checkout.
export CCACHE_BASEDIR="$root"
build=${BRAID_BUILD_DIR:-build}
if [ ! -f "$build/build.ninja" ]; then
  cmake -G Ninja -S . -B "$build" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_C_COMPILER=clang-22 -DCMAKE_CXX_COMPILER=clang++-22 \
    -DLLVM_USE_LINKER=lld \
    -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir -DMLIR_LINK_MLIR_DYLIB=ON \
    -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-22/bin/lit \
    -DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache \
    ${BRAID_CMAKE_CACHE:+-C "$BRAID_CMAKE_CACHE"}
fi
ninja -C "$build" "$@"
