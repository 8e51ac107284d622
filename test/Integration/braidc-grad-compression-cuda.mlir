// REQUIRES: cuda-toolkit
//
// Tests that braidc --target cuda compiles --grad-compression (bf16 and
// fp16 on dp2, bf16 on dp2 x tp2 with ZeRO-2's reduce_scatter, PowerSGD on
// dp2) into CUDA executables that call the runtime's compressed
// reductions, linked against the CUDA backend's NCCL ring and its kernels.
// No GPU runs here: scripts/gpu-check.sh runs the collectives on one.
//
// RUN: %PYTHON -m braid.models gpt --layers 2 --hidden 32 --heads 4 --seq 8 --vocab 64 --batch 4 -o %t.mlir
// The compressed reductions' calls with the 7 lines that define their
// arguments: the kind (0 all_reduce, 2 reduce_scatter) and the format (0
// bf16, 1 fp16).
// RUN: braidc %t.mlir --target cuda --mesh dp=2 --lr 3e-3 --grad-compression bf16 --emit cu -o %t.bf16.cu
// RUN: grep -B7 'braid_rt_program_collective_compressed_f32(' %t.bf16.cu | FileCheck %s --check-prefixes=CALL,BF16 -DKIND=0
// RUN: braidc %t.mlir --target cuda --mesh dp=2 --lr 3e-3 --grad-compression fp16 --emit cu -o %t.fp16.cu
// RUN: grep -B7 'braid_rt_program_collective_compressed_f32(' %t.fp16.cu | FileCheck %s --check-prefixes=CALL,FP16 -DKIND=0
// RUN: braidc %t.mlir --target cuda --mesh dp=2 --lr 3e-3 --grad-compression fp16 -o %t.fp16
// RUN: braidc %t.mlir --target cuda --mesh dp=2,tp=2 --zero 2 --lr 3e-3 --grad-compression bf16 --emit cu -o %t.z2.cu
// RUN: grep -B7 'braid_rt_program_collective_compressed_f32(' %t.z2.cu | FileCheck %s --check-prefixes=CALL,BF16 -DKIND=2
// CALL:      int32_t [[OPKIND:v[0-9]+]] = [[KIND]];
// CALL-NEXT: braid_rt_program_collective_t [[OP:v[0-9]+]] = (braid_rt_program_collective_t) [[OPKIND]];
// CALL-NEXT: int64_t
// CALL-NEXT: int64_t
// CALL-NEXT: int64_t
// CALL-NEXT: int64_t
// BF16-NEXT: int64_t [[FORMAT:v[0-9]+]] = 0;
// FP16-NEXT: int64_t [[FORMAT:v[0-9]+]] = 1;
// CALL-NEXT: braid_rt_program_collective_compressed_f32([[OP]], {{.*}}, [[FORMAT]], (braid_arena
// RUN: braidc %t.mlir --target cuda --mesh dp=2 --lr 3e-3 --grad-compression powersgd --powersgd-rank 2 --emit cu -o %t.psgd.cu
// RUN: FileCheck %s --check-prefix=PSGD < %t.psgd.cu
// PSGD: braid_rt_program_powersgd_f32(
// RUN: braidc %t.mlir --target cuda --mesh dp=2 --lr 3e-3 --grad-compression powersgd --powersgd-rank 2 -o %t.psgd
// RUN: test -x %t.fp16 && test -x %t.psgd
