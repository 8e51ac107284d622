// RUN: braid-opt %s --braid-autodiff | FileCheck %s
// RUN: braid-opt %s --braid-autodiff=recompute=selective | FileCheck %s

// Tests that a layer's F does not save what B can have without saving: a
// parameter's bf16 working copy (braid.convert of a braid.param, as
// braid-mixed-precision writes it) and data movement of it (a transpose)
// are the same for every micro-batch, so B re-reads the parameter and
// re-rounds it instead of taking a copy per micro-batch in flight
// (training.md, "Precision: bf16 mixed"). What depends on the layer's input
// is still saved: the input converted to f32 for the layer norm, the
// norm's bf16 result (for W), the first matmul's result.

// CHECK-LABEL: braid.layer @block.F
// CHECK-SAME: (%{{.*}}: tensor<2x4x8xbf16>) -> (tensor<2x4x8xbf16>, tensor<2x4x8xf32>, tensor<2x4x16xbf16>, tensor<2x4x8xbf16>)
// CHECK: %[[X32:.*]] = braid.convert %arg0 {braid.phase = "F"} : tensor<2x4x8xbf16> to tensor<2x4x8xf32>
// CHECK: %[[N16:.*]] = braid.convert %{{.*}} {braid.phase = "F"} : tensor<2x4x8xf32> to tensor<2x4x8xbf16>
// CHECK: %[[H:.*]] = braid.matmul %[[N16]]
// CHECK: braid.yield %{{.*}}, %[[X32]], %[[H]], %[[N16]] : tensor<2x4x8xbf16>, tensor<2x4x8xf32>, tensor<2x4x16xbf16>, tensor<2x4x8xbf16>
// CHECK-LABEL: braid.layer @block.B
// CHECK-SAME: (%{{.*}}: tensor<2x4x8xbf16>, %{{.*}}: tensor<2x4x8xf32>) ->
// CHECK-NEXT: %[[W:.*]] = braid.param "fc.weight" {braid.phase = "B"{{.*}} : tensor<8x16xf32>
// CHECK-NEXT: %[[W16:.*]] = braid.convert %[[W]] {braid.phase = "B"} : tensor<8x16xf32> to tensor<8x16xbf16>
// CHECK-NEXT: %[[P:.*]] = braid.param "proj.weight" {braid.phase = "B"{{.*}} : tensor<8x16xf32>
// CHECK-NEXT: %[[P16:.*]] = braid.convert %[[P]] {braid.phase = "B"} : tensor<8x16xf32> to tensor<8x16xbf16>
// CHECK-NEXT: %[[PT:.*]] = braid.transpose %[[P16]] {braid.phase = "B"
// CHECK-NEXT: %[[DH:.*]] = braid.matmul %arg0, %[[PT]] {braid.phase = "B", transpose_b}
// CHECK-NEXT: braid.matmul %[[DH]], %[[W16]] {braid.phase = "B", transpose_b}
// CHECK-LABEL: braid.layer @block.W
// CHECK-NOT: tensor<8x16xbf16>,
// CHECK-NOT: tensor<16x8xbf16>,
// CHECK-SAME: -> (tensor<8x16xf32>, tensor<8x16xf32>, tensor<8xf32>, tensor<8xf32>)
// CHECK-LABEL: func.func @forward_grad
// CHECK: braid.repeat @block.F({{.*}}) -> (tensor<2x4x8xbf16>, tensor<3x2x4x8xf32>, tensor<3x2x4x16xbf16>, tensor<3x2x4x8xbf16>)
braid.layer @block(%x: tensor<2x4x8xbf16>) -> tensor<2x4x8xbf16> {
  %x32 = braid.convert %x : tensor<2x4x8xbf16> to tensor<2x4x8xf32>
  %g = braid.param "ln.weight" {init = #braid.init<ones>} : tensor<8xf32>
  %b = braid.param "ln.bias" {init = #braid.init<zeros>} : tensor<8xf32>
  %n = braid.layer_norm %x32, %g, %b : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %n16 = braid.convert %n : tensor<2x4x8xf32> to tensor<2x4x8xbf16>
  %w = braid.param "fc.weight" {init = #braid.init<normal(0.1)>} : tensor<8x16xf32>
  %w16 = braid.convert %w : tensor<8x16xf32> to tensor<8x16xbf16>
  %h = braid.matmul %n16, %w16 : (tensor<2x4x8xbf16>, tensor<8x16xbf16>) -> tensor<2x4x16xbf16>
  %p = braid.param "proj.weight" {init = #braid.init<normal(0.1)>} : tensor<8x16xf32>
  %p16 = braid.convert %p : tensor<8x16xf32> to tensor<8x16xbf16>
  %pt = braid.transpose %p16 {permutation = array<i64: 1, 0>} : (tensor<8x16xbf16>) -> tensor<16x8xbf16>
  %o = braid.matmul %h, %pt : (tensor<2x4x16xbf16>, tensor<16x8xbf16>) -> tensor<2x4x8xbf16>
  %y = braid.add %x, %o : (tensor<2x4x8xbf16>, tensor<2x4x8xbf16>) -> tensor<2x4x8xbf16>
  braid.yield %y : tensor<2x4x8xbf16>
}
func.func @forward(%x: tensor<2x4x8xbf16> {braid.name = "x"}) -> tensor<f32> {
  %h = braid.repeat @block(%x) {prefix = "h", count = 3 : i64} : (tensor<2x4x8xbf16>) -> tensor<2x4x8xbf16>
  %h32 = braid.convert %h : tensor<2x4x8xbf16> to tensor<2x4x8xf32>
  %s = braid.reduce mean %h32 {axes = array<i64: 0, 1, 2>} : (tensor<2x4x8xf32>) -> tensor<f32>
  return %s : tensor<f32>
}
