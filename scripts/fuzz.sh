#!/usr/bin/env bash
# Fuzzes Braid's readers of untrusted input with libFuzzer, ASan and UBSan,
# one harness after the other, SECONDS each (default 600):
#
#   bash scripts/fuzz.sh [SECONDS] [HARNESS...]
#
# HARNESS: json (the checkpoint header parser), json_differential (the
# same against jansson, built where jansson is), checkpoint (the runtime's
# checkpoint reader), safetensors (the compiler's SafeTensors reader), opt
# (braid-opt's parse, verify and pass pipelines); default all that are
# built.
# BRAID_FUZZ_BUILD names the build directory (default build). For opt,
# coverage inside the Braid libraries needs a build of its own configured
# with -DBRAID_FUZZ_INSTRUMENT=ON (see docs/fuzzing.md); in another build
# only the harness itself is instrumented.
#
# New inputs go to $BUILD/fuzz-corpus/<harness>/ (the tree's seeds are
# read, never written); a finding leaves its input as crash-*, timeout-*
# or leak-* in the current directory and exits non-zero. One process (no
# -jobs, -workers): the machine is shared.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
seconds=${1:-600}
[[ $seconds =~ ^[0-9]+$ ]] || { echo "fuzz.sh: SECONDS must be a whole number, got '$seconds'" >&2; exit 2; }
shift || true
harnesses=("$@")
build=${BRAID_FUZZ_BUILD:-build}
[[ $build = /* ]] || build=$root/$build
if [[ ${#harnesses[@]} -eq 0 ]]; then
  harnesses=(json checkpoint safetensors opt)
  ninja -C "$build" -t query braid-rt-fuzz-json_differential >/dev/null 2>&1 &&
    harnesses=(json json_differential checkpoint safetensors opt)
fi

# Sets target, bin, seeds, max_len and dict for harness $1.
configure() {
  dict=
  case $1 in
    json|json_differential)
      target=braid-rt-fuzz-$1; bin=$build/runtime/src/io/test/$target
      seeds=$root/runtime/src/io/test/fuzz/json; max_len=4096 ;;
    checkpoint)
      target=braid-rt-fuzz-$1; bin=$build/runtime/src/io/test/$target
      seeds=$root/runtime/src/io/test/fuzz/$1; max_len=4096
      dict=$root/runtime/src/io/test/fuzz/checkpoint.dict ;;
    safetensors)
      target=braid-fuzz-safetensors; bin=$build/unittests/Fuzz/$target
      seeds=$root/unittests/Fuzz/corpus/safetensors; max_len=4096
      dict=$root/runtime/src/io/test/fuzz/checkpoint.dict ;;
    opt)
      target=braid-fuzz-opt; bin=$build/unittests/Fuzz/$target
      seeds=$root/unittests/Fuzz/corpus/opt; max_len=8192
      dict=$root/unittests/Fuzz/braid-opt.dict ;;
    *) echo "fuzz.sh: unknown harness '$1' (json, json_differential, checkpoint, safetensors, opt)" >&2; exit 2 ;;
  esac
}
for h in "${harnesses[@]}"; do configure "$h"; done

for h in "${harnesses[@]}"; do
  configure "$h"
  flock /tmp/braid-build.lock ninja -C "$build" "$target" >/dev/null ||
    { echo "fuzz.sh: cannot build $target (needs Clang's libFuzzer: libclang-rt-22-dev)" >&2; exit 1; }
  corpus=$build/fuzz-corpus/$h
  mkdir -p "$corpus"
  echo "fuzz.sh: $h for $seconds s ($bin)"
  "$bin" -max_total_time="$seconds" -max_len="$max_len" -timeout=10 \
    -rss_limit_mb=4096 -print_final_stats=1 \
    ${dict:+-dict="$dict"} "$corpus" "$seeds"
done
