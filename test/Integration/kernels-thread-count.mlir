// Tests a compiled training step on 1, 2 and 3 kernel threads: a GPT large
// enough that every kind of kernel call goes over the threads (SGEMMs split
// by rows or by columns, batches of GEMMs one per thread, elementwise and
// fused loops, the weight gradients' sums over the batch split by columns,
// attention, the loss, the gradient norm with clipping), fused and
// --no-fuse, trains 4 AdamW steps with losses equal to braid-eval's within
// 1e-5 relative on each. 3 threads do not divide the batch of 4 GEMMs, so
// each GEMM is then split three ways. (Only the SGEMMs' last bits depend
// on the thread count: python/tests/test_runtime_kernels.py checks that
// the other kernels' results do not.)
//
// RUN: %PYTHON -m braid.models gpt --layers 2 --hidden 128 --heads 4 --seq 64 --vocab 256 --batch 4 -o %t.mlir
// RUN: braid-opt %t.mlir --braid-autodiff --braid-train-step="lr=3e-3 clip-norm=0.5" -o %t.train.mlir
// RUN: braid-eval %t.train.mlir --steps 4 --seed 2 > %t.eval
// RUN: braidc %t.train.mlir --entry train_step -o %t.fused
// RUN: braidc %t.train.mlir --entry train_step --no-fuse -o %t.plain
// RUN: env OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 %t.fused --steps 4 --seed 2 > %t.f1.out
// RUN: env OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2 %t.fused --steps 4 --seed 2 > %t.f2.out
// RUN: env OMP_NUM_THREADS=3 OPENBLAS_NUM_THREADS=3 %t.fused --steps 4 --seed 2 > %t.f3.out
// RUN: env OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2 %t.plain --steps 4 --seed 2 > %t.p2.out
// RUN: %PYTHON %S/Inputs/compare-results.py %t.f1.out %t.eval --rtol 1e-5 | FileCheck %s
// RUN: %PYTHON %S/Inputs/compare-results.py %t.f2.out %t.eval --rtol 1e-5 | FileCheck %s
// RUN: %PYTHON %S/Inputs/compare-results.py %t.f3.out %t.eval --rtol 1e-5 | FileCheck %s
// RUN: %PYTHON %S/Inputs/compare-results.py %t.p2.out %t.eval --rtol 1e-5 | FileCheck %s
//
// CHECK: ok: 4 losses within 1e-05
