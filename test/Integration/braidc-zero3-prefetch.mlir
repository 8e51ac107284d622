// Tests braidc --zero3-prefetch: under dp=2 with ZeRO-3 the executable on
// 2 ranks trains to bit-identical losses and gradient norms whether the
// parameter gathers run just in time (0), one group ahead (the default) or
// two ahead after --async-collectives, each layer instance starting the
// next one's first gathers (3 layers: the two buffers of a carried future
// both reused, forward and in the reverse backward repeat); the compile
// replays in braid-opt; a negative depth is refused.
//
// RUN: %PYTHON -m braid.models gpt --layers 3 --hidden 32 --heads 4 --seq 8 --vocab 64 --batch 4 -o %t.mlir
// RUN: braidc %t.mlir --mesh dp=2 --zero 3 --lr 0.01 --clip-norm 1.0 --zero3-prefetch 0 -o %t.jit
// RUN: braidc %t.mlir --mesh dp=2 --zero 3 --lr 0.01 --clip-norm 1.0 -o %t.ahead1
// RUN: braidc %t.mlir --mesh dp=2 --zero 3 --lr 0.01 --clip-norm 1.0 --zero3-prefetch 2 --async-collectives -o %t.ahead2
// RUN: braid-run -n 2 %t.jit --steps 4 --seed 1 | grep '^step' | cut -d' ' -f1-8 > %t.jit.out
// RUN: braid-run -n 2 %t.ahead1 --steps 4 --seed 1 | grep '^step' | cut -d' ' -f1-8 > %t.ahead1.out
// RUN: braid-run -n 2 %t.ahead2 --steps 4 --seed 1 | grep '^step' | cut -d' ' -f1-8 > %t.ahead2.out
// RUN: diff %t.jit.out %t.ahead1.out
// RUN: diff %t.jit.out %t.ahead2.out
// RUN: FileCheck %s --check-prefix=STEPS < %t.jit.out
// STEPS: step 0 loss {{.*}} grad_norm
// STEPS: step 3 loss {{.*}} grad_norm
//
// Only the just-in-time program waits for each gather right after starting
// it: the others start the next parameters' gathers first.
// RUN: braidc %t.mlir --mesh dp=2 --zero 3 --zero3-prefetch 0 --emit mlir -o - | FileCheck %s --check-prefix=JIT
// JIT-NOT: all_gather_start
// RUN: braid-opt %t.mlir --braid-codegen-pipeline="train=true dp=2 zero=3" -o %t.replay.mlir
// RUN: braidc %t.mlir --mesh dp=2 --zero 3 --emit mlir -o %t.emitc.mlir
// RUN: diff -B %t.emitc.mlir %t.replay.mlir
// RUN: FileCheck %s --check-prefix=AHEAD < %t.emitc.mlir
// AHEAD: braid.all_gather_start
// A layer starts the next instance's gathers on the site its caller gives,
// none on the last instance; the repeat alternates two sites (n % 2).
// AHEAD: cmp ne, %{{.*}} : (!emitc.ptr<!emitc.opaque<"braid_rt_program_pending_t">>
// AHEAD-NEXT: if %
// AHEAD: call_opaque "braid_rt_program_collective_start_f32"
// AHEAD: rem %{{.*}} : (i64, i64) -> i64
// AHEAD: conditional %{{.*}} : !emitc.ptr<!emitc.opaque<"braid_rt_program_pending_t">>
//
// RUN: not braidc %t.mlir --mesh dp=2 --zero 3 --zero3-prefetch -1 -o %t.bad 2>&1 | FileCheck %s --check-prefix=BAD
// BAD: zero3-prefetch must be non-negative (0: gather just in time), got -1
