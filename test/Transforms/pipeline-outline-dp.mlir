// Tests that braid-pipeline-outline moves the data-parallel all_reduce of a
// gradient the gradient function returns out of the W piece into the
// braid.pipeline callers, so that it sums the means once per step rather
// than every micro-batch's gradient (as Megatron reduces gradients after
// the pipeline); a reduction inside a layer body stays where it is.
//
// RUN: braid-opt %s --braid-pipeline-split="stages=2" --braid-autodiff --braid-train-step="accumulation=2 pipeline" --braid-shard="dp=2" --braid-propagate-sharding --braid-partition --braid-pipeline-outline | FileCheck %s

// The layer's weight gradient is still reduced in the layer body.
// CHECK-LABEL: braid.layer @block.W(
// CHECK: braid.all_reduce sum {{.*}} on @mesh ["dp"]

// Chunk 1's W returns the bias's gradient unreduced (its local sum over
// the batch).
// CHECK-LABEL: func.func @forward_grad.c1.W(
// CHECK-NOT: braid.all_reduce
// CHECK: %[[G:.*]] = braid.reduce sum
// CHECK-NOT: braid.all_reduce
// CHECK: return {{.*}}, %[[G]] :

// The step reduces the mean over dp, after the pipeline.
// CHECK-LABEL: func.func @train_step(
// CHECK: %[[P:.*]]:4 = braid.pipeline @forward_grad(
// CHECK-NEXT: braid.all_reduce sum %[[P]]#3 on @mesh ["dp"] {{.*}} : tensor<8xf32>

braid.layer @block(%x: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %w = braid.param "w" {init = #braid.init<normal(0.1)>} : tensor<8x8xf32>
  %y = braid.matmul %x, %w : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %z = braid.relu %y : tensor<2x4x8xf32>
  braid.yield %z : tensor<2x4x8xf32>
}

func.func @forward(%x: tensor<2x4x8xf32>,
                   %labels: tensor<2x4xi32> {braid.name = "labels", braid.range = 8 : i64}) -> tensor<f32> {
  %h = braid.repeat @block(%x) {prefix = "h", count = 2 : i64} : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %b = braid.param "b" {init = #braid.init<normal(0.1)>} : tensor<8xf32>
  %logits = braid.add %h, %b : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %loss = braid.cross_entropy %logits, %labels : (tensor<2x4x8xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
