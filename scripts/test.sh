#!/usr/bin/env bash
# Sets up everything on a fresh Debian 12 machine, builds Braid and runs
# every test (lit, GoogleTest and pytest) through one ctest.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
bash scripts/build.sh
build=${BRAID_BUILD_DIR:-build}
ctest --test-dir "$build" --output-on-failure -j "$(nproc)"
