// REQUIRES: cuda-toolkit
// Tests that braidc --target cuda lowers braid.matmul_bias to
// braid_rt_matmul_bias_f32, which the CUDA kernels implement with
// cublasLtMatmul (CUBLASLT_EPILOGUE_BIAS / GELU_BIAS), and that the program
// links cuBLASLt: one GPU and dp2 x tp2, f32 (6 calls for a layer body, 4
// under tp2: the column-parallel products), none with --no-matmul-epilogue;
// bf16-mixed calls the bf16-input entry point braid_rt_matmul_bias_bf16in_f32
// for the same 6 (a bf16 product is not rounded before its bias add; lit
// Integration/braidc-precision-cuda.mlir links such programs).
// Both programs must link (the kernels' library calls cuBLASLt, so the link
// fails without it on the link line; no separate check of the binary's
// NEEDED entries, which a successful link already implies). The programs are
// compiled and linked only, never run on a GPU here (docs/cuda.md); the
// kernel's math is host-tested by ctest runtime-cuda-kernel-math, a reference
// cublasLtMatmul with these epilogues.
//
// RUN: %PYTHON -m braid.models gpt --layers 2 --hidden 32 --heads 4 --seq 8 --vocab 64 --batch 4 -o %t.mlir
// RUN: braidc %t.mlir --target cuda --lr 1e-3 --emit cu -o - | FileCheck %s --check-prefix=ONE
// RUN: braidc %t.mlir --target cuda --mesh dp=2,tp=2 --lr 1e-3 --emit cu -o - | FileCheck %s --check-prefix=TP
// RUN: braidc %t.mlir --target cuda --lr 1e-3 --no-matmul-epilogue --emit cu -o - | FileCheck %s --check-prefix=PLAIN
// RUN: braidc %t.mlir --target cuda --precision bf16-mixed --lr 1e-3 --emit cu -o - | FileCheck %s --check-prefix=BF16
// RUN: braidc %t.mlir --target cuda --lr 1e-3 -o %t.one
// RUN: braidc %t.mlir --target cuda --mesh dp=2,tp=2 --lr 1e-3 -o %t.dptp

// ONE-COUNT-6: braid_rt_matmul_bias_f32(braid_rt_program_stream(),
// ONE-NOT: braid_rt_matmul_bias
// TP-COUNT-4: braid_rt_matmul_bias_f32(braid_rt_program_stream(),
// TP-NOT: braid_rt_matmul_bias
// PLAIN-NOT: braid_rt_matmul_bias
// BF16-COUNT-6: braid_rt_matmul_bias_bf16in_f32(braid_rt_program_stream(),
// BF16-NOT: braid_rt_matmul_bias
