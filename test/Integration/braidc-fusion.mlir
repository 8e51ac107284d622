// Tests that fusion (braid-fuse-elementwise, braidc's default) changes no
// bit of training: the main job's GPT (4 layers, hidden 128, 4 heads,
// sequence 64, vocabulary 256, batch 16) and a Llama (4 layers, hidden 128,
// 4 heads, 2 KV heads, SwiGLU), compiled with and without --no-fuse and
// trained 5 AdamW steps, print the same losses (relative tolerance 0) and
// save byte-identical checkpoints (every parameter and optimizer state);
// so do a dp2 x tp2 program (fusion after braid-partition) on 4 ranks and a
// 2-stage 1F1B pipeline (regions inside the pieces) on 2 ranks, 3 steps.
// The fused loops call the kernels' per-element functions
// (braid/rt/elementwise_math.h) in the ops' order, and the row-wise ops in
// regions (the residual add with the layer_norm or rms_norm after it, the
// norms' gradients, the loss with its gradient) reduce each row as their
// kernels do, so nothing rounds differently (the loss, summed in row order,
// is the kernel's on one thread; on two it was the same in every run
// here). The C++ has one function per region and no kernel call for the
// fused ops.
//
// RUN: %PYTHON -m braid.models gpt --layers 4 --hidden 128 --heads 4 --seq 64 --vocab 256 --batch 16 -o %t.gpt.mlir
// RUN: braidc %t.gpt.mlir --lr 3e-3 --clip-norm 1.0 -o %t.gpt.fused
// RUN: braidc %t.gpt.mlir --lr 3e-3 --clip-norm 1.0 --no-fuse -o %t.gpt.plain
// RUN: rm -rf %t.gpt.fused.ck %t.gpt.plain.ck
// RUN: %t.gpt.fused --steps 5 --seed 1 --save %t.gpt.fused.ck > %t.gpt.fused.out
// RUN: %t.gpt.plain --steps 5 --seed 1 --save %t.gpt.plain.ck > %t.gpt.plain.out
// RUN: %PYTHON %S/Inputs/compare-results.py %t.gpt.fused.out %t.gpt.plain.out --rtol 0 | FileCheck %s --check-prefix=FIVE
// RUN: diff -r %t.gpt.fused.ck %t.gpt.plain.ck
//
// RUN: %PYTHON -m braid.models llama --layers 4 --hidden 128 --heads 4 --kv-heads 2 --seq 64 --vocab 256 --batch 4 -o %t.llama.mlir
// RUN: braidc %t.llama.mlir --lr 3e-3 -o %t.llama.fused
// RUN: braidc %t.llama.mlir --lr 3e-3 --no-fuse -o %t.llama.plain
// RUN: rm -rf %t.llama.fused.ck %t.llama.plain.ck
// RUN: %t.llama.fused --steps 5 --seed 1 --save %t.llama.fused.ck > %t.llama.fused.out
// RUN: %t.llama.plain --steps 5 --seed 1 --save %t.llama.plain.ck > %t.llama.plain.out
// RUN: %PYTHON %S/Inputs/compare-results.py %t.llama.fused.out %t.llama.plain.out --rtol 0 | FileCheck %s --check-prefix=FIVE
// RUN: diff -r %t.llama.fused.ck %t.llama.plain.ck
//
// RUN: %PYTHON -m braid.models gpt --layers 2 --hidden 64 --heads 4 --seq 16 --vocab 128 --batch 4 -o %t.small.mlir
// RUN: braidc %t.small.mlir --mesh dp=2,tp=2 --lr 3e-3 -o %t.dptp.fused
// RUN: braidc %t.small.mlir --mesh dp=2,tp=2 --lr 3e-3 --no-fuse -o %t.dptp.plain
// RUN: rm -rf %t.dptp.fused.ck %t.dptp.plain.ck
// RUN: braid-run -n 4 %t.dptp.fused --steps 3 --seed 1 --save %t.dptp.fused.ck > %t.dptp.fused.out
// RUN: braid-run -n 4 %t.dptp.plain --steps 3 --seed 1 --save %t.dptp.plain.ck > %t.dptp.plain.out
// RUN: %PYTHON %S/Inputs/compare-results.py %t.dptp.fused.out %t.dptp.plain.out --rtol 0 | FileCheck %s --check-prefix=THREE
// RUN: diff -r %t.dptp.fused.ck %t.dptp.plain.ck
// RUN: braidc %t.small.mlir --mesh pp=2 --schedule 1f1b --microbatches 2 --lr 3e-3 -o %t.pp.fused
// RUN: braidc %t.small.mlir --mesh pp=2 --schedule 1f1b --microbatches 2 --lr 3e-3 --no-fuse -o %t.pp.plain
// RUN: braid-run -n 2 %t.pp.fused --steps 3 --seed 1 > %t.pp.fused.out
// RUN: braid-run -n 2 %t.pp.plain --steps 3 --seed 1 > %t.pp.plain.out
// RUN: %PYTHON %S/Inputs/compare-results.py %t.pp.fused.out %t.pp.plain.out --rtol 0 | FileCheck %s --check-prefix=THREE
//
// RUN: braidc %t.gpt.mlir --lr 3e-3 --no-matmul-epilogue --emit cpp -o %t.fused.cpp
// RUN: FileCheck %s --check-prefix=CPP < %t.fused.cpp
// RUN: braidc %t.gpt.mlir --lr 3e-3 --no-fuse --emit cpp -o %t.plain.cpp
// RUN: FileCheck %s --check-prefix=PLAIN < %t.plain.cpp

// FIVE: ok: 5 losses within 0.0 (worst 0)
// THREE: ok: 3 losses within 0.0 (worst 0)

// The bias add and tanh GELU of the MLP, one loop over the rows on the
// kernels' threads, an inner loop over the last dimension (with
// --no-matmul-epilogue: by default the bias add is in the matmul's
// epilogue, braidc-matmul-epilogue.mlir, and the GELU a kernel of its own).
// CPP: #include "braid/rt/elementwise_math.h"
// CPP: #include "braid/rt/parallel.h"
// CPP: braid.fused: 2 ops over [16x64x512] in one loop nest
// CPP: for (int64_t j = 0; j < 512; ++j) {
// CPP: const float v0 = a0 + a1;
// CPP-NEXT: const float v1 = braid_rt_gelu_tanh_of(v0);
// CPP: braid_rt_parallel_for(1024, 524288, braid_fused_{{[0-9]+}}_rows, &c);
// CPP-NOT: braid_rt_gelu_f32(
// RUN: FileCheck %s --check-prefix=ROWS < %t.fused.cpp
// ROWS: braid.fused: 3 ops over [16x64x128] row by row (1 row-wise)
// ROWS: { // braid.layer_norm
// ROWS: braid.fused: 2 ops over [16x64x256] row by row (2 row-wise)
// ROWS-NOT: braid_rt_cross_entropy
// PLAIN-NOT: braid_fused_
// PLAIN: braid_rt_gelu_f32(
// PLAIN: braid_rt_cross_entropy_f32(
