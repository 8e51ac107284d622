// RUN: braid-opt %s --braid-autodiff --braid-train-step="lr=0.01 warmup-steps=2 total-steps=10 decay=cosine clip-norm=1.0" | FileCheck %s
// RUN: braid-opt %s --braid-autodiff --braid-train-step="optimizer=sgd momentum=0.9 nesterov=true accumulation=2" | FileCheck %s --check-prefix=SGD
// RUN: braid-opt %s --braid-autodiff --braid-train-step="accumulation=2 defer-w=true" | FileCheck %s --check-prefix=DEFER
// RUN: not braid-opt %s --braid-train-step 2>&1 | FileCheck %s --check-prefix=NOGRAD
// RUN: not braid-opt %s --braid-autodiff --braid-train-step=optimizer=lion 2>&1 | FileCheck %s --check-prefix=OPT
// RUN: not braid-opt %s --braid-autodiff --braid-train-step=accumulation=0 2>&1 | FileCheck %s --check-prefix=ACC
// RUN: braid-opt %s --braid-autodiff --braid-train-step="accumulation=3 pipeline" | FileCheck %s --check-prefix=PIPE
// RUN: not braid-opt %s --braid-autodiff --braid-train-step="accumulation=3 pipeline defer-w" 2>&1 | FileCheck %s --check-prefix=PIPEDEFER

// Tests the training step of a linear classifier: clipping, the guard that
// skips a non-finite step, the schedule, and an AdamW update stored back
// into the parameter and its state.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[X:.*]]: tensor<2x4xf32> {braid.name = "x"}, %{{.*}}: tensor<2xi32> {braid.name = "labels", braid.range = 3 : i64}, %[[STEP:.*]]: tensor<i64> {braid.name = "step"}
// CHECK-SAME: -> (tensor<f32> {braid.name = "loss"}, tensor<f32> {braid.name = "lr"}, tensor<f32> {braid.name = "grad_norm"})
// CHECK: %[[LOSS:.*]] = braid.cross_entropy
// CHECK: %[[G:.*]] = braid.matmul %[[X]], %{{.*}} {braid.phase = "W", transpose_a}
// CHECK: %[[SQ:.*]] = braid.sum_squares %[[G]] : (tensor<4x3xf32>) -> tensor<f32>
// CHECK: %[[NORM:.*]] = braid.sqrt %[[SQ]] : tensor<f32>
// CHECK: %[[CLIP:.*]] = braid.clip_coefficient %[[NORM]] {max_norm = 1.000000e+00 : f64}
// A non-finite loss or norm makes the scale non-finite (the update skips).
// CHECK: %[[ZERO:.*]] = braid.constant dense<0.000000e+00> : tensor<f32>
// CHECK: %[[ZN:.*]] = braid.mul %[[ZERO]], %[[NORM]]
// CHECK: %[[ZL:.*]] = braid.mul %[[ZERO]], %[[LOSS]]
// CHECK: %[[GUARD:.*]] = braid.add %[[ZN]], %[[ZL]]
// CHECK: %[[SCALE:.*]] = braid.add %[[CLIP]], %[[GUARD]]
// CHECK: %[[LR:.*]] = braid.lr_schedule cosine %[[STEP]] {lr = 1.000000e-02 : f64, total_steps = 10 : i64, warmup_steps = 2 : i64}
// CHECK: %[[W:.*]] = braid.param "w" {init = #braid.init<normal(5.000000e-01)>}
// CHECK: %[[M:.*]] = braid.param "w.adamw.m" {init = #braid.init<zeros>, state}
// CHECK: %[[V:.*]] = braid.param "w.adamw.v" {init = #braid.init<zeros>, state}
// CHECK: %[[P:.*]], %[[M2:.*]], %[[V2:.*]] = braid.adamw_update %[[W]], %[[G]], %[[M]], %[[V]], %[[LR]], %[[STEP]], %[[SCALE]]
// CHECK: braid.store_param "w", %[[P]]
// CHECK: braid.store_param "w.adamw.m", %[[M2]]
// CHECK: braid.store_param "w.adamw.v", %[[V2]]
// CHECK: return %[[LOSS]], %[[LR]], %[[NORM]]

// Tests accumulation over two micro-batches (one loop, running sums) and
// SGD with Nesterov momentum.
// SGD-LABEL: braid.layer @forward_grad.microbatch
// SGD-SAME: (%{{.*}}: tensor<f32>, %{{.*}}: tensor<4x3xf32>, %{{.*}}: tensor<2x4xf32>, %{{.*}}: tensor<2xi32>) -> (tensor<f32>, tensor<4x3xf32>)
// SGD-LABEL: func.func @train_step
// SGD-SAME: tensor<2x2x4xf32> {braid.name = "x"}, %{{.*}}: tensor<2x2xi32>
// SGD: braid.repeat @forward_grad.microbatch(%{{.*}}) {carried = 2 : i64, count = 2 : i64}
// SGD: braid.param "w.sgd.momentum" {init = #braid.init<zeros>, state}
// SGD: braid.sgd_update {{.*}} {momentum = 9.000000e-01 : f64, nesterov}

// Tests that defer-w runs every micro-batch's F and B before any W.
// DEFER: braid.layer @forward_grad.FB
// DEFER-NOT: braid.phase = "W"
// DEFER: braid.layer @forward_grad.W
// DEFER-LABEL: func.func @train_step
// DEFER: %[[FB:.*]]:3 = braid.repeat @forward_grad.FB(%{{.*}}) {carried = 0 : i64, count = 2 : i64}
// DEFER: braid.repeat @forward_grad.W(%{{.*}}, %[[FB]]#1, %[[FB]]#2) {carried = 1 : i64, count = 2 : i64}

// Tests that pipeline hands the micro-batches to braid.pipeline, which
// keeps @forward_grad a function that later passes can cut into pieces.
// PIPE-LABEL: func.func @train_step
// PIPE-SAME: tensor<3x2x4xf32> {braid.name = "x"}, %{{.*}}: tensor<3x2xi32>
// PIPE: %[[R:.*]]:2 = braid.pipeline @forward_grad(%arg0, %arg1) : (tensor<3x2x4xf32>, tensor<3x2xi32>) -> (tensor<f32>, tensor<4x3xf32>)
// PIPE: braid.adamw_update %{{.*}}, %[[R]]#1,
// PIPEDEFER: error: braid-train-step: defer-w does not apply to pipeline (the schedule orders the W pieces)

// NOGRAD: error: braid-train-step: no function @forward_grad; run braid-autodiff (entry=forward) first
// OPT: error: braid-train-step: optimizer must be adamw or sgd, got 'lion'
// ACC: error: braid-train-step: accumulation must be at least 1
func.func @forward(%x: tensor<2x4xf32> {braid.name = "x"},
                   %y: tensor<2xi32> {braid.name = "labels", braid.range = 3 : i64}) -> tensor<f32> {
  %w = braid.param "w" {init = #braid.init<normal(0.5)>} : tensor<4x3xf32>
  %l = braid.matmul %x, %w : (tensor<2x4xf32>, tensor<4x3xf32>) -> tensor<2x3xf32>
  %loss = braid.cross_entropy %l, %y : (tensor<2x3xf32>, tensor<2xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
