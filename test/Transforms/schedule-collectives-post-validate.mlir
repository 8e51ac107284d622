// Tests that braid-schedule-collectives overlaps the gradient norm's
// all_reduce with the optimistic updates of braid-train-step's
// post-validate: the all_reduce of the sum of squares (computed into a
// buffer of its own, not a parameter's) is not ordered against parameter
// stores, starts as soon as the gradient it sums is waited for, before the
// first update (which, writing parameter slots in place, is not pulled
// ahead of it), and is waited for where the norm is first used, after the
// last update. A collective of a view of a parameter read still keeps its
// place around the store of that parameter.
//
// RUN: braid-opt %s --split-input-file --braid-schedule-collectives | FileCheck %s
//
// The same on a GPT's dp2 ZeRO-2 and ZeRO-3 training steps (under ZeRO-2
// the norm's all_reduce is bucketed with the loss's), layers waiting for
// their gradient buckets in their bodies (across-repeats=false): started
// before the first adamw_update, waited for after the layers' update
// repeat, where the square root needs it.
// With the layers split at their gradient buckets (across-repeats, the
// pass's default), ZeRO-2 and ZeRO-3: the wait of the layers' bucket (a
// repeat's stacked future) reads no parameter, its reduction's operand
// being the bucket computed in the layer body, not a parameter's buffer,
// so it crosses the top-level updates' parameter stores and is placed
// where the layers' gradients are first needed, before the sums of
// squares of `@block.W.waited` (a repeat that only computes, pulled ahead
// like a pure op); the norm's all_reduce, which needs those, starts right
// after them, before the layers' update repeat, and is waited for after
// it. (Until 2026-12-03 such a wait counted as a parameter reader and was
// placed before the first top-level store: the layers' bucket overlapped
// at most the first update, the norm the rest.)
// Training is bit-identical to the plain step with blocking collectives
// (braid-eval, 4 steps, step 3 clipped).
//
// RUN: %PYTHON -m braid.models gpt --layers 2 --hidden 32 --heads 4 --seq 8 --vocab 64 --batch 4 -o %t.mlir
// RUN: braid-opt %t.mlir --braid-autodiff --braid-train-step="lr=0.01 clip-norm=3.0 post-validate" -o %t.pv.mlir
// RUN: braid-opt %t.pv.mlir --braid-shard="dp=2 zero=2" --braid-propagate-sharding --braid-partition --braid-bucket-collectives --braid-async-collectives --braid-schedule-collectives=across-repeats=false -o %t.z2.mlir
// RUN: FileCheck %s --check-prefix=GPT < %t.z2.mlir
// RUN: braid-opt %t.pv.mlir --braid-shard="dp=2 zero=3" --braid-propagate-sharding --braid-partition --braid-bucket-collectives --braid-async-collectives --braid-schedule-collectives=across-repeats=false -o %t.z3.mlir
// RUN: FileCheck %s --check-prefix=GPT < %t.z3.mlir
// RUN: braid-opt %t.pv.mlir --braid-shard="dp=2 zero=2" --braid-propagate-sharding --braid-partition --braid-bucket-collectives --braid-async-collectives --braid-schedule-collectives -o %t.z2across.mlir
// RUN: FileCheck %s --check-prefix=ACROSS < %t.z2across.mlir
// RUN: braid-opt %t.pv.mlir --braid-shard="dp=2 zero=3" --braid-propagate-sharding --braid-partition --braid-bucket-collectives --braid-async-collectives --braid-schedule-collectives -o %t.z3across.mlir
// RUN: FileCheck %s --check-prefix=ACROSS < %t.z3across.mlir
// RUN: braid-opt %t.mlir --braid-autodiff --braid-train-step="lr=0.01 clip-norm=3.0" --braid-shard="dp=2 zero=2" --braid-propagate-sharding --braid-partition -o %t.plain.mlir
// RUN: braid-eval %t.plain.mlir --mesh mesh --steps 4 --seed 1 --save-weights %t.plain.w > %t.plain.out
// RUN: braid-eval %t.z2.mlir --mesh mesh --steps 4 --seed 1 --save-weights %t.z2.w > %t.z2.out
// RUN: diff %t.plain.out %t.z2.out
// RUN: cmp %t.plain.w %t.z2.w
// RUN: braid-eval %t.z2across.mlir --mesh mesh --steps 4 --seed 1 --save-weights %t.z2across.w > %t.z2across.out
// RUN: diff %t.plain.out %t.z2across.out
// RUN: cmp %t.plain.w %t.z2across.w
// RUN: FileCheck %s --check-prefix=CLIPPED < %t.z2.out
// ZeRO-3 too, against its plain step (the weight files list the tensors in
// another order, so they are compared tensor by tensor, exactly).
// RUN: braid-opt %t.mlir --braid-autodiff --braid-train-step="lr=0.01 clip-norm=3.0" --braid-shard="dp=2 zero=3" --braid-propagate-sharding --braid-partition -o %t.plain3.mlir
// RUN: braid-eval %t.plain3.mlir --mesh mesh --steps 4 --seed 1 --save-weights %t.plain3.w > %t.plain3.out
// RUN: braid-eval %t.z3.mlir --mesh mesh --steps 4 --seed 1 --save-weights %t.z3.w > %t.z3.out
// RUN: diff %t.plain3.out %t.z3.out
// RUN: %PYTHON %S/../Integration/Inputs/compare-checkpoint.py %t.z3.w %t.plain3.w --rtol 0
// RUN: braid-eval %t.z3across.mlir --mesh mesh --steps 4 --seed 1 --save-weights %t.z3across.w > %t.z3across.out
// RUN: diff %t.plain3.out %t.z3across.out
// RUN: %PYTHON %S/../Integration/Inputs/compare-checkpoint.py %t.z3across.w %t.plain3.w --rtol 0
// RUN: FileCheck %s --check-prefix=CLIPPED < %t.z3.out
// CLIPPED: step 3 {{.*}} grad_norm 3.3

// GPT-LABEL: func.func @train_step
// GPT: braid.sum_squares
// GPT-NOT: braid.adamw_update
// GPT: %[[N:.*]] = braid.all_reduce_start sum
// GPT-NEXT: braid.adamw_update
// GPT: braid.repeat @train_step.h.update
// GPT-NOT: braid.sqrt
// GPT: %[[W:.*]] = braid.wait %[[N]]
// GPT-NOT: braid.adamw_update
// GPT: braid.sqrt
// GPT: braid.repeat @train_step.h.validate

// ACROSS-LABEL: func.func @train_step
// ACROSS: %[[L:.*]] = braid.repeat @block.W(
// ACROSS-NOT: braid.all_reduce_start
// ACROSS: braid.adamw_update
// ACROSS-NOT: braid.all_reduce_start
// ACROSS: braid.store_param "wte.weight",
// ACROSS-NOT: braid.all_reduce_start
// ACROSS: braid.wait %[[L]]
// ACROSS-NOT: braid.adamw_update
// ACROSS: braid.repeat @block.W.waited
// ACROSS-NOT: braid.adamw_update
// ACROSS: %[[N:.*]] = braid.all_reduce_start sum
// ACROSS-NEXT: braid.repeat @train_step.h.update
// ACROSS-NOT: braid.sqrt
// ACROSS: braid.wait %[[N]]
// ACROSS-NOT: braid.adamw_update
// ACROSS: braid.sqrt
// ACROSS: braid.repeat @train_step.h.validate

braid.mesh @mesh {axes = ["dp"], shape = array<i64: 2>}

// CHECK-LABEL: func.func @norm
// CHECK: %[[F:.*]] = braid.reduce_scatter_start
// CHECK: %[[G:.*]] = braid.wait %[[F]]
// CHECK-NEXT: %[[S:.*]] = braid.sum_squares %[[G]]
// CHECK-NEXT: %[[N:.*]] = braid.all_reduce_start sum %[[S]]
// CHECK-NEXT: braid.adamw_update %{{.*}}, %[[G]]
// CHECK: braid.store_param "p.adamw.v"
// CHECK: braid.adamw_update %{{.*}}, %[[G]]
// CHECK: braid.store_param "q.adamw.v"
// CHECK-NEXT: %[[W:.*]] = braid.wait %[[N]]
// CHECK-NEXT: %[[R:.*]] = braid.sqrt %[[W]]
// CHECK-NEXT: return %[[R]]
func.func @norm(%g: tensor<2x8xf32>, %lr: tensor<f32>, %step: tensor<i64>) -> tensor<f32> {
  %f = braid.reduce_scatter_start %g on @mesh ["dp"] {dim = 0 : i64} : tensor<2x8xf32> -> !braid.future<tensor<1x8xf32>>
  %w = braid.wait %f : !braid.future<tensor<1x8xf32>>
  %one = braid.constant dense<1.0> : tensor<f32>
  %p = braid.param "p" {init = #braid.init<ones>} : tensor<1x8xf32>
  %pm = braid.param "p.adamw.m" {init = #braid.init<zeros>, state} : tensor<1x8xf32>
  %pv = braid.param "p.adamw.v" {init = #braid.init<zeros>, state} : tensor<1x8xf32>
  %p1, %pm1, %pv1 = braid.adamw_update %p, %w, %pm, %pv, %lr, %step, %one : (tensor<1x8xf32>, tensor<1x8xf32>, tensor<1x8xf32>, tensor<1x8xf32>, tensor<f32>, tensor<i64>, tensor<f32>) -> (tensor<1x8xf32>, tensor<1x8xf32>, tensor<1x8xf32>)
  braid.store_param "p", %p1 : tensor<1x8xf32>
  braid.store_param "p.adamw.m", %pm1 : tensor<1x8xf32>
  braid.store_param "p.adamw.v", %pv1 : tensor<1x8xf32>
  %q = braid.param "q" {init = #braid.init<ones>} : tensor<1x8xf32>
  %qm = braid.param "q.adamw.m" {init = #braid.init<zeros>, state} : tensor<1x8xf32>
  %qv = braid.param "q.adamw.v" {init = #braid.init<zeros>, state} : tensor<1x8xf32>
  %q1, %qm1, %qv1 = braid.adamw_update %q, %w, %qm, %qv, %lr, %step, %one : (tensor<1x8xf32>, tensor<1x8xf32>, tensor<1x8xf32>, tensor<1x8xf32>, tensor<f32>, tensor<i64>, tensor<f32>) -> (tensor<1x8xf32>, tensor<1x8xf32>, tensor<1x8xf32>)
  braid.store_param "q", %q1 : tensor<1x8xf32>
  braid.store_param "q.adamw.m", %qm1 : tensor<1x8xf32>
  braid.store_param "q.adamw.v", %qv1 : tensor<1x8xf32>
  %s = braid.sum_squares %w : (tensor<1x8xf32>) -> tensor<f32>
  %n = braid.all_reduce_start sum %s on @mesh ["dp"] : tensor<f32> -> !braid.future<tensor<f32>>
  %nw = braid.wait %n : !braid.future<tensor<f32>>
  %r = braid.sqrt %nw : tensor<f32>
  return %r : tensor<f32>
}

// -----

// A reshape of a parameter read shares the parameter's buffer: its
// all_reduce stays after the store before it and is waited for before the
// store after it.

braid.mesh @mesh {axes = ["dp"], shape = array<i64: 2>}

// CHECK-LABEL: func.func @view
// CHECK: braid.store_param "r", %{{.*}}
// CHECK-NEXT: %[[P:.*]] = braid.param "r"
// CHECK-NEXT: %[[V:.*]] = braid.reshape %[[P]]
// CHECK-NEXT: %[[F:.*]] = braid.all_reduce_start sum %[[V]]
// CHECK-NEXT: %[[W:.*]] = braid.wait %[[F]]
// CHECK-NEXT: braid.store_param "r", %{{.*}}
func.func @view(%x: tensor<2x8xf32>, %y: tensor<2x8xf32>) -> tensor<16xf32> {
  braid.store_param "r", %x : tensor<2x8xf32>
  %p = braid.param "r" {init = #braid.init<ones>} : tensor<2x8xf32>
  %v = braid.reshape %p : (tensor<2x8xf32>) -> tensor<16xf32>
  %f = braid.all_reduce_start sum %v on @mesh ["dp"] : tensor<16xf32> -> !braid.future<tensor<16xf32>>
  %w = braid.wait %f : !braid.future<tensor<16xf32>>
  braid.store_param "r", %y : tensor<2x8xf32>
  return %w : tensor<16xf32>
}
