// REQUIRES: cuda-toolkit
//
// Tests that braidc --target cuda --precision bf16-mixed compiles: the bf16
// values are held in f32 and rounded by the CUDA kernel
// braid_rt_round_bf16_f32 (kernel_math.h's roundBF16Of, the CPU bits) after
// each op that computes one; matmuls of bf16 operands call
// braid_rt_matmul_bf16in_f32 (on CUDA cuBLAS's bf16 GEMM on bf16 copies;
// that it calls only bf16 GEMMs is the host test runtime-cuda-kernel-math's:
// every CUDA program links cublasGemmStridedBatchedEx, f32 ones too, so the
// executable cannot show it). Compiled here; no GPU has run it.
//
// RUN: %PYTHON -m braid.models gpt --layers 2 --hidden 32 --heads 4 --seq 8 --vocab 64 --batch 4 -o %t.mlir
// RUN: braidc %t.mlir --target cuda --precision bf16-mixed --lr 1e-3 -o %t.one
// RUN: braidc %t.mlir --target cuda --precision bf16-mixed --mesh dp=2,tp=2 --lr 1e-3 -o %t.dptp
// RUN: test -x %t.one && test -x %t.dptp
// RUN: braidc %t.mlir --target cuda --precision bf16-mixed --lr 1e-3 --emit cu -o - | FileCheck %s
// CHECK: #include "braid/rt/cuda.h"
// CHECK: braid_rt_matmul_bf16in_f32(braid_rt_program_stream(),
// CHECK: braid_rt_round_bf16_f32(braid_rt_program_stream(),
