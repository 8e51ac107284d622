// Tests that braid-pipeline-outline cuts a chunk-split gradient function into
// one function per (chunk, phase), whose arguments and results are what the
// chunks exchange, and leaves a driver that calls them in dependence order.
//
// RUN: braid-opt %s --braid-pipeline-split="stages=3" --braid-autodiff --braid-pipeline-outline | FileCheck %s
// RUN: not braid-opt %s --braid-autodiff --braid-pipeline-outline 2>&1 | FileCheck %s --check-prefix=UNSPLIT
// RUN: not braid-opt %s --braid-pipeline-outline 2>&1 | FileCheck %s --check-prefix=NOGRAD

// The driver: F down the chunks, then B back up, each chunk's W after its B.
// CHECK-LABEL: func.func @forward_grad(
// CHECK-NEXT: %[[F0:.*]]:3 = call @forward_grad.c0.F(%arg0)
// CHECK-NEXT: %[[F1:.*]]:3 = call @forward_grad.c1.F(%[[F0]]#0)
// CHECK-NEXT: %[[F2:.*]]:2 = call @forward_grad.c2.F(%[[F1]]#0, %arg1)
// CHECK-NEXT: %[[B2:.*]]:2 = call @forward_grad.c2.B(%[[F2]]#0, %arg1)
// CHECK-NEXT: %[[W2:.*]] = call @forward_grad.c2.W(%[[F1]]#0, %[[B2]]#0)
// CHECK-NEXT: %[[B1:.*]]:2 = call @forward_grad.c1.B(%[[B2]]#1, %[[F1]]#1)
// CHECK-NEXT: %[[W1:.*]] = call @forward_grad.c1.W(%[[F1]]#2, %[[B1]]#0)
// CHECK-NEXT: %[[B0:.*]]:2 = call @forward_grad.c0.B(%[[B1]]#1, %[[F0]]#1)
// CHECK-NEXT: %[[W0:.*]]:2 = call @forward_grad.c0.W(%[[F0]]#2, %[[B0]]#0, %arg0, %[[B0]]#1)
// CHECK-NEXT: return %[[F2]]#1, %[[W2]], %[[W0]]#0, %[[W1]], %[[W0]]#1

// A piece reads the parameters it uses itself.
// CHECK-LABEL: func.func @forward_grad.c0.F(%arg0: tensor<4x4xf32>)
// CHECK-SAME: -> (tensor<4x8xf32>, tensor<3x4x8xf32>, tensor<3x4x8xf32>)
// CHECK-SAME: attributes {braid.chunk = 0 : i64, braid.phase = "F"}
// CHECK: braid.param "w_in"
// CHECK: braid.repeat @block.F
// CHECK-LABEL: func.func @forward_grad.c2.B(
// CHECK-SAME: attributes {braid.chunk = 2 : i64, braid.phase = "B"}
// CHECK: braid.param "w_out"
// CHECK: braid.cross_entropy_grad

// UNSPLIT: pipeline-outline.mlir:[[# @LINE + 12]]:9: error: 'braid.matmul' op has no braid.chunk and braid.phase; run braid-pipeline-split before braid-autodiff
// NOGRAD: error: braid-pipeline-outline: no function @forward_grad; run braid-autodiff (entry=forward) first

braid.layer @block(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %w = braid.param "w" {init = #braid.init<normal(0.1)>} : tensor<8x8xf32>
  %y = braid.matmul %x, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %z = braid.relu %y : tensor<4x8xf32>
  braid.yield %z : tensor<4x8xf32>
}

func.func @forward(%x: tensor<4x4xf32>, %labels: tensor<4xi32> {braid.range = 64 : i64}) -> tensor<f32> {
  %w_in = braid.param "w_in" {init = #braid.init<normal(0.1)>} : tensor<4x8xf32>
  %h0 = braid.matmul %x, %w_in : (tensor<4x4xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %h = braid.repeat @block(%h0) {prefix = "h", count = 6 : i64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %w_out = braid.param "w_out" {init = #braid.init<normal(0.1)>} : tensor<8x64xf32>
  %logits = braid.matmul %h, %w_out : (tensor<4x8xf32>, tensor<8x64xf32>) -> tensor<4x64xf32>
  %loss = braid.cross_entropy %logits, %labels : (tensor<4x64xf32>, tensor<4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
