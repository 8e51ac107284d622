// Tests braid-train-step's defer-validation: each step validates the
// previous step's optimistic update after its own forward and backward
// pass, from what that step left in transient slots (the state it started
// from, its gradient, its loss and its sum of squares). A step after a
// rolled-back one (clipped or not finite) skips its update and reports
// `retry`, and braid-eval runs it again; a last call with final = 1
// validates the last step. Training is bit-identical to the plain step,
// parameters and optimizer state (the transient slots are not saved):
// 6 AdamW steps of which step 3 is clipped, serially and under dp2
// ZeRO-3 and dp2 x tp2; an injected overflow (lr 1e30; AdamW and SGD with
// momentum) skips the same steps with the same warnings; warm-up and cosine
// decay (the redo uses the previous step's rate); pipelines. Under ZeRO-3 the sum of
// squares is stored as each device's share and reduced where the next step
// reads it, at its start (braid-partition).
//
// RUN: %PYTHON -m braid.models gpt --layers 2 --hidden 32 --heads 4 --seq 8 --vocab 64 --batch 4 -o %t.mlir
// RUN: braid-opt %t.mlir --braid-autodiff --braid-train-step="lr=0.01 clip-norm=3.0 defer-validation" -o %t.dv.mlir
// RUN: FileCheck %s < %t.dv.mlir
// RUN: braid-opt %t.mlir --braid-autodiff --braid-train-step="lr=0.01 clip-norm=3.0" -o %t.plain.mlir
// RUN: braid-eval %t.plain.mlir --steps 6 --seed 1 --save-weights %t.plain.w --save-optimizer-state %t.plain.s > %t.plain.out
// RUN: braid-eval %t.dv.mlir --steps 6 --seed 1 --save-weights %t.dv.w --save-optimizer-state %t.dv.s > %t.dv.out
// RUN: diff %t.plain.out %t.dv.out
// RUN: cmp %t.plain.w %t.dv.w
// RUN: cmp %t.plain.s %t.dv.s
// RUN: FileCheck %s --check-prefix=CLIPPED < %t.dv.out
// CLIPPED: step 2 {{.*}} grad_norm 2.6
// CLIPPED: step 3 {{.*}} grad_norm 3.3
// CLIPPED: step 5 {{.*}} grad_norm 1.5
//
// Its saved state resumes in the plain step and the other way round (the
// transient slots start as zeros: nothing pending).
// RUN: braid-eval %t.plain.mlir --steps 2 --seed 1 --weights %t.dv.w --optimizer-state %t.dv.s > %t.resume.plain
// RUN: braid-eval %t.dv.mlir --steps 2 --seed 1 --weights %t.plain.w --optimizer-state %t.plain.s > %t.resume.dv
// RUN: diff %t.resume.plain %t.resume.dv
//
// RUN: braid-opt %t.plain.mlir --braid-shard="dp=2 zero=3" --braid-propagate-sharding --braid-partition -o %t.z3.mlir
// RUN: braid-opt %t.dv.mlir --braid-shard="dp=2 zero=3" --braid-propagate-sharding --braid-partition -o %t.z3dv.mlir
// RUN: FileCheck %s --check-prefix=ZERO3 < %t.z3dv.mlir
// RUN: braid-eval %t.z3.mlir --mesh mesh --steps 5 --seed 1 --save-weights %t.z3.w > %t.z3.out
// RUN: braid-eval %t.z3dv.mlir --mesh mesh --steps 5 --seed 1 --save-weights %t.z3dv.w > %t.z3dv.out
// RUN: diff %t.z3.out %t.z3dv.out
// RUN: cmp %t.z3.w %t.z3dv.w
// RUN: braid-opt %t.plain.mlir --braid-shard="dp=2 tp=2" --braid-propagate-sharding --braid-partition -o %t.tp.mlir
// RUN: braid-opt %t.dv.mlir --braid-shard="dp=2 tp=2" --braid-propagate-sharding --braid-partition -o %t.tpdv.mlir
// RUN: braid-eval %t.tp.mlir --mesh mesh --steps 5 --seed 1 --save-weights %t.tp.w > %t.tp.out
// RUN: braid-eval %t.tpdv.mlir --mesh mesh --steps 5 --seed 1 --save-weights %t.tpdv.w > %t.tpdv.out
// RUN: diff %t.tp.out %t.tpdv.out
// RUN: cmp %t.tp.w %t.tpdv.w
//
// RUN: braid-opt %t.mlir --braid-autodiff --braid-train-step="lr=1e30 defer-validation" -o %t.inf.mlir
// RUN: braid-opt %t.mlir --braid-autodiff --braid-train-step="lr=1e30" -o %t.infplain.mlir
// RUN: braid-eval %t.inf.mlir --steps 4 --seed 1 --save-weights %t.inf.w --save-optimizer-state %t.inf.s > %t.inf.out 2> %t.inf.err
// RUN: braid-eval %t.infplain.mlir --steps 4 --seed 1 --save-weights %t.infplain.w --save-optimizer-state %t.infplain.s > %t.infplain.out 2> %t.infplain.err
// RUN: diff %t.infplain.out %t.inf.out
// RUN: diff %t.infplain.err %t.inf.err
// RUN: cmp %t.inf.w %t.infplain.w
// RUN: cmp %t.inf.s %t.infplain.s
// RUN: FileCheck %s --check-prefix=WARN < %t.inf.err
// WARN-NOT: warning: step 0
// WARN: warning: step 1: the loss ({{-?nan|-?inf}}) or the gradient norm ({{-?nan|-?inf}}) is not finite: the update was skipped
// WARN-NEXT: warning: step 2:
// WARN-NEXT: warning: step 3:
// RUN: not braid-eval %t.inf.mlir --steps 4 --seed 1 --stop-on-nonfinite > %t.stop.out 2> %t.stop.err
// RUN: FileCheck %s --check-prefix=STOP < %t.stop.err
// STOP: warning: step 1:
// STOP-NEXT: error: step 1: stopping on a non-finite loss or gradient norm (--stop-on-nonfinite)
// RUN: braid-opt %t.mlir --braid-autodiff --braid-train-step="lr=1e30 optimizer=sgd momentum=0.9 defer-validation" -o %t.sgd.mlir
// RUN: braid-opt %t.mlir --braid-autodiff --braid-train-step="lr=1e30 optimizer=sgd momentum=0.9" -o %t.sgdplain.mlir
// RUN: braid-eval %t.sgd.mlir --steps 4 --seed 1 --save-weights %t.sgd.w --save-optimizer-state %t.sgd.s > /dev/null 2>&1
// RUN: braid-eval %t.sgdplain.mlir --steps 4 --seed 1 --save-weights %t.sgdplain.w --save-optimizer-state %t.sgdplain.s > /dev/null 2>&1
// RUN: cmp %t.sgd.w %t.sgdplain.w
// RUN: cmp %t.sgd.s %t.sgdplain.s
//
// RUN: braid-opt %t.mlir --braid-autodiff --braid-train-step="lr=0.01 clip-norm=2.0 warmup-steps=2 total-steps=6 decay=cosine defer-validation" -o %t.cos.mlir
// RUN: braid-opt %t.mlir --braid-autodiff --braid-train-step="lr=0.01 clip-norm=2.0 warmup-steps=2 total-steps=6 decay=cosine" -o %t.cosplain.mlir
// RUN: braid-eval %t.cos.mlir --steps 6 --seed 1 --save-weights %t.cos.w > %t.cos.out
// RUN: braid-eval %t.cosplain.mlir --steps 6 --seed 1 --save-weights %t.cosplain.w > %t.cosplain.out
// RUN: diff %t.cosplain.out %t.cos.out
// RUN: cmp %t.cos.w %t.cosplain.w
//
// In a pipeline (pp2 1F1B, 4 micro-batches; dp2 x pp2 ZeRO-3 ZB-V) the
// step is bit-identical to the plain pipelined step too; the loss, the
// last stage's, is stored as a pending sum as well (braid-lower-to-emitc
// stores each stage's share of both and sums them over the pipeline where
// the next step reads them).
// RUN: braid-opt %t.mlir --braid-pipeline-split=stages=2 --braid-autodiff --braid-train-step="lr=0.01 clip-norm=3.0 accumulation=4 pipeline" --braid-pipeline-outline --braid-pipeline-schedule="schedule=1f1b microbatches=4" -o %t.pp.mlir
// RUN: braid-opt %t.mlir --braid-pipeline-split=stages=2 --braid-autodiff --braid-train-step="lr=0.01 clip-norm=3.0 accumulation=4 pipeline defer-validation" --braid-pipeline-outline --braid-pipeline-schedule="schedule=1f1b microbatches=4" -o %t.ppdv.mlir
// RUN: FileCheck %s --check-prefix=PIPE < %t.ppdv.mlir
// RUN: braid-eval %t.pp.mlir --pipeline --steps 6 --seed 1 --save-weights %t.pp.w --save-optimizer-state %t.pp.s > %t.pp.out
// RUN: braid-eval %t.ppdv.mlir --pipeline --steps 6 --seed 1 --save-weights %t.ppdv.w --save-optimizer-state %t.ppdv.s > %t.ppdv.out
// RUN: diff %t.pp.out %t.ppdv.out
// RUN: cmp %t.pp.w %t.ppdv.w
// RUN: cmp %t.pp.s %t.ppdv.s
// RUN: FileCheck %s --check-prefix=PPCLIPPED < %t.ppdv.out
// PPCLIPPED: step 2 {{.*}} grad_norm 3.05
// RUN: braid-opt %t.mlir --braid-pipeline-split="stages=2 chunks=2 placement=v" --braid-autodiff --braid-train-step="lr=0.01 clip-norm=3.0 accumulation=4 pipeline" --braid-shard="dp=2 zero=3" --braid-propagate-sharding --braid-partition --braid-pipeline-outline --braid-pipeline-schedule="schedule=zb-v microbatches=4" -o %t.dppp.mlir
// RUN: braid-opt %t.mlir --braid-pipeline-split="stages=2 chunks=2 placement=v" --braid-autodiff --braid-train-step="lr=0.01 clip-norm=3.0 accumulation=4 pipeline defer-validation" --braid-shard="dp=2 zero=3" --braid-propagate-sharding --braid-partition --braid-pipeline-outline --braid-pipeline-schedule="schedule=zb-v microbatches=4" -o %t.dpppdv.mlir
// RUN: braid-eval %t.dppp.mlir --pipeline --mesh mesh --steps 5 --seed 1 --save-weights %t.dppp.w > %t.dppp.out
// RUN: braid-eval %t.dpppdv.mlir --pipeline --mesh mesh --steps 5 --seed 1 --save-weights %t.dpppdv.w > %t.dpppdv.out
// RUN: diff %t.dppp.out %t.dpppdv.out
// RUN: cmp %t.dppp.w %t.dpppdv.w
// PIPE-LABEL: func.func @train_step
// PIPE-NEXT: braid.param "train_step.pending.sum_squares" {braid.pending_sum, braid.transient
// PIPE-NEXT: braid.param "train_step.pending.loss" {braid.pending_sum, braid.transient
// PIPE: braid.pipeline
// PIPE: braid.store_param "train_step.pending.sum_squares", %{{.*}} {braid.pending_sum}
// PIPE: braid.store_param "train_step.pending.loss", %{{.*}} {braid.pending_sum}
//
// RUN: not braid-opt %t.mlir --braid-autodiff --braid-train-step="defer-validation post-validate" -o /dev/null 2>&1 | FileCheck %s --check-prefix=BOTH
// BOTH: braid-train-step: defer-validation and post-validate exclude each other

// The layer's update: the previous step's redo from the transient slots
// (with the previous rate and step), selected against the current state,
// stored back into the slots with this step's gradient, then this step's
// update from the validated state with the update scale.
// CHECK-LABEL: braid.layer @train_step.h.update
// CHECK-SAME: (%[[LR:[^:]*]]: tensor<f32>, %[[PLR:[^:]*]]: tensor<f32>, %[[STEP:[^:]*]]: tensor<i64>, %[[PSTEP:[^:]*]]: tensor<i64>, %[[D:[^:]*]]: tensor<f32>, %[[REDO:[^:]*]]: tensor<f32>, %[[SCALE:[^:]*]]: tensor<f32>
// CHECK: %[[SAVED:.*]] = braid.param "mlp.proj.bias.pending" {braid.transient, init = #braid.init<zeros>, state}
// CHECK: %[[GPREV:.*]] = braid.param "mlp.proj.bias.pending.grad" {braid.transient
// CHECK: %[[REDONE:.*]], %{{.*}}, %{{.*}} = braid.adamw_update %[[SAVED]], %[[GPREV]], {{.*}}, %[[PLR]], %[[PSTEP]], %[[REDO]]
// CHECK: %[[CUR:.*]] = braid.param "mlp.proj.bias" {
// CHECK: %[[VALID:.*]] = braid.select %[[D]], %[[REDONE]], %[[CUR]]
// CHECK: braid.store_param "mlp.proj.bias.pending", %[[VALID]]
// CHECK: braid.store_param "mlp.proj.bias.pending.grad", %[[G:[^ ]*]]
// CHECK: %[[NEW:.*]], %{{.*}}, %{{.*}} = braid.adamw_update %[[VALID]], %[[G]], {{.*}}, %[[LR]], %[[STEP]], %[[SCALE]]
// CHECK: braid.store_param "mlp.proj.bias", %[[NEW]]
// The step: what the previous call left pending is read first; this
// step's forward and backward pass; the previous norm, scale and retry;
// the updates; what the next call validates.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %{{[^:]*}}: tensor<i64> {braid.name = "step"}, %[[PREV:[^:]*]]: tensor<i64> {braid.name = "previous_step"}, %[[FINAL:[^:]*]]: tensor<f32> {braid.name = "final"})
// CHECK-SAME: {braid.name = "loss"}, {{.*}} {braid.name = "previous_grad_norm"}, {{.*}} {braid.name = "retry"})
// CHECK-NEXT: %[[SQ:.*]] = braid.param "train_step.pending.sum_squares" {braid.pending_sum, braid.transient
// CHECK-NEXT: %[[PLOSS:.*]] = braid.param "train_step.pending.loss" {braid.transient
// CHECK-NEXT: %[[ACTIVE:.*]] = braid.param "train_step.pending.active" {braid.transient
// CHECK: braid.repeat @block.F
// CHECK: braid.repeat @block.W
// CHECK: braid.lr_schedule constant %[[PREV]]
// CHECK: %[[NORM:.*]] = braid.sqrt %[[SQ]]
// CHECK: braid.select %[[ACTIVE]]
// CHECK: %[[RETRY:.*]] = braid.select
// CHECK: %[[SKIP:.*]] = braid.select %[[FINAL]], %{{.*}}, %[[RETRY]]
// CHECK: braid.repeat @train_step.h.update
// CHECK: braid.store_param "train_step.pending.sum_squares", %{{.*}} {braid.pending_sum}
// CHECK: braid.store_param "train_step.pending.loss"
// CHECK: braid.store_param "train_step.pending.active"
// CHECK: return %{{.*}}, %{{.*}}, %[[NORM]], %[[RETRY]]

// ZERO3-LABEL: func.func @train_step
// ZERO3-NEXT: %[[SQ:.*]] = braid.param "train_step.pending.sum_squares" {braid.pending_sum, braid.transient
// ZERO3-NEXT: braid.all_reduce sum %[[SQ]] on @mesh ["dp"]
// ZERO3: braid.store_param "train_step.pending.sum_squares", %{{.*}} {braid.pending_sum} : tensor<f32>
// ZERO3-NEXT: braid.all_reduce sum %{{.*}} on @mesh ["dp"]
// ZERO3-SAME: cross_entropy
