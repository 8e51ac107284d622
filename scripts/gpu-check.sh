#!/usr/bin/env bash
# Checks Braid's CUDA target on a GPU: the CUDA kernels against the CPU
# kernels, the NCCL communication layer (its compressed sums too: the
# 16-bit ring bit for bit against the CPU target's, PowerSGD on the device
# within 1e-4), the main job's GPT trained 20
# AdamW steps on one GPU against the CPU executable's losses, and
# checkpoints between the targets (the same state saved into the same
# bytes; a CPU checkpoint resumed on the GPU and, where the CPU executable
# can start there, the reverse), and issue 15's GPU benchmark: GPT-2 small
# (bf16-mixed, batch 8) trained on one GPU, tokens/s and MFU against
# PyTorch eager and torch.compile (bench/gpt2_gpu.py). Never run on a GPU yet.
#
# The GPU machine has the CUDA 13 runtime, cuBLAS and NCCL (the toolkit or
# the nvidia-nccl Python wheel) but no MLIR and possibly no MPI, so the
# work is split in two:
#
#   bash scripts/gpu-check.sh prepare [DIR]     on the machine that built Braid
#                                               (with CUDA): compiles everything
#                                               into DIR (default build-gpu/),
#                                               CPU reference losses included
#   bash scripts/gpu-check.sh run [DIR] OUT     on the GPU machine: runs what DIR
#                                               holds, writes OUT/report.md and
#                                               OUT/report.json; exit 0 iff all
#                                               checks pass
#   bash scripts/gpu-check.sh all OUT           both, on a machine that has both
#
# DIR needs no MPI on the GPU machine: the GPT is linked for one process
# (braidc --target cuda --single-process); the 2-rank NCCL test runs only
# where mpirun and two GPUs exist (the report says which it did); the
# PyTorch runs only where a python3 there imports torch with CUDA (else
# reported as skipped). The benchmark comes last and takes only what is
# left of GPU_CHECK_BUDGET_S seconds (480) since `run` began (skipped under
# 60 s); GPU_CHECK_ONLY=gpt2 runs it alone (a rerun). Record what `run`
# printed, with the date, in docs/benchmarks.md.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

die() { echo "gpu-check: $*" >&2; exit 2; }

# The main job's GPT (scripts/main-job.sh) with a global batch of 16.
MODEL=(--layers 4 --hidden 128 --heads 4 --seq 64 --vocab 256 --batch 16)
STEPS=20
LR=1e-3
RTOL=1e-4

# Issue 15's GPU benchmark: GPT-2 small. Batch 8 (8,192 tokens a step):
# braidc's memory plan (ref/gpt2-memory.txt: about 7.2 GiB) is far below the
# H200's 141 GB (PyTorch's peak is reported beside it), the [B, S, V]
# logits (412M elements) stay below 2^31 elements and bytes, and a few steps of
# both sides and torch.compile's compilation fit the run's budget; the
# GEMMs have 8,192 rows, enough to fill the GPU. WARMUP steps are left
# out of every side's mean (with them torch.compile's compilation).
GPT2=(--layers 12 --hidden 768 --heads 12 --seq 1024 --vocab 50304 --batch 8)
GPT2_WARMUP=2
GPT2_STEPS=8
BUDGET_S=${GPU_CHECK_BUDGET_S:-480}

prepare() {
  local dir=$1 build=$root/build
  [[ -x $build/bin/braidc ]] || die "no build/bin/braidc: run scripts/build.sh first"
  grep -q '^BRAID_ENABLE_CUDA:BOOL=ON' "$build/CMakeCache.txt" ||
    die "build/ was configured without CUDA (BRAID_ENABLE_CUDA is not ON); see cmake's output"
  # Everything this script carries must be built.
  ninja -C "$build" braidc braid-rt-cuda-kernels-device-test \
    braid-rt-cuda-comm_test_single braid-rt-cuda-comm_test \
    braid_rt_kernels_shared braid-rt-checkpoint-targets \
    braid-rt-checkpoint-targets_cuda >/dev/null
  rm -rf "$dir"
  mkdir -p "$dir/bin" "$dir/lib" "$dir/ref"
  PYTHONPATH=$root/python /usr/bin/python3 -m braid.models gpt "${MODEL[@]}" \
    -o "$dir/ref/gpt.mlir"
  # The CPU executable's losses: the reference. It is carried too, for the
  # checkpoint round trip, where the GPU machine can start it (libmpi).
  "$build/bin/braidc" "$dir/ref/gpt.mlir" --lr $LR -o "$dir/bin/gpt-cpu"
  "$dir/bin/gpt-cpu" --steps $STEPS --seed 1 > "$dir/ref/cpu.out"
  # Checkpoints between the targets: the CPU target's state after half the
  # steps, which the CUDA executable resumes; and the table of
  # runtime/test/checkpoint_targets_test.c saved by the CPU target (and
  # resumed by it), which the CUDA target must save into the same bytes
  # and resume.
  "$dir/bin/gpt-cpu" --steps $((STEPS / 2)) --seed 1 \
    --save "$dir/ref/ckpt-gpt-cpu" > "$dir/ref/cpu-first-half.out"
  "$build/runtime/test/braid-rt-checkpoint-targets" save \
    "$dir/ref/ckpt-table-cpu" >/dev/null
  "$build/runtime/test/braid-rt-checkpoint-targets" resume \
    "$dir/ref/ckpt-table-cpu" >/dev/null
  # The same program for one GPU, without MPI.
  "$build/bin/braidc" "$dir/ref/gpt.mlir" --lr $LR --target cuda \
    --single-process -o "$dir/bin/gpt-cuda"
  # Issue 15's benchmark: GPT-2 small for one GPU, bf16-mixed, and
  # braidc's memory plan for it.
  PYTHONPATH=$root/python /usr/bin/python3 -m braid.models gpt "${GPT2[@]}" \
    -o "$dir/ref/gpt2.mlir"
  "$build/bin/braidc" "$dir/ref/gpt2.mlir" --target cuda --single-process \
    --precision bf16-mixed --memory-report -o "$dir/bin/gpt2-cuda" \
    > "$dir/ref/gpt2-memory.txt"
  cp "$build/runtime/test/braid-rt-cuda-kernels-device-test" \
    "$build/runtime/src/cuda/comm/test/braid-rt-cuda-comm_test_single" \
    "$build/runtime/src/cuda/comm/test/braid-rt-cuda-comm_test" \
    "$build/runtime/src/cuda/comm/test/braid-rt-checkpoint-targets_cuda" \
    "$dir/bin/"
  # The CPU kernels the kernel test compares with, and what they load that a
  # GPU machine may lack (OpenBLAS, libgfortran, libomp); CUDA's own
  # libraries are the GPU machine's.
  cp "$build/lib/libbraid_rt_kernels_shared.so" "$dir/lib/"
  ldd "$build/lib/libbraid_rt_kernels_shared.so" |
    awk '$3 ~ /^\// {print $1, $3}' |
    while read -r name path; do
      case $name in
        libc.so*|libm.so*|libgcc_s.so*|libstdc++.so*|libpthread.so*|libdl.so*|librt.so*) ;;
        *) cp -L "$path" "$dir/lib/$name" ;;
      esac
    done
  {
    echo "prepared: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
    echo "model: gpt ${MODEL[*]}; $STEPS AdamW steps, lr $LR, seed 1; rtol $RTOL"
    echo "benchmark: gpt ${GPT2[*]}, bf16-mixed; $GPT2_WARMUP warm-up + $GPT2_STEPS timed steps; braidc's memory plan $(awk '$1 == "all" {print $NF " MiB"}' "$dir/ref/gpt2-memory.txt")"
    echo "nvcc: $(grep '^CMAKE_CUDA_COMPILER:' "$build/CMakeCache.txt" | cut -d= -f2)"
  } > "$dir/manifest.txt"
  du -sh "$dir" | awk '{print "gpu-check: prepared " $2 " (" $1 ")"}'
}

# Checkpoints between the CPU and CUDA targets (never run on a GPU yet).
# Uses run()'s record and check.
checkpoints() {
  local dir=$1 out=$2 half=$((STEPS / 2))
  # The same state saved by both targets is the same file: the CUDA target
  # saves the table the CPU target saved in `prepare` (whose file the CPU
  # target resumed there), and resumes the CPU's, bit for bit.
  local table=$dir/ref/ckpt-table-cpu/checkpoint.safetensors
  check ckpt-table-save 60 "$dir/bin/braid-rt-checkpoint-targets_cuda" save \
    "$out/ckpt-table-cuda"
  if cmp "$table" "$out/ckpt-table-cuda/checkpoint.safetensors" \
      > "$out/ckpt-table-cmp.log" 2>&1; then
    record ckpt-table-same pass "the CUDA target's checkpoint of the table is the CPU target's, byte for byte"
  else
    record ckpt-table-same FAIL "$(tail -1 "$out/ckpt-table-cmp.log")"
  fi
  check ckpt-table-resume 60 "$dir/bin/braid-rt-checkpoint-targets_cuda" \
    resume "$dir/ref/ckpt-table-cpu"
  # CPU -> CUDA: the GPT resumed on the GPU from the CPU's state after
  # `half` steps trains the rest as the uninterrupted CPU run did.
  check ckpt-cpu-to-cuda 300 "$dir/bin/gpt-cuda" --resume \
    "$dir/ref/ckpt-gpt-cpu" --steps $half --seed 1
  check ckpt-cpu-to-cuda-losses 60 python3 \
    "$root/test/Integration/Inputs/compare-results.py" \
    "$out/ckpt-cpu-to-cuda.log" "$dir/ref/cpu.out" --rtol $RTOL \
    --steps $half:$STEPS
  # CUDA -> CPU: the GPU's state after `half` steps resumed by the CPU
  # executable, where this machine can start it (it needs libmpi).
  check ckpt-cuda-save 300 "$dir/bin/gpt-cuda" --steps $half --seed 1 \
    --save "$out/ckpt-gpt-cuda"
  if ldd "$dir/bin/gpt-cpu" 2>&1 | grep -q 'not found'; then
    record ckpt-cuda-to-cpu skip "the CPU executable cannot start here: $(ldd "$dir/bin/gpt-cpu" 2>&1 | grep -m1 'not found' | xargs)"
  else
    check ckpt-cuda-to-cpu 300 "$dir/bin/gpt-cpu" --resume \
      "$out/ckpt-gpt-cuda" --steps $half --seed 1
    check ckpt-cuda-to-cpu-losses 60 python3 \
      "$root/test/Integration/Inputs/compare-results.py" \
      "$out/ckpt-cuda-to-cpu.log" "$dir/ref/cpu.out" --rtol $RTOL \
      --steps $half:$STEPS
  fi
}

# Issue 15's GPU benchmark (never run on a GPU yet): GPT-2 small trained
# WARMUP + STEPS steps by the Braid program, then bench/gpt2_gpu.py reads
# its per-step times and runs the same model in PyTorch, eager and
# torch.compile, each timed alike; tokens/s, MFU and the ratios go into
# OUT/gpt2.md and gpt2.json. Within what is left of BUDGET_S. Uses run()'s
# record and check.
gpt2() {
  local dir=$1 out=$2 left py=python3 p
  left=$((BUDGET_S - SECONDS))
  if ((left < 60)); then
    record gpt2-braid skip "${left} s of the run's budget (${BUDGET_S} s) left"
    return
  fi
  check gpt2-braid $((left < 150 ? left : 150)) "$dir/bin/gpt2-cuda" \
    --steps $((GPT2_WARMUP + GPT2_STEPS)) --seed 1
  # The PyTorch reference needs a python3 with torch; without one it
  # reports its runs as skipped.
  for p in python3 /usr/bin/python3; do
    if "$p" -c 'import torch' >/dev/null 2>&1; then py=$p; break; fi
  done
  left=$((BUDGET_S - SECONDS - 10))
  if ! timeout $((left > 30 ? left : 30)) "$py" "$root/bench/gpt2_gpu.py" \
      "${GPT2[@]}" --warmup $GPT2_WARMUP --steps $GPT2_STEPS \
      --braid-log "$out/gpt2-braid.log" --braid-mlir "$dir/ref/gpt2.mlir" \
      --time-left $((left > 30 ? left - 20 : 10)) --json "$out/gpt2.json" \
      --markdown "$out/gpt2.md" --checks "$out/gpt2-checks.txt" \
      > "$out/gpt2-bench.log" 2>&1; then
    record gpt2-bench FAIL "bench/gpt2_gpu.py ($py): $(tail -1 "$out/gpt2-bench.log")"
    return
  fi
  local n s d
  while IFS='|' read -r n s d; do record "$n" "$s" "$d"; done < "$out/gpt2-checks.txt"
}

run() {
  local dir=$1 out=$2
  SECONDS=0
  [[ -f $dir/manifest.txt ]] || die "$dir holds nothing prepared (gpu-check.sh prepare $dir)"
  case ${GPU_CHECK_ONLY:-} in
    ""|gpt2) ;;
    *) die "GPU_CHECK_ONLY=$GPU_CHECK_ONLY: only gpt2 (the benchmark alone) or unset (everything)" ;;
  esac
  mkdir -p "$out"
  # NCCL: the system's, else the nvidia-nccl wheel's.
  local nccl=""
  if ! ldconfig -p 2>/dev/null | grep -q 'libnccl\.so\.2'; then
    nccl=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(os.path.dirname(nvidia.nccl.__file__), "lib"))' 2>/dev/null || true)
  fi
  export LD_LIBRARY_PATH="$dir/lib${nccl:+:$nccl}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export OMP_NUM_THREADS=${OMP_NUM_THREADS:-4}

  local results=() failed=0
  # record NAME STATUS DETAIL: one line of the report.
  record() {
    results+=("$1|$2|$3")
    [[ $2 == pass || $2 == skip ]] || failed=1
    printf '%-16s %-5s %s\n' "$1" "$2" "$3"
  }
  # check NAME SECONDS CMD...: runs CMD into OUT/NAME.log; pass on exit 0.
  # The test programs skip themselves (exit 77, or a SKIP line) without a
  # device; here, with one, that is a failure.
  check() {
    local name=$1 secs=$2; shift 2
    local rc=0
    timeout "$secs" "$@" > "$out/$name.log" 2>&1 || rc=$?
    if [[ $rc == 77 ]] || grep -q '^SKIP' "$out/$name.log"; then
      record "$name" FAIL "skipped on a machine with a GPU: $(tail -1 "$out/$name.log")"
    elif [[ $rc == 0 ]]; then record "$name" pass "$(tail -1 "$out/$name.log")"
    else record "$name" FAIL "exit $rc: $(tail -1 "$out/$name.log")"; fi
  }

  local gpus
  gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
  nvidia-smi > "$out/nvidia-smi.log" 2>&1 || true
  if [[ ${gpus:-0} == 0 ]]; then
    record gpu FAIL "no GPU (nvidia-smi -L lists none): nothing run"
  else
    record gpu pass "$(nvidia-smi -L | head -1) ($gpus GPU(s))"
    # GPU_CHECK_ONLY=gpt2: the benchmark alone (a rerun).
    if [[ ${GPU_CHECK_ONLY:-} != gpt2 ]]; then
      check kernels 300 "$dir/bin/braid-rt-cuda-kernels-device-test" \
        "$dir/lib/libbraid_rt_kernels_shared.so"
      check nccl-1rank 120 "$dir/bin/braid-rt-cuda-comm_test_single"
      # A collective that cannot finish: the timeout aborts the communicator
      # and ends the rank with status 42 and a message naming it.
      local rc=0
      timeout 60 "$dir/bin/braid-rt-cuda-comm_test_single" timeout \
        > "$out/nccl-timeout.log" 2>&1 || rc=$?
      if [[ $rc == 42 ]] && grep -q 'TIMEOUT: all_reduce of 16 f32 over world.*the communicator was aborted' "$out/nccl-timeout.log"; then
        record nccl-timeout pass "exit 42: $(grep -m1 TIMEOUT "$out/nccl-timeout.log")"
      else
        record nccl-timeout FAIL "exit $rc (want 42 and the TIMEOUT message): $(tail -1 "$out/nccl-timeout.log")"
      fi
      # The compressed sums against the CPU target's arithmetic (the bf16 /
      # fp16 ring bit for bit; PowerSGD, cuBLAS GEMMs and kernels on the
      # device, within 1e-4): on 1 GPU the entry points, staging and
      # PowerSGD; on 2 the ring itself over NCCL send/recv, and PowerSGD's
      # sums.
      check nccl-compressed-1rank 120 \
        "$dir/bin/braid-rt-cuda-comm_test_single" compressed
      if [[ $gpus -ge 2 ]] && command -v mpirun >/dev/null; then
        check nccl-2ranks 180 mpirun --allow-run-as-root -n 2 "$dir/bin/braid-rt-cuda-comm_test"
        check nccl-compressed-2ranks 180 mpirun --allow-run-as-root -n 2 \
          "$dir/bin/braid-rt-cuda-comm_test" compressed
      else
        record nccl-2ranks skip "needs 2 GPUs (have $gpus) and mpirun ($(command -v mpirun || echo none))"
        record nccl-compressed-2ranks skip "needs 2 GPUs (have $gpus) and mpirun ($(command -v mpirun || echo none))"
      fi
      check gpt-train 300 "$dir/bin/gpt-cuda" --steps $STEPS --seed 1
      cp "$out/gpt-train.log" "$out/gpt-cuda.out"
      check gpt-vs-cpu 60 python3 "$root/test/Integration/Inputs/compare-results.py" \
        "$out/gpt-cuda.out" "$dir/ref/cpu.out" --rtol $RTOL
      grep '^summary:' "$out/gpt-cuda.out" > "$out/gpt-speed.txt" || true
      checkpoints "$dir" "$out"
    fi
    gpt2 "$dir" "$out"
  fi

  {
    echo "# gpu-check $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo
    sed 's/^/    /' "$dir/manifest.txt"
    echo
    echo "| check | result | detail |"
    echo "|---|---|---|"
    for r in "${results[@]}"; do IFS='|' read -r n s d <<< "$r"; echo "| $n | $s | $d |"; done
    [[ -s $out/gpt-speed.txt ]] && { echo; echo "GPT on one GPU: $(cat "$out/gpt-speed.txt")"; }
    if [[ -s $out/gpt2.md ]]; then
      echo; echo "## GPT-2 small on one GPU (issue 15)"; echo; cat "$out/gpt2.md"
    fi
    echo; echo "run took ${SECONDS} s (budget ${BUDGET_S} s)"
  } > "$out/report.md"
  python3 - "$out" "${results[@]}" <<'EOF'
import json, os, sys
out, rows = sys.argv[1], sys.argv[2:]
checks = [dict(zip(("name", "result", "detail"), r.split("|", 2))) for r in rows]
report = {"checks": checks, "passed": all(c["result"] in ("pass", "skip") for c in checks)}
if os.path.exists(out + "/gpt2.json"):
    report["gpt2"] = json.load(open(out + "/gpt2.json"))
json.dump(report, open(out + "/report.json", "w"), indent=1)
EOF
  echo "gpu-check: report in $out/report.md"
  return $failed
}

case ${1:-} in
  prepare) prepare "${2:-build-gpu}" ;;
  run)
    [[ $# -ge 2 ]] || die "usage: gpu-check.sh run [DIR] OUT"
    if [[ $# -ge 3 ]]; then run "$2" "$3"; else run build-gpu "$2"; fi ;;
  all)
    [[ $# -ge 2 ]] || die "usage: gpu-check.sh all OUT"
    prepare build-gpu && run build-gpu "$2" ;;
  -h|--help|"")
    sed -n '2,34p' "$0" | sed 's/^# \{0,1\}//'; [[ -n ${1:-} ]] ;;
  *) die "unknown command '$1' (prepare, run or all; --help)" ;;
esac
