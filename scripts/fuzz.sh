#!/usr/bin/env bash
# Fuzzes the runtime's readers of untrusted files with libFuzzer, ASan and
# UBSan: for now the checkpoint header parser (braid_json_parse).
#
#   bash scripts/fuzz.sh [SECONDS]     default 600 per harness
#
# New inputs go to build/fuzz-corpus/<harness>/ (the tree's seeds in
# runtime/src/io/test/fuzz/ are read, never written); a crash leaves its
# input as crash-* in the current directory and exits non-zero.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-600}
[[ $seconds =~ ^[0-9]+$ ]] || { echo "fuzz.sh: SECONDS must be a whole number, got '$seconds'" >&2; exit 2; }
ninja -C build braid-rt-fuzz-json >/dev/null ||
  { echo "fuzz.sh: cannot build braid-rt-fuzz-json (needs Clang's libFuzzer: libclang-rt-22-dev)" >&2; exit 1; }
corpus=build/fuzz-corpus/json
mkdir -p "$corpus"
build/runtime/src/io/test/braid-rt-fuzz-json -max_total_time="$seconds" \
  -max_len=4096 -print_final_stats=1 "$corpus" runtime/src/io/test/fuzz/json
