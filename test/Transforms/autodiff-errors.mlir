// Tests that braid-autodiff rejects what it cannot differentiate with a
// located error.
// RUN: braid-opt %s -split-input-file --braid-autodiff -verify-diagnostics
// RUN: not braid-opt %s -split-input-file --braid-autodiff=entry=nope 2>&1 | FileCheck %s --check-prefix=ENTRY
// RUN: not braid-opt %s -split-input-file --braid-autodiff=recompute=some 2>&1 | FileCheck %s --check-prefix=MODE
// ENTRY: error: braid-autodiff: no function @nope to differentiate (set entry=...)
// MODE: error: braid-autodiff: recompute must be none, full or selective, got 'some'

// expected-error@+1 {{must return a rank-0 floating-point loss as its first result to be differentiated}}
func.func @forward(%x: tensor<2xf32>) -> tensor<2xf32> {
  %w = braid.param "w" {init = #braid.init<ones>} : tensor<2xf32>
  %y = braid.mul %x, %w : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  return %y : tensor<2xf32>
}

// -----

func.func @forward(%x: tensor<2xf32>) -> tensor<f32> {
  %w = braid.param "w" {init = #braid.init<ones>} : tensor<2xf32>
  // expected-error@+1 {{'braid.relu_grad' op is not differentiable (it does not implement GradientOpInterface)}}
  %g = braid.relu_grad %x, %w : tensor<2xf32>
  %s = braid.reduce sum %g {axes = array<i64: 0>} : (tensor<2xf32>) -> tensor<f32>
  return %s : tensor<f32>
}

// -----

func.func @forward_grad() {
  return
}
// expected-error@+1 {{cannot be differentiated: @forward_grad already exists}}
func.func @forward(%x: tensor<2xf32>) -> tensor<f32> {
  %s = braid.reduce sum %x {axes = array<i64: 0>} : (tensor<2xf32>) -> tensor<f32>
  return %s : tensor<f32>
}

// -----

// expected-error@+1 {{'braid.layer' op can only be differentiated when every value it carries is floating-point}}
braid.layer @ids(%t: tensor<2xi32>) -> tensor<2xi32> {
  braid.yield %t : tensor<2xi32>
}
func.func @forward(%t: tensor<2xi32>) -> tensor<f32> {
  %u = braid.repeat @ids(%t) {prefix = "h", count = 2 : i64} : (tensor<2xi32>) -> tensor<2xi32>
  %w = braid.param "w" {init = #braid.init<ones>} : tensor<3x2xf32>
  %e = braid.embedding %w, %u : (tensor<3x2xf32>, tensor<2xi32>) -> tensor<2x2xf32>
  %s = braid.reduce sum %e {axes = array<i64: 0, 1>} : (tensor<2x2xf32>) -> tensor<f32>
  return %s : tensor<f32>
}

// -----

// Two declarations of one parameter with different shapes: named at the
// declaration (the sum of their gradients failed as a braid.add of shapes
// that do not broadcast, located at an unrelated op).
func.func @forward(%x: tensor<4xf32>) -> tensor<f32> {
  // expected-error@+1 {{'braid.param' op declares parameter 'w' as 'tensor<4xf32>', but it is also declared as 'tensor<2xf32>'}}
  %w = braid.param "w" {init = #braid.init<ones>} : tensor<4xf32>
  %v = braid.param "w" {init = #braid.init<ones>} : tensor<2xf32>
  %a = braid.mul %x, %w : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %s = braid.reduce sum %a {axes = array<i64: 0>} : (tensor<4xf32>) -> tensor<f32>
  %t = braid.reduce sum %v {axes = array<i64: 0>} : (tensor<2xf32>) -> tensor<f32>
  %l = braid.add %s, %t : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return %l : tensor<f32>
}
