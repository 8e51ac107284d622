// Tests that with data parallelism the tied parameter's gradient sum, moved
// out of the gradient function by braid-pipeline-outline, is reduced over dp
// by an all_reduce of no chunk (it sums partials of chunks 0 and 1), while
// the reduction of a parameter of chunk 0 alone (here `pos`, GPT's wpe)
// keeps chunk 0: braid-bucket-collectives then never fuses the two, so the
// first stage reduces pos's gradient itself instead of sending it, in one
// bucket with the tied sum, to the stage that adds the tied partials.
//
// RUN: braid-opt %s --braid-pipeline-split="stages=2" --braid-autodiff --braid-train-step="accumulation=2 pipeline" --braid-shard="dp=2" --braid-propagate-sharding --braid-partition --braid-pipeline-outline | FileCheck %s
// RUN: braid-opt %s --braid-pipeline-split="stages=2" --braid-autodiff --braid-train-step="accumulation=2 pipeline" --braid-shard="dp=2" --braid-propagate-sharding --braid-partition --braid-pipeline-outline --braid-bucket-collectives | FileCheck %s --check-prefix=BUCKET

// The pipeline returns the unreduced gradients: the layers', emb's two
// partials (the head's and the embedding's) and pos's; and the local loss
// (pipeline-outline-loss-dp.mlir), summed over dp on chunk 1.
// CHECK-LABEL: func.func @train_step(
// CHECK: %[[P:.*]]:5 = braid.pipeline @forward_grad(
// CHECK: %[[SUM:.*]] = braid.add %[[P]]#1, %[[P]]#2 : (tensor<16x8xf32>, tensor<16x8xf32>) -> tensor<16x8xf32>
// CHECK-NEXT: braid.all_reduce sum %[[P]]#3 on @mesh ["dp"] {braid.cause = "{{[^"]*}}", braid.chunk = 1 : i64} : tensor<f32>
// CHECK-NEXT: braid.all_reduce sum %[[P]]#4 on @mesh ["dp"] {braid.cause = "{{[^"]*}}", braid.chunk = 0 : i64} : tensor<4x8xf32>
// CHECK-NEXT: braid.all_reduce sum %[[SUM]] on @mesh ["dp"] {braid.cause = "{{[^"]*}}"} : tensor<16x8xf32>

// After bucketing, the tied sum is still reduced alone, and pos's gradient
// is not concatenated with it.
// BUCKET-LABEL: func.func @train_step(
// BUCKET: %[[P:.*]]:5 = braid.pipeline @forward_grad(
// BUCKET: %[[SUM:.*]] = braid.add %[[P]]#1, %[[P]]#2 :
// BUCKET-NOT: braid.concat {{.*}}%[[SUM]]
// BUCKET: braid.all_reduce sum %[[SUM]] on @mesh ["dp"] {braid.cause = "{{[^"]*}}"} : tensor<16x8xf32>

braid.layer @block(%x: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %w = braid.param "w" {init = #braid.init<normal(0.1)>} : tensor<8x8xf32>
  %y = braid.matmul %x, %w : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %z = braid.relu %y : tensor<2x4x8xf32>
  braid.yield %z : tensor<2x4x8xf32>
}

func.func @forward(%tokens: tensor<2x4xi32> {braid.name = "tokens", braid.range = 16 : i64},
                   %labels: tensor<2x4xi32> {braid.name = "labels", braid.range = 16 : i64}) -> tensor<f32> {
  %emb = braid.param "emb" {init = #braid.init<normal(0.1)>} : tensor<16x8xf32>
  %pos = braid.param "pos" {init = #braid.init<normal(0.1)>} : tensor<4x8xf32>
  %e = braid.embedding %emb, %tokens : (tensor<16x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
  %x = braid.add %e, %pos : (tensor<2x4x8xf32>, tensor<4x8xf32>) -> tensor<2x4x8xf32>
  %h = braid.repeat @block(%x) {prefix = "h", count = 2 : i64} : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %logits = braid.matmul %h, %emb {transpose_b} : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
  %loss = braid.cross_entropy %logits, %labels : (tensor<2x4x16xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
