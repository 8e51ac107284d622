// Tests that braid-pipeline-outline gives each chunk and phase its own copy
// of an op that reads only parameters (bf16-mixed's bf16 working copy of a
// tied weight, here the embedding and the head on two chunks), as it reads
// parameters themselves where used. Left on the first chunk only, the copy
// would be a result of chunk 0's F and reach chunk 1 with every micro-batch;
// one copy per chunk only, F would keep it for B per micro-batch.
//
// RUN: braid-opt %s --braid-pipeline-split="stages=2" --braid-autodiff --braid-train-step="accumulation=2 pipeline" --braid-pipeline-outline | FileCheck %s

// Chunk 0's F gives chunk 1 the activation only, not the working copy.
// CHECK-LABEL: func.func @forward_grad.c0.F(
// CHECK-SAME: -> (tensor<2x4x8xbf16>,
// CHECK-NOT: tensor<16x8xbf16>) attributes
// CHECK: braid.param "emb"
// CHECK-NEXT: braid.convert %{{.*}} {braid.chunk = 0 : i64, braid.phase = "F"} : tensor<16x8xf32> to tensor<16x8xbf16>
// CHECK: braid.embedding

// Chunk 1's F reads the parameter and makes its own working copy.
// CHECK-LABEL: func.func @forward_grad.c1.F(
// CHECK-NOT: tensor<16x8xbf16>{{.*}}) ->
// CHECK: %[[EMB:.*]] = braid.param "emb"
// CHECK: %[[COPY:.*]] = braid.convert %[[EMB]] {braid.chunk = 1 : i64, braid.phase = "F"} : tensor<16x8xf32> to tensor<16x8xbf16>
// CHECK: braid.matmul %{{.*}}, %[[COPY]]

// So does chunk 1's B, for the logits' input gradient.
// CHECK-LABEL: func.func @forward_grad.c1.B(
// CHECK-NOT: tensor<16x8xbf16>{{.*}}) ->
// CHECK: %[[EMB:.*]] = braid.param "emb"
// CHECK: %[[COPY:.*]] = braid.convert %[[EMB]] {braid.chunk = 1 : i64, braid.phase = "B"} : tensor<16x8xf32> to tensor<16x8xbf16>
// CHECK: braid.matmul %{{.*}}, %[[COPY]]

braid.layer @block(%x: tensor<2x4x8xbf16>) -> tensor<2x4x8xbf16> {
  %w = braid.param "w" {init = #braid.init<normal(0.1)>} : tensor<8x8xf32>
  %w16 = braid.convert %w : tensor<8x8xf32> to tensor<8x8xbf16>
  %y = braid.matmul %x, %w16 : (tensor<2x4x8xbf16>, tensor<8x8xbf16>) -> tensor<2x4x8xbf16>
  %z = braid.relu %y : tensor<2x4x8xbf16>
  braid.yield %z : tensor<2x4x8xbf16>
}

func.func @forward(%tokens: tensor<2x4xi32> {braid.name = "tokens", braid.range = 16 : i64},
                   %labels: tensor<2x4xi32> {braid.name = "labels", braid.range = 16 : i64}) -> tensor<f32> {
  %emb = braid.param "emb" {init = #braid.init<normal(0.1)>} : tensor<16x8xf32>
  %emb16 = braid.convert %emb : tensor<16x8xf32> to tensor<16x8xbf16>
  %x = braid.embedding %emb16, %tokens : (tensor<16x8xbf16>, tensor<2x4xi32>) -> tensor<2x4x8xbf16>
  %h = braid.repeat @block(%x) {prefix = "h", count = 2 : i64} : (tensor<2x4x8xbf16>) -> tensor<2x4x8xbf16>
  %logits = braid.matmul %h, %emb16 {transpose_b} : (tensor<2x4x8xbf16>, tensor<16x8xbf16>) -> tensor<2x4x16xbf16>
  %l32 = braid.convert %logits : tensor<2x4x16xbf16> to tensor<2x4x16xf32>
  %loss = braid.cross_entropy %l32, %labels : (tensor<2x4x16xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
