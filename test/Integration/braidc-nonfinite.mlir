// Tests that a step whose loss or gradient norm is not finite skips its
// update: parameters and optimizer state stay as they were (a checkpoint
// after 4 steps equals the one after 2 when steps 1-3 are non-finite), with
// a warning naming each such step, on one device and under dp=2 x pp=2 with
// ZB-H1 (every rank skips: the norm is global); braid-eval agrees; and that
// --stop-on-nonfinite ends the run at the first one instead. A learning rate
// of 1e30 makes step 0's update overflow the next forward pass.
//
// RUN: %PYTHON -m braid.models gpt --layers 2 --hidden 32 --heads 4 --seq 8 --vocab 64 --batch 4 -o %t.mlir
// RUN: rm -rf %t.ck && mkdir -p %t.ck
//
// RUN: braidc %t.mlir --optimizer sgd --lr 1e30 -o %t.one
// RUN: %t.one --steps 4 --seed 1 --save %t.ck/one4 > %t.one.out 2> %t.one.err
// RUN: %t.one --steps 2 --seed 1 --save %t.ck/one2 > /dev/null 2>&1
// RUN: FileCheck %s --check-prefix=WARN < %t.one.err
// RUN: FileCheck %s --check-prefix=LOSSES < %t.one.out
// RUN: %PYTHON %S/Inputs/compare-checkpoint.py %t.ck/one4/checkpoint.safetensors %t.ck/one2/checkpoint.safetensors --rtol 0 | FileCheck %s --check-prefix=SAME
// WARN-NOT: warning: step 0
// WARN: warning: step 1: the loss ({{-?nan|-?inf}}) or the gradient norm ({{-?nan|-?inf}}) is not finite: the update was skipped (parameters and optimizer state unchanged)
// WARN-NEXT: warning: step 2:
// WARN-NEXT: warning: step 3:
// LOSSES: step 0 loss 4.18
// SAME: ok: 72 tensors ({{[0-9]+}} values) within 0
//
// AdamW too: its moments stay with the parameters.
// RUN: braidc %t.mlir --lr 1e30 -o %t.adam
// RUN: %t.adam --steps 4 --seed 1 --save %t.ck/adam4 > /dev/null 2>&1
// RUN: %t.adam --steps 2 --seed 1 --save %t.ck/adam2 > /dev/null 2>&1
// RUN: %PYTHON %S/Inputs/compare-checkpoint.py %t.ck/adam4/checkpoint.safetensors %t.ck/adam2/checkpoint.safetensors --rtol 0 | FileCheck %s --check-prefix=SAMEADAM
// SAMEADAM: ok: 108 tensors ({{[0-9]+}} values) within 0
//
// RUN: braidc %t.mlir --mesh dp=2,pp=2 --schedule zb-h1 --microbatches 4 --optimizer sgd --lr 1e30 -o %t.pp
// RUN: braid-run -n 4 %t.pp --steps 4 --seed 1 --save %t.ck/pp4 > /dev/null 2> %t.pp.err
// RUN: braid-run -n 4 %t.pp --steps 2 --seed 1 --save %t.ck/pp2 > /dev/null 2>&1
// RUN: %PYTHON %S/Inputs/compare-checkpoint.py %t.ck/pp4/checkpoint.safetensors %t.ck/pp2/checkpoint.safetensors --rtol 0 | FileCheck %s --check-prefix=SAME
// RUN: grep -c "warning: step" %t.pp.err | FileCheck %s --check-prefix=THREE
// THREE: 3
//
// braid-eval skips the same steps and warns the same way.
// RUN: braid-opt %t.mlir --braid-autodiff --braid-train-step="lr=1e30 optimizer=sgd" -o %t.step.mlir
// RUN: braid-eval %t.step.mlir --steps 4 --seed 1 --save-weights %t.eval4.w > /dev/null 2> %t.eval.err
// RUN: braid-eval %t.step.mlir --steps 2 --seed 1 --save-weights %t.eval2.w > /dev/null 2>&1
// RUN: FileCheck %s --check-prefix=WARN < %t.eval.err
// RUN: %PYTHON %S/Inputs/compare-checkpoint.py %t.eval4.w %t.eval2.w --rtol 0 | FileCheck %s --check-prefix=SAMEW
// SAMEW: ok: 36 tensors ({{[0-9]+}} values) within 0
//
// RUN: not %t.one --steps 4 --seed 1 --stop-on-nonfinite 2>&1 | FileCheck %s --check-prefix=STOP
// STOP: warning: step 1:
// STOP-NEXT: error: step 1: stopping on a non-finite loss or gradient norm (--stop-on-nonfinite)
// RUN: not braid-eval %t.step.mlir --steps 4 --seed 1 --stop-on-nonfinite 2>&1 | FileCheck %s --check-prefix=EVALSTOP
// EVALSTOP: braid-eval: error: step 1: stopping on a non-finite loss or gradient norm (--stop-on-nonfinite)
