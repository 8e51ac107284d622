// REQUIRES: cuda-toolkit
//
// Tests that braidc --target cuda compiles --grad-compression (bf16 and
// fp16 on dp2, bf16 on dp2 x tp2 with ZeRO-2's reduce_scatter, PowerSGD on
// dp2) into CUDA executables that call the runtime's compressed
// reductions, linked against the CUDA backend's NCCL ring and its kernels.
// No GPU runs here: scripts/gpu-check.sh runs the collectives on one.
//
// RUN: %PYTHON -m braid.models gpt --layers 2 --hidden 32 --heads 4 --seq 8 --vocab 64 --batch 4 -o %t.mlir
// RUN: braidc %t.mlir --target cuda --mesh dp=2 --lr 3e-3 --grad-compression bf16 --emit cu -o %t.bf16.cu
// RUN: FileCheck %s --check-prefix=BF16 < %t.bf16.cu
// BF16: braid_rt_program_collective_compressed_f32(
// RUN: braidc %t.mlir --target cuda --mesh dp=2 --lr 3e-3 --grad-compression fp16 -o %t.fp16
// RUN: braidc %t.mlir --target cuda --mesh dp=2,tp=2 --zero 2 --lr 3e-3 --grad-compression bf16 --emit cu -o %t.z2.cu
// RUN: FileCheck %s --check-prefix=Z2 < %t.z2.cu
// Z2: braid_rt_program_collective_compressed_f32(
// RUN: braidc %t.mlir --target cuda --mesh dp=2 --lr 3e-3 --grad-compression powersgd --powersgd-rank 2 --emit cu -o %t.psgd.cu
// RUN: FileCheck %s --check-prefix=PSGD < %t.psgd.cu
// PSGD: braid_rt_program_powersgd_f32(
// RUN: braidc %t.mlir --target cuda --mesh dp=2 --lr 3e-3 --grad-compression powersgd --powersgd-rank 2 -o %t.psgd
// RUN: test -x %t.fp16 && test -x %t.psgd
