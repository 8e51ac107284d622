// RUN: braid-opt %s --split-input-file --braid-legalize-bf16 | FileCheck %s

// Tests that a bf16 braid.matmul_bias (a model fused before braidc) is
// legalized as the matmul and bias add it replaces (legalize-bf16-bias.mlir):
// marked braid.bf16_operands, its f32 sum rounded to bf16 by one
// braid.round; and that a `gelu` one
// is split into matmul_bias, round, gelu tanh, round, so the GELU reads the
// rounded sum, as in the unfused program and in braid-eval. An f32 one keeps
// its GELU.

// CHECK-LABEL: func.func @fc
// CHECK: %[[MB:.*]] = braid.matmul_bias %arg0, %arg1, %arg2 {braid.bf16_operands} : (tensor<2x8xf32>, tensor<8x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
// CHECK-NEXT: %[[R:.*]] = braid.round %[[MB]] to bf16
// CHECK-NEXT: %[[G:.*]] = braid.gelu tanh %[[R]]
// CHECK-NEXT: %[[GR:.*]] = braid.round %[[G]] to bf16
// CHECK-NEXT: %[[P:.*]] = braid.matmul_bias %arg0, %arg1, %arg2 {braid.bf16_operands} : (tensor<2x8xf32>, tensor<8x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
// CHECK-NEXT: %[[PR:.*]] = braid.round %[[P]] to bf16
// CHECK-NEXT: return %[[GR]], %[[PR]]
func.func @fc(%x: tensor<2x8xbf16>, %w: tensor<8x4xbf16>, %b: tensor<4xbf16>) -> (tensor<2x4xbf16>, tensor<2x4xbf16>) {
  %h = braid.matmul_bias %x, %w, %b gelu tanh : (tensor<2x8xbf16>, tensor<8x4xbf16>, tensor<4xbf16>) -> tensor<2x4xbf16>
  %p = braid.matmul_bias %x, %w, %b : (tensor<2x8xbf16>, tensor<8x4xbf16>, tensor<4xbf16>) -> tensor<2x4xbf16>
  return %h, %p : tensor<2x4xbf16>, tensor<2x4xbf16>
}

// -----

// CHECK-LABEL: func.func @f32
// CHECK: braid.matmul_bias %arg0, %arg1, %arg2 gelu tanh : (tensor<2x8xf32>, tensor<8x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
// CHECK-NOT: braid.gelu
// CHECK-NOT: braid.round
// CHECK-NOT: bf16_operands
func.func @f32(%x: tensor<2x8xf32>, %w: tensor<8x4xf32>, %b: tensor<4xf32>) -> tensor<2x4xf32> {
  %h = braid.matmul_bias %x, %w, %b gelu tanh : (tensor<2x8xf32>, tensor<8x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  return %h : tensor<2x4xf32>
}
