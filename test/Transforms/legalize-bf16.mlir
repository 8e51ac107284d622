// RUN: braid-opt %s --split-input-file --braid-legalize-bf16 | FileCheck %s
// RUN: braid-opt %s --split-input-file --braid-legalize-bf16 | braid-opt --split-input-file | FileCheck %s
// RUN: braid-opt %s --split-input-file --braid-legalize-bf16 | FileCheck %s --check-prefix=NOBF16

// NOBF16-NOT: bf16>

// Tests that bf16 values become f32 ones rounded to bf16: a conversion to
// bf16 becomes a braid.round, one back to f32 disappears, a computing op
// (matmul, add) is followed by a round, a matmul of bf16 operands is marked
// braid.bf16_operands, a reshape (moves data) is not, a
// layer's signature and a repeat's results become f32, and a bf16 constant
// becomes an f32 one with the same values.

// CHECK-LABEL: braid.layer @block(%arg0: tensor<2x8xf32>) -> tensor<2x8xf32>
// CHECK-NEXT: %[[W:.*]] = braid.param "w" {{.*}} : tensor<8x8xf32>
// CHECK-NEXT: %[[W16:.*]] = braid.round %[[W]] to bf16 : tensor<8x8xf32>
// CHECK-NEXT: %[[M:.*]] = braid.matmul %arg0, %[[W16]] {braid.bf16_operands} : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
// CHECK-NEXT: %[[MR:.*]] = braid.round %[[M]] to bf16 : tensor<2x8xf32>
// CHECK-NEXT: %[[C:.*]] = braid.constant dense<1.500000e+00> : tensor<2x8xf32>
// CHECK-NEXT: %[[A:.*]] = braid.add %[[MR]], %[[C]] : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
// CHECK-NEXT: %[[AR:.*]] = braid.round %[[A]] to bf16 : tensor<2x8xf32>
// CHECK-NEXT: %[[R:.*]] = braid.reshape %[[AR]] : (tensor<2x8xf32>) -> tensor<16xf32>
// CHECK-NEXT: %[[B:.*]] = braid.reshape %[[R]] : (tensor<16xf32>) -> tensor<2x8xf32>
// CHECK-NEXT: braid.yield %[[B]] : tensor<2x8xf32>
braid.layer @block(%x: tensor<2x8xbf16>) -> tensor<2x8xbf16> {
  %w = braid.param "w" {init = #braid.init<normal(0.1)>} : tensor<8x8xf32>
  %w16 = braid.convert %w : tensor<8x8xf32> to tensor<8x8xbf16>
  %m = braid.matmul %x, %w16 : (tensor<2x8xbf16>, tensor<8x8xbf16>) -> tensor<2x8xbf16>
  %c = braid.constant dense<1.5> : tensor<2x8xbf16>
  %a = braid.add %m, %c : (tensor<2x8xbf16>, tensor<2x8xbf16>) -> tensor<2x8xbf16>
  %r = braid.reshape %a : (tensor<2x8xbf16>) -> tensor<16xbf16>
  %b = braid.reshape %r : (tensor<16xbf16>) -> tensor<2x8xbf16>
  braid.yield %b : tensor<2x8xbf16>
}

// CHECK-LABEL: func.func @forward(%arg0: tensor<2x8xf32>) -> tensor<f32>
// CHECK-NEXT: %[[X:.*]] = braid.round %arg0 to bf16 : tensor<2x8xf32>
// CHECK-NEXT: %[[H:.*]] = braid.repeat @block(%[[X]]) {{.*}} : (tensor<2x8xf32>) -> tensor<2x8xf32>
// CHECK-NEXT: %[[S:.*]] = braid.reduce sum %[[H]] {{.*}} : (tensor<2x8xf32>) -> tensor<f32>
// CHECK-NEXT: return %[[S]] : tensor<f32>
func.func @forward(%x: tensor<2x8xf32>) -> tensor<f32> {
  %x16 = braid.convert %x : tensor<2x8xf32> to tensor<2x8xbf16>
  %h = braid.repeat @block(%x16) {prefix = "h", count = 2 : i64} : (tensor<2x8xbf16>) -> tensor<2x8xbf16>
  %h32 = braid.convert %h : tensor<2x8xbf16> to tensor<2x8xf32>
  %s = braid.reduce sum %h32 {axes = array<i64: 0, 1>} : (tensor<2x8xf32>) -> tensor<f32>
  return %s : tensor<f32>
}

// -----

// Tests that an f32 module is unchanged (its matmul is not marked).

// CHECK-LABEL: func.func @f32
// CHECK-NEXT: braid.add
// CHECK-NEXT: braid.reshape
// CHECK-NEXT: braid.matmul %{{.*}}, %{{.*}} {transpose_b} : (
// CHECK-NEXT: return
func.func @f32(%x: tensor<4xf32>) -> tensor<4x4xf32> {
  %y = braid.add %x, %x : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %m = braid.reshape %y : (tensor<4xf32>) -> tensor<4x1xf32>
  %n = braid.matmul %m, %m {transpose_b} : (tensor<4x1xf32>, tensor<4x1xf32>) -> tensor<4x4xf32>
  return %n : tensor<4x4xf32>
}
