// Tests that braid-pipeline-outline moves a tied parameter's gradient sum
// (the embedding's and the head's partials, from the first and the last
// chunk) out of the gradient function into its braid.pipeline callers, so
// that no W piece waits for another chunk's W; without a caller the sum
// stays in the first chunk's W piece.
//
// RUN: braid-opt %s --braid-pipeline-split="stages=2" --braid-autodiff --braid-train-step="accumulation=2 pipeline" --braid-pipeline-outline | FileCheck %s
// RUN: braid-opt %s --braid-pipeline-split="stages=2" --braid-autodiff --braid-pipeline-outline | FileCheck %s --check-prefix=NOCALLER

// The pipeline returns both partials last (the head's from chunk 1's W, the
// embedding's from chunk 0's); the step adds their means, outside any
// chunk, and updates the parameter with the sum.
// CHECK-LABEL: func.func @forward_grad(
// CHECK-SAME: -> (tensor<f32>, tensor<2x8x8xf32> {braid.gradient_of = "h.{}.w", braid.instances = array<i64: 0, 2>}, tensor<16x8xf32>, tensor<16x8xf32>)
// CHECK: %[[W1:.*]] = call @forward_grad.c1.W(
// CHECK: %[[W0:.*]]:2 = call @forward_grad.c0.W(
// CHECK-NEXT: return %{{.*}}, %[[W0]]#0, %[[W1]], %[[W0]]#1 :

// Chunk 0's W reads nothing of chunk 1's: its embedding partial is a result.
// CHECK-LABEL: func.func @forward_grad.c0.W(
// CHECK-SAME: -> (tensor<2x8x8xf32>, tensor<16x8xf32>)
// CHECK-NOT: braid.add
// CHECK: return

// CHECK-LABEL: func.func @train_step(
// CHECK: %[[P:.*]]:4 = braid.pipeline @forward_grad(
// CHECK-NEXT: %[[SUM:.*]] = braid.add %[[P]]#2, %[[P]]#3 : (tensor<16x8xf32>, tensor<16x8xf32>) -> tensor<16x8xf32>
// CHECK: braid.adamw_update %{{.*}}, %[[SUM]],

// NOCALLER-LABEL: func.func @forward_grad.c0.W(
// NOCALLER-SAME: %arg4: tensor<16x8xf32>) -> (tensor<16x8xf32>, tensor<2x8x8xf32>)
// NOCALLER: %[[G:.*]] = braid.embedding_grad
// NOCALLER: braid.add %arg{{[0-9]+}}, %[[G]]

braid.layer @block(%x: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %w = braid.param "w" {init = #braid.init<normal(0.1)>} : tensor<8x8xf32>
  %y = braid.matmul %x, %w : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %z = braid.relu %y : tensor<2x4x8xf32>
  braid.yield %z : tensor<2x4x8xf32>
}

func.func @forward(%tokens: tensor<2x4xi32> {braid.name = "tokens", braid.range = 16 : i64},
                   %labels: tensor<2x4xi32> {braid.name = "labels", braid.range = 16 : i64}) -> tensor<f32> {
  %emb = braid.param "emb" {init = #braid.init<normal(0.1)>} : tensor<16x8xf32>
  %x = braid.embedding %emb, %tokens : (tensor<16x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
  %h = braid.repeat @block(%x) {prefix = "h", count = 2 : i64} : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %logits = braid.matmul %h, %emb {transpose_b} : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
  %loss = braid.cross_entropy %logits, %labels : (tensor<2x4x16xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
