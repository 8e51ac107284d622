// RUN: braid-opt %s --braid-autodiff | FileCheck %s

// Tests that a parameter's working copy read by several ops (bf16-mixed's
// bf16 copy of a tied f32 master: GPT's wte in the embedding and the head,
// here on two pipeline chunks) has its partial gradients summed in the
// parameter's type: each contribution is converted back to f32 where it is
// made, on its op's chunk, and the f32 partials are added, as under f32, so
// braid-pipeline-outline can move that sum after the schedule. Summed in
// bf16 and converted after, the sum would be rounded to bf16 and the
// convert would keep it in the chunk's W piece. A working copy read once
// (wpe's) is converted back once, as before.

// CHECK-LABEL: func.func @forward_grad
// CHECK-SAME: -> (tensor<f32>, tensor<8x4xf32> {braid.gradient_of = "wpe"}, tensor<16x4xf32> {braid.gradient_of = "wte"})
// CHECK-NOT: braid.add {{.*}} -> tensor<16x4xbf16>
// CHECK: %[[HEAD:.*]] = braid.reduce sum {{.*}} {axes = array<i64: 0>, braid.chunk = 1 : i64, braid.phase = "W"} : (tensor<2x16x4xbf16>) -> tensor<16x4xbf16>
// CHECK-NEXT: %[[HEAD32:.*]] = braid.convert %[[HEAD]] {braid.chunk = 1 : i64, braid.phase = "W"} : tensor<16x4xbf16> to tensor<16x4xf32>
// CHECK-NOT: braid.add {{.*}} -> tensor<16x4xbf16>
// CHECK: %[[EMB:.*]] = braid.embedding_grad {{.*}} {braid.chunk = 0 : i64, braid.phase = "W"} : (tensor<2x8xi32>, tensor<2x8x4xbf16>) -> tensor<16x4xbf16>
// CHECK-NEXT: %[[EMB32:.*]] = braid.convert %[[EMB]] {braid.chunk = 0 : i64, braid.phase = "W"} : tensor<16x4xbf16> to tensor<16x4xf32>
// CHECK-NEXT: %[[SUM:.*]] = braid.add %[[HEAD32]], %[[EMB32]] {braid.chunk = 0 : i64, braid.phase = "W"} : (tensor<16x4xf32>, tensor<16x4xf32>) -> tensor<16x4xf32>
// CHECK-NOT: braid.add {{.*}} -> tensor<16x4xbf16>
// CHECK: %[[WPE:.*]] = braid.convert %{{.*}} {braid.chunk = 0 : i64, braid.phase = "W"} : tensor<8x4xbf16> to tensor<8x4xf32>
// CHECK: return %{{.*}}, %[[WPE]], %[[SUM]] :
func.func @forward(%tokens: tensor<2x8xi32> {braid.name = "tokens", braid.range = 16 : i64}, %labels: tensor<2x8xi32> {braid.name = "labels", braid.range = 16 : i64}) -> tensor<f32> {
  %wte = braid.param "wte" {braid.chunk = 0 : i64, init = #braid.init<normal(0.02)>} : tensor<16x4xf32>
  %wte16 = braid.convert %wte {braid.chunk = 0 : i64} : tensor<16x4xf32> to tensor<16x4xbf16>
  %wpe = braid.param "wpe" {braid.chunk = 0 : i64, init = #braid.init<normal(0.01)>} : tensor<8x4xf32>
  %wpe16 = braid.convert %wpe {braid.chunk = 0 : i64} : tensor<8x4xf32> to tensor<8x4xbf16>
  %e = braid.embedding %wte16, %tokens {braid.chunk = 0 : i64} : (tensor<16x4xbf16>, tensor<2x8xi32>) -> tensor<2x8x4xbf16>
  %x = braid.add %e, %wpe16 {braid.chunk = 0 : i64} : (tensor<2x8x4xbf16>, tensor<8x4xbf16>) -> tensor<2x8x4xbf16>
  %logits = braid.matmul %x, %wte16 {braid.chunk = 1 : i64, transpose_b} : (tensor<2x8x4xbf16>, tensor<16x4xbf16>) -> tensor<2x8x16xbf16>
  %l32 = braid.convert %logits {braid.chunk = 1 : i64} : tensor<2x8x16xbf16> to tensor<2x8x16xf32>
  %loss = braid.cross_entropy %l32, %labels {braid.chunk = 1 : i64} : (tensor<2x8x16xf32>, tensor<2x8xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
