// Tests that braid-pipeline-outline moves the data-parallel all_reduces of
// the gradients the gradient function returns out of the W pieces into the
// braid.pipeline callers, so that they sum the means once per step rather
// than every micro-batch's gradient (as Megatron reduces gradients after
// the pipeline): the bias's, and the layer's, whose all_reduce first leaves
// the layer body of @block.W for one of the stacked gradient after each
// repeat. Each moved reduction keeps its chunk (buckets stay per stage).
//
// RUN: braid-opt %s --braid-pipeline-split="stages=2" --braid-autodiff --braid-train-step="accumulation=2 pipeline" --braid-shard="dp=2" --braid-propagate-sharding --braid-partition --braid-pipeline-outline | FileCheck %s

// The layer's weight gradient is yielded unreduced.
// CHECK-LABEL: braid.layer @block.W(
// CHECK-NOT: braid.all_reduce
// CHECK: braid.yield

// Chunk 1's W returns the layer's stacked gradient and the bias's
// unreduced (its local sum over the batch).
// CHECK-LABEL: func.func @forward_grad.c1.W(
// CHECK-NOT: braid.all_reduce
// CHECK: %[[G:.*]] = braid.reduce sum
// CHECK-NOT: braid.all_reduce
// CHECK: %[[S:.*]] = braid.repeat @block.W(
// CHECK-NOT: braid.all_reduce
// CHECK: return %[[S]], %[[G]] :
// CHECK-LABEL: func.func @forward_grad.c0.W(
// CHECK-NOT: braid.all_reduce
// CHECK: return

// The step reduces the means over dp, after the pipeline, each tagged with
// the chunk that computed it (the loss's too: pipeline-outline-loss-dp.mlir).
// CHECK-LABEL: func.func @train_step(
// CHECK: %[[P:.*]]:4 = braid.pipeline @forward_grad(
// CHECK-NEXT: braid.all_reduce sum %[[P]]#0 on @mesh ["dp"] {{{.*}}braid.chunk = 1 : i64} : tensor<1x8x8xf32>
// CHECK-NEXT: braid.all_reduce sum %[[P]]#1 on @mesh ["dp"] {{{.*}}braid.chunk = 0 : i64} : tensor<1x8x8xf32>
// CHECK-NEXT: braid.all_reduce sum %[[P]]#2 on @mesh ["dp"] {{{.*}}braid.chunk = 1 : i64} : tensor<f32>
// CHECK-NEXT: braid.all_reduce sum %[[P]]#3 on @mesh ["dp"] {{{.*}}braid.chunk = 1 : i64} : tensor<8xf32>

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
