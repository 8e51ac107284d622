// RUN: braid-opt %s --split-input-file --braid-lower-to-emitc | FileCheck %s

// Tests which buffers the memory plan (braidc --memory-report) counts as
// gradients when a parameter's gradient comes out of a braid.fused region:
// the walk back from the update passes through the region's braid.add and
// braid.round ops to operands of the result's own type, and through no
// other op. Each value here is 16 x 16 f32, 1024 bytes.

// Two partial gradients, each rounded to bf16 and summed (a tied
// parameter's under bf16-mixed): both partials and the sum are gradients,
// 3 x 1024 (until 2026-12-03 only the sum: 1024, activations 2048).
// CHECK-LABEL: braidc.memory_plan = [{activations = 0 : i64
// CHECK-SAME: gradients = 3072 : i64
// CHECK-SAME: total = 4096 : i64
func.func @tied(%a: tensor<16x16xf32>, %b: tensor<16x16xf32>, %buf: tensor<16x16xf32>, %lr: tensor<f32>, %scale: tensor<f32>) -> tensor<16x16xf32> {
  %w = braid.param "w" {init = #braid.init<normal(0.5)>} : tensor<16x16xf32>
  %p1 = braid.exp %a : tensor<16x16xf32>
  %p2 = braid.exp %b : tensor<16x16xf32>
  %g = braid.fused(%p1, %p2) : (tensor<16x16xf32>, tensor<16x16xf32>) -> tensor<16x16xf32> {
  ^bb0(%x: tensor<16x16xf32>, %y: tensor<16x16xf32>):
    %rx = braid.round %x to bf16 : tensor<16x16xf32>
    %ry = braid.round %y to bf16 : tensor<16x16xf32>
    %s = braid.add %rx, %ry : (tensor<16x16xf32>, tensor<16x16xf32>) -> tensor<16x16xf32>
    braid.yield %s : tensor<16x16xf32>
  }
  %nw, %nb = braid.sgd_update %w, %g, %buf, %lr, %scale {momentum = 0.9 : f64} : (tensor<16x16xf32>, tensor<16x16xf32>, tensor<16x16xf32>, tensor<f32>, tensor<f32>) -> (tensor<16x16xf32>, tensor<16x16xf32>)
  braid.store_param "w", %nw : tensor<16x16xf32>
  return %nb : tensor<16x16xf32>
}

// -----

// An activation gradient: gelu_grad reads the activation %x and the
// cotangent %dy, neither of them a parameter's gradient (2048 bytes of
// activations); only the region's result is, 1024.
// CHECK-LABEL: braidc.memory_plan = [{activations = 2048 : i64
// CHECK-SAME: gradients = 1024 : i64
// CHECK-SAME: total = 4096 : i64
func.func @act(%a: tensor<16x16xf32>, %b: tensor<16x16xf32>, %buf: tensor<16x16xf32>, %lr: tensor<f32>, %scale: tensor<f32>) -> tensor<16x16xf32> {
  %w = braid.param "w" {init = #braid.init<normal(0.5)>} : tensor<16x16xf32>
  %x = braid.exp %a : tensor<16x16xf32>
  %dy = braid.exp %b : tensor<16x16xf32>
  %g = braid.fused(%x, %dy) : (tensor<16x16xf32>, tensor<16x16xf32>) -> tensor<16x16xf32> {
  ^bb0(%u: tensor<16x16xf32>, %v: tensor<16x16xf32>):
    %d = braid.gelu_grad tanh %u, %v : tensor<16x16xf32>
    %r = braid.round %d to bf16 : tensor<16x16xf32>
    braid.yield %r : tensor<16x16xf32>
  }
  %nw, %nb = braid.sgd_update %w, %g, %buf, %lr, %scale {momentum = 0.9 : f64} : (tensor<16x16xf32>, tensor<16x16xf32>, tensor<16x16xf32>, tensor<f32>, tensor<f32>) -> (tensor<16x16xf32>, tensor<16x16xf32>)
  braid.store_param "w", %nw : tensor<16x16xf32>
  return %nb : tensor<16x16xf32>
}

// -----

// A sum with a broadcast operand: %c (16 floats, 64 bytes) is not of the
// gradient's type and stays an activation; %p and the sum are gradients,
// 2048.
// CHECK-LABEL: braidc.memory_plan = [{activations = 64 : i64
// CHECK-SAME: gradients = 2048 : i64
func.func @broadcast(%a: tensor<16x16xf32>, %b: tensor<16xf32>, %buf: tensor<16x16xf32>, %lr: tensor<f32>, %scale: tensor<f32>) -> tensor<16x16xf32> {
  %w = braid.param "w" {init = #braid.init<normal(0.5)>} : tensor<16x16xf32>
  %p = braid.exp %a : tensor<16x16xf32>
  %c = braid.exp %b : tensor<16xf32>
  %g = braid.fused(%p, %c) : (tensor<16x16xf32>, tensor<16xf32>) -> tensor<16x16xf32> {
  ^bb0(%x: tensor<16x16xf32>, %y: tensor<16xf32>):
    %s = braid.add %x, %y : (tensor<16x16xf32>, tensor<16xf32>) -> tensor<16x16xf32>
    braid.yield %s : tensor<16x16xf32>
  }
  %nw, %nb = braid.sgd_update %w, %g, %buf, %lr, %scale {momentum = 0.9 : f64} : (tensor<16x16xf32>, tensor<16x16xf32>, tensor<16x16xf32>, tensor<f32>, tensor<f32>) -> (tensor<16x16xf32>, tensor<16x16xf32>)
  braid.store_param "w", %nw : tensor<16x16xf32>
  return %nb : tensor<16x16xf32>
}
