// RUN: braid-opt %s -split-input-file --braid-autodiff | FileCheck %s
// RUN: braid-opt %s -split-input-file --braid-autodiff=recompute=full | FileCheck %s --check-prefix=FULL

// Tests the training step of a two-layer MLP written without layers: the
// forward ops are cloned as F, activation gradients are B, parameter
// gradients are W, and the gradients are returned by parameter name.

// CHECK-LABEL: func.func @forward_grad
// CHECK-SAME: -> (tensor<f32>, tensor<8x10xf32> {braid.gradient_of = "w2"}, tensor<4x8xf32> {braid.gradient_of = "w1"})
// CHECK: %[[W1:.*]] = braid.param "w1" {braid.phase = "F"
// CHECK: %[[H:.*]] = braid.matmul %{{.*}}, %[[W1]] {braid.phase = "F"}
// CHECK: %[[A:.*]] = braid.relu %[[H]] {braid.phase = "F"}
// CHECK: %[[W2:.*]] = braid.param "w2" {braid.phase = "F"
// CHECK: %[[L:.*]] = braid.matmul %[[A]], %[[W2]] {braid.phase = "F"}
// CHECK: %[[LOSS:.*]] = braid.cross_entropy %[[L]], %{{.*}} {braid.phase = "F"}
// CHECK: %[[ONE:.*]] = braid.constant {braid.phase = "B"} dense<1.000000e+00> : tensor<f32>
// CHECK: %[[DL:.*]] = braid.cross_entropy_grad %[[L]], %{{.*}}, %[[ONE]] {braid.phase = "B"}
// CHECK: %[[DA:.*]] = braid.matmul %[[DL]], %[[W2]] {braid.phase = "B", transpose_b}
// CHECK: %[[DW2:.*]] = braid.matmul %[[A]], %[[DL]] {braid.phase = "W", transpose_a}
// CHECK: %[[DH:.*]] = braid.relu_grad %[[H]], %[[DA]] {braid.phase = "B"}
// CHECK: %[[DW1:.*]] = braid.matmul %{{.*}}, %[[DH]] {braid.phase = "W", transpose_a}
// CHECK: return %[[LOSS]], %[[DW2]], %[[DW1]]
func.func @forward(%x: tensor<2x4xf32> {braid.name = "x"},
                   %y: tensor<2xi32> {braid.name = "labels", braid.range = 10 : i64}) -> tensor<f32> {
  %w1 = braid.param "w1" {init = #braid.init<normal(0.5)>} : tensor<4x8xf32>
  %h = braid.matmul %x, %w1 : (tensor<2x4xf32>, tensor<4x8xf32>) -> tensor<2x8xf32>
  %a = braid.relu %h : tensor<2x8xf32>
  %w2 = braid.param "w2" {init = #braid.init<normal(0.5)>} : tensor<8x10xf32>
  %l = braid.matmul %a, %w2 : (tensor<2x8xf32>, tensor<8x10xf32>) -> tensor<2x10xf32>
  %loss = braid.cross_entropy %l, %y : (tensor<2x10xf32>, tensor<2xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Tests one repeated transformer-style layer: it becomes @block.F (which
// also yields, per instance, the activations the backward needs),
// @block.B (run in reverse) and @block.W (the parameter gradients, from
// saved activations and B's products only), applied by stacked repeats.

// CHECK-LABEL: braid.layer @block.F
// CHECK-SAME: (%[[X:.*]]: tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>)
// CHECK-NOT: braid.phase = "B"
// CHECK-NOT: braid.phase = "W"
// CHECK: braid.yield
// CHECK-LABEL: braid.layer @block.B
// CHECK-SAME: (%[[DY:.*]]: tensor<2x4x8xf32>, %[[XS:.*]]: tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>)
// CHECK: braid.layer_norm_grad %[[XS]], %{{.*}}, %{{.*}} {braid.phase = "B"}
// CHECK-NOT: braid.phase = "W"
// CHECK: braid.yield
// CHECK-LABEL: braid.layer @block.W
// CHECK-SAME: -> (tensor<8x8xf32>, tensor<8xf32>, tensor<8xf32>)
// CHECK-NOT: braid.phase = "B"
// CHECK: braid.yield

// CHECK-LABEL: func.func @forward_grad
// CHECK-SAME: tensor<3x8x8xf32> {braid.gradient_of = "h.{}.fc.weight", braid.instances = array<i64: 0, 3>}
// CHECK: %[[F:.*]]:3 = braid.repeat @block.F(%{{.*}}) {braid.phase = "F", carried = 1 : i64, count = 3 : i64, prefix = "h"} : (tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<3x2x4x8xf32>, tensor<3x2x4x8xf32>)
// CHECK: %[[B:.*]]:3 = braid.repeat @block.B(%{{.*}}, %[[F]]#1) {braid.phase = "B", carried = 1 : i64, count = 3 : i64, prefix = "h", reverse}
// CHECK: braid.repeat @block.W(%[[F]]#2, %[[F]]#1, %[[B]]#1, %[[B]]#2) {braid.phase = "W", carried = 0 : i64, count = 3 : i64, prefix = "h"}

// With full recomputation, F saves only each instance's input, and B
// recomputes the forward before differentiating it.
// FULL-LABEL: braid.layer @block.F
// FULL-SAME: -> (tensor<2x4x8xf32>, tensor<2x4x8xf32>)
// FULL-LABEL: braid.layer @block.B
// FULL: braid.layer_norm %{{.*}} {braid.phase = "B"}
// FULL: braid.layer_norm_grad
braid.layer @block(%x: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %g = braid.param "ln.weight" {init = #braid.init<ones>} : tensor<8xf32>
  %b = braid.param "ln.bias" {init = #braid.init<zeros>} : tensor<8xf32>
  %n = braid.layer_norm %x, %g, %b : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %w = braid.param "fc.weight" {init = #braid.init<normal(0.1)>} : tensor<8x8xf32>
  %h = braid.matmul %n, %w : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %y = braid.add %x, %h : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  braid.yield %y : tensor<2x4x8xf32>
}
func.func @forward(%x: tensor<2x4x8xf32> {braid.name = "x"}) -> tensor<f32> {
  %h = braid.repeat @block(%x) {prefix = "h", count = 3 : i64} : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %s = braid.reduce mean %h {axes = array<i64: 0, 1, 2>} : (tensor<2x4x8xf32>) -> tensor<f32>
  return %s : tensor<f32>
}
