// REQUIRES: cuda-toolkit
//
// Tests that braidc --target cuda compiles the main job's GPT into CUDA
// executables (nvcc, the CUDA kernels, cuBLAS, NCCL): on one device, as
// dp2 x tp2 x pp2 under ZB-H1, as dp2 x tp2 with ZeRO-2, and as dp2 with
// ZeRO-3 and --defer-validation (and dp2 x pp2 under ZB-V with it); that
// --emit cu
// writes the CUDA program, which calls the same runtime API as the CPU one
// and uploads constants; and that a CUDA program on a machine without a
// GPU says so. No GPU runs here: scripts/gpu-check.sh runs them on one.
//
// RUN: %PYTHON -m braid.models gpt --layers 4 --hidden 128 --heads 4 --seq 64 --vocab 256 --batch 4 -o %t.mlir
// RUN: braidc %t.mlir --target cuda --lr 1e-3 -o %t.one
// RUN: braidc %t.mlir --target cuda --mesh dp=2,tp=2,pp=2 --schedule zb-h1 --microbatches 4 --lr 1e-3 -o %t.3d
// RUN: braidc %t.mlir --target cuda --mesh dp=2,tp=2 --zero 2 --lr 1e-3 -o %t.zero2
// RUN: test -x %t.one && test -x %t.3d && test -x %t.zero2
//
// Validation deferred to the next step (the final flag uploaded to the
// device each call):
// RUN: braidc %t.mlir --target cuda --mesh dp=2 --zero 3 --async-collectives --defer-validation --clip-norm 1.0 --lr 1e-3 -o %t.defer
// RUN: braidc %t.mlir --target cuda --mesh dp=2,pp=2 --schedule zb-v --microbatches 4 --zero 3 --async-collectives --defer-validation --clip-norm 1.0 --lr 1e-3 -o %t.deferpp
// RUN: test -x %t.defer && test -x %t.deferpp
//
// Started collectives under dp=2: each of the 4 instances of @block.W
// starts its gradient bucket on its own pending site, waited for after the
// repeat (braid-schedule-collectives' split at the wait, --schedule-across-repeats).
// RUN: braidc %t.mlir --target cuda --mesh dp=2 --async-collectives --schedule-across-repeats --lr 1e-3 --emit cu -o %t.async.cu
// RUN: FileCheck %s --check-prefix=ASYNC < %t.async.cu
// RUN: braidc %t.mlir --target cuda --mesh dp=2 --async-collectives --schedule-across-repeats --lr 1e-3 -o %t.async
// RUN: test -x %t.async
// ASYNC: braid_rt_program_pending_t braid_pending_{{[0-9]+}}[4];
//
// RUN: braidc %t.mlir --target cuda --lr 1e-3 --emit cu -o %t.cu
// RUN: FileCheck %s --check-prefix=CU < %t.cu
// CU: #include "braid/rt/kernels.h"
// CU: braid_rt_matmul_f32(braid_rt_program_stream(),
// CU: int main(
//
// The same model compiled for the CPU is the same program but for the
// constants' upload (this model has none), the stream and the fused
// regions (a __global__ kernel each on CUDA, compiled into the executables
// above; cpu: loops on the kernels' threads): without fusion the code
// agrees. (The bias add and GELU region with --no-matmul-epilogue: by
// default the bias add is in the matmul's cuBLASLt epilogue,
// braidc-matmul-epilogue-cuda.mlir, and a training step's GELU is a
// kernel of its own.)
// RUN: braidc %t.mlir --target cuda --lr 1e-3 --no-matmul-epilogue --emit cu -o %t.noep.cu
// RUN: FileCheck %s --check-prefix=FUSED < %t.noep.cu
// FUSED: #include "braid/rt/cuda.h"
// FUSED: __global__ static void braid_fused_{{[0-9]+}}_kernel(
// FUSED: braid_rt_cuda::geluOf(
// FUSED: <<<(unsigned)blocks, (unsigned)threads, 0, braid_rt_cuda_stream(braid_rt_program_stream())>>>
// Regions with row-wise ops (the residual add and layer_norm, the loss and
// its gradient): one block per row, block-wide sums; every row-wise op
// (fused-rowwise.mlir's regions) compiles and links.
// RUN: FileCheck %s --check-prefix=ROWS < %t.cu
// ROWS: row by row (1 row-wise)
// ROWS: __device__ static double braid_fused_block_sum(double v) {
// ROWS: braid_fused_block_sum(mean)
// ROWS: <<<256, 256, 0, stream>>>
// RUN: braidc %S/fused-rowwise.mlir --entry f --target cuda -o %t.rows
// RUN: test -x %t.rows
// RUN: braidc %t.mlir --target cuda --lr 1e-3 --no-fuse --emit cu -o %t.plain.cu
// RUN: braidc %t.mlir --lr 1e-3 --no-fuse --emit cpp -o %t.cpp
// RUN: diff %t.cpp %t.plain.cu
//
// A training program creates the runtime's context, which finds no GPU; a
// forward program fails at its first allocation.
// RUN: not %t.one --steps 1 2>&1 | FileCheck %s --check-prefix=NODEV
// NODEV: error: braid_rt_context_create: rank 0 (local rank 0 of 1{{.*}}) finds no CUDA device
// RUN: braidc %t.mlir --target cuda --entry forward -o %t.fwd
// RUN: not %t.fwd 2>&1 | FileCheck %s --check-prefix=NOALLOC
// NOALLOC: error: no device to run on: this program was compiled for a GPU (braidc --target cuda), and this machine has no usable one
