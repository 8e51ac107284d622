// Tests braidc --zero3-prefetch under --precision bf16-mixed, where ZeRO-3
// gathers each matmul weight's bf16 working copy (the braid.convert of its
// share's read): the working copies' gathers are started ahead of their use
// as the shares' are (the layer's q weight before the layer norm computes),
// and the executable on 2 ranks trains to bit-identical losses and gradient
// norms whether the gathers run just in time (0), one group ahead (the
// default) or two ahead after --async-collectives; its losses equal
// braid-eval's on the same passes within 1e-3 relative (bf16-mixed's usual
// band against braid-eval; on 2026-12-02 0, 0, 1.95e-7 and 4.72e-6 over the
// 4 losses: ZeRO-3 sums the gradients in another order than braid-eval,
// and bf16 roundings carry the difference on).
//
// RUN: %PYTHON -m braid.models gpt --layers 3 --hidden 32 --heads 4 --seq 8 --vocab 64 --batch 4 -o %t.mlir
// RUN: braidc %t.mlir --precision bf16-mixed --mesh dp=2 --zero 3 --lr 0.01 --clip-norm 1.0 --zero3-prefetch 0 -o %t.jit
// RUN: braidc %t.mlir --precision bf16-mixed --mesh dp=2 --zero 3 --lr 0.01 --clip-norm 1.0 -o %t.ahead1
// RUN: braidc %t.mlir --precision bf16-mixed --mesh dp=2 --zero 3 --lr 0.01 --clip-norm 1.0 --zero3-prefetch 2 --async-collectives -o %t.ahead2
// RUN: braid-run -n 2 %t.jit --steps 4 --seed 1 > %t.jit.log
// RUN: braid-run -n 2 %t.ahead1 --steps 4 --seed 1 > %t.ahead1.log
// RUN: braid-run -n 2 %t.ahead2 --steps 4 --seed 1 > %t.ahead2.log
// RUN: grep '^step' %t.jit.log | cut -d' ' -f1-8 > %t.jit.out
// RUN: grep '^step' %t.ahead1.log | cut -d' ' -f1-8 > %t.ahead1.out
// RUN: grep '^step' %t.ahead2.log | cut -d' ' -f1-8 > %t.ahead2.out
// RUN: diff %t.jit.out %t.ahead1.out
// RUN: diff %t.jit.out %t.ahead2.out
// RUN: FileCheck %s --check-prefix=STEPS < %t.jit.out
// STEPS: step 0 loss {{.*}} grad_norm
// STEPS: step 3 loss {{.*}} grad_norm
//
// RUN: braid-opt %t.mlir --braid-mixed-precision=precision=bf16-mixed --braid-autodiff --braid-train-step="lr=0.01 clip-norm=1.0" --braid-shard="dp=2 zero=3" --braid-propagate-sharding --braid-partition -o %t.part.mlir
// RUN: braid-eval %t.part.mlir --steps 4 --seed 1 --mesh mesh > %t.eval
// RUN: %PYTHON %S/Inputs/compare-results.py %t.ahead1.log %t.eval --rtol 1e-3 | FileCheck %s --check-prefix=EVAL
// EVAL: ok: 4 losses within 0.001
//
// RUN: braid-opt %t.part.mlir --braid-zero3-prefetch="depth=1 across-repeats=1" | FileCheck %s --check-prefix=AHEAD
// AHEAD-LABEL: braid.layer @block(
// AHEAD: braid.param "attn.q.weight"
// AHEAD-NEXT: braid.convert %{{.*}} : tensor<16x32xf32> to tensor<16x32xbf16>
// AHEAD-NEXT: braid.all_gather_start
// AHEAD-NEXT: braid.layer_norm
