#!/usr/bin/env bash
# Builds Braid with AddressSanitizer (with LeakSanitizer) and
# UndefinedBehaviorSanitizer into build-asan/ and runs the whole ctest suite
# there, the programs braidc compiles and runs included (they are compiled
# with the same flags and link the instrumented runtime).
#
#   bash scripts/sanitize.sh [ctest arguments, e.g. -R lit]
#
# Instrumented: everything Braid compiles with Clang (tools, libraries, the
# runtime, unit tests, generated programs). Not instrumented: LLVM/MLIR,
# OpenMPI, OpenBLAS and Python as Debian built them, and the CUDA target
# (nvcc does not take these flags; it is off in this build). Any report
# fails the test that triggered it: UBSan does not recover, ASan aborts.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
bash scripts/setup-deps.sh
build=${BRAID_ASAN_BUILD_DIR:-build-asan}
flags="-fsanitize=address,undefined -fno-sanitize=vptr,function"
flags+=" -fno-sanitize-recover=all -fno-omit-frame-pointer -gline-tables-only"
# One shared sanitizer runtime for every instrumented binary and library, so
# that Python (uninstrumented) can load the instrumented kernel library the
# pytest suite calls through ctypes (python/CMakeLists.txt preloads it there).
asanrt=$(clang-22 -print-file-name=libclang_rt.asan-x86_64.so)
[ -f "$asanrt" ] || { echo "sanitize.sh: no $asanrt (libclang-rt-22-dev)" >&2; exit 1; }
flags+=" -shared-libsan"
# The shared runtime leaves -lm to the program (libFuzzer needs it).
linkflags="-Wl,-rpath,$(dirname "$asanrt") -lm"
# The configuration is build.sh's plus these settings.
mkdir -p "$build"
cat > "$build/sanitize.cmake" <<CACHE
set(BRAID_ENABLE_CUDA OFF CACHE BOOL "")
set(BRAID_SANITIZER_FLAGS "$flags" CACHE STRING "")
set(BRAID_SANITIZER_LINK_FLAGS "$linkflags" CACHE STRING "")
set(BRAID_SANITIZER_PRELOAD "$asanrt" CACHE FILEPATH "")
CACHE
start=$SECONDS
BRAID_BUILD_DIR=$build BRAID_CMAKE_CACHE=$build/sanitize.cmake bash scripts/build.sh
echo "sanitize.sh: build took $((SECONDS - start)) s"

# fast_unwind_on_malloc=0: OpenMPI and Python have no frame pointers, and a
# leak's stack must reach their frames to match a suppression.
# verify_asan_link_order=0: libFuzzer's harnesses link the runtime after
# their own libraries. allow_user_poisoning=0: LLVM's BumpPtrAllocator
# poisons its slabs only where it is compiled instrumented (our code), and
# MLIR's uninstrumented copy then hands out poisoned memory (docs/fuzzing.md).
export ASAN_OPTIONS=verify_asan_link_order=0:allow_user_poisoning=0:detect_leaks=1:abort_on_error=1:fast_unwind_on_malloc=0:strict_string_checks=1:detect_stack_use_after_return=1:check_initialization_order=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# Leaks in what is not Braid's (see the file) are not reported; OpenMPI keeps
# its plugins loaded so that their frames have names.
export LSAN_OPTIONS=suppressions=$root/scripts/lsan.supp:print_suppressions=0
export OMPI_MCA_mca_base_component_disable_dlclose=1
start=$SECONDS
status=0
ctest --test-dir "$build" -j2 --output-on-failure "$@" || status=$?
echo "sanitize.sh: ctest took $((SECONDS - start)) s, status $status"
exit $status
