// Tests braidc --post-validate: the executables train exactly as without it
// (losses and gradient norms of 6 AdamW steps, step 3 clipped, on one
// device and on 2 ranks under dp=2 with ZeRO-3); an injected overflow (lr
// 1e30) is rolled back: the checkpoint after 4 steps equals the one after
// 2 and the plain program's after 4, with the same warnings; the compile
// replays in braid-opt. Under dp=2 with ZeRO-2 and --async-collectives the
// losses, norms and checkpoint equal the plain blocking program's too, and
// in the trace every step starts the gradient norm's all_reduce (bucketed
// with the loss's) right after the gradients' reduce_scatters, before the
// 36 all_gathers of the optimistic updates, and waits for it after them,
// before the validation's (braid-schedule-collectives).
//
// RUN: %PYTHON -m braid.models gpt --layers 2 --hidden 32 --heads 4 --seq 8 --vocab 64 --batch 4 -o %t.mlir
// RUN: rm -rf %t.ck && mkdir -p %t.ck
// RUN: braidc %t.mlir --lr 0.01 --clip-norm 3.0 -o %t.plain
// RUN: braidc %t.mlir --lr 0.01 --clip-norm 3.0 --post-validate -o %t.pv
// RUN: %t.plain --steps 6 --seed 1 | grep '^step' | cut -d' ' -f1-8 > %t.plain.out
// RUN: %t.pv --steps 6 --seed 1 | grep '^step' | cut -d' ' -f1-8 > %t.pv.out
// RUN: diff %t.plain.out %t.pv.out
// RUN: FileCheck %s --check-prefix=CLIPPED < %t.pv.out
// CLIPPED: step 3 {{.*}} grad_norm 3.3
//
// RUN: braidc %t.mlir --mesh dp=2 --zero 3 --lr 0.01 --clip-norm 3.0 -o %t.z3
// RUN: braidc %t.mlir --mesh dp=2 --zero 3 --lr 0.01 --clip-norm 3.0 --post-validate -o %t.z3pv
// RUN: braid-run -n 2 %t.z3 --steps 6 --seed 1 | grep '^step' | cut -d' ' -f1-8 > %t.z3.out
// RUN: braid-run -n 2 %t.z3pv --steps 6 --seed 1 | grep '^step' | cut -d' ' -f1-8 > %t.z3pv.out
// RUN: diff %t.z3.out %t.z3pv.out
//
// RUN: braidc %t.mlir --mesh dp=2 --zero 2 --lr 0.01 --clip-norm 3.0 -o %t.z2
// RUN: braidc %t.mlir --mesh dp=2 --zero 2 --lr 0.01 --clip-norm 3.0 --post-validate --async-collectives -o %t.z2pv
// RUN: braid-run -n 2 %t.z2 --steps 6 --seed 1 --save %t.ck/z2 | grep '^step' | cut -d' ' -f1-8 > %t.z2.out
// RUN: braid-run -n 2 %t.z2pv --steps 6 --seed 1 --save %t.ck/z2pv --trace %t.z2pv.json | grep '^step' | cut -d' ' -f1-8 > %t.z2pv.out
// RUN: diff %t.z2.out %t.z2pv.out
// RUN: %PYTHON %S/Inputs/compare-checkpoint.py %t.ck/z2/checkpoint.safetensors %t.ck/z2pv/checkpoint.safetensors --rtol 0 | FileCheck %s --check-prefix=SAME
// RUN: %PYTHON %S/Inputs/trace-starts.py %t.z2pv.json --rank 0 | FileCheck %s --check-prefix=ORDER
// RUN: %PYTHON %S/Inputs/trace-starts.py %t.z2pv.json --rank 1 | FileCheck %s --check-prefix=ORDER
// ORDER-COUNT-6: step {{[0-5]}}: reduce_scatter start x3, all_reduce start x1, all_gather start x36, all_reduce wait x1, all_gather start x36{{$}}
//
// RUN: braidc %t.mlir --lr 1e30 --post-validate -o %t.inf
// RUN: %t.inf --steps 4 --seed 1 --save %t.ck/inf4 > /dev/null 2> %t.inf.err
// RUN: %t.inf --steps 2 --seed 1 --save %t.ck/inf2 > /dev/null 2>&1
// RUN: braidc %t.mlir --lr 1e30 -o %t.infplain
// RUN: %t.infplain --steps 4 --seed 1 --save %t.ck/plain4 > /dev/null 2>&1
// RUN: %PYTHON %S/Inputs/compare-checkpoint.py %t.ck/inf4/checkpoint.safetensors %t.ck/inf2/checkpoint.safetensors --rtol 0 | FileCheck %s --check-prefix=SAME
// RUN: %PYTHON %S/Inputs/compare-checkpoint.py %t.ck/inf4/checkpoint.safetensors %t.ck/plain4/checkpoint.safetensors --rtol 0 | FileCheck %s --check-prefix=SAME
// RUN: FileCheck %s --check-prefix=WARN < %t.inf.err
// SAME: ok: 108 tensors ({{[0-9]+}} values) within 0
// WARN-NOT: warning: step 0
// WARN: warning: step 1: the loss ({{-?nan|-?inf}}) or the gradient norm ({{-?nan|-?inf}}) is not finite: the update was skipped
// WARN-NEXT: warning: step 2:
// WARN-NEXT: warning: step 3:
//
// RUN: braidc %t.mlir --mesh dp=2 --zero 3 --clip-norm 1.0 --post-validate --emit mlir -o %t.emitc.mlir
// RUN: braid-opt %t.mlir --braid-codegen-pipeline="train=true dp=2 zero=3 clip-norm=1.0 post-validate=true" -o %t.replay.mlir
// RUN: diff -B %t.emitc.mlir %t.replay.mlir
// RUN: FileCheck %s --check-prefix=SELECT < %t.emitc.mlir
// SELECT: braid_rt_select_f32
