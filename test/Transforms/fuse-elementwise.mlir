// RUN: braid-opt %s --split-input-file --braid-fuse-elementwise | FileCheck %s
// RUN: braid-opt %s --split-input-file --braid-fuse-elementwise="min-ops=3" | FileCheck %s --check-prefix=MIN3
// RUN: braid-opt %s --split-input-file --braid-fuse-elementwise | braid-opt --split-input-file | FileCheck %s

// Tests that a bias add and the GELU after it become one region inside a
// layer, that the add's value stays a result because a later op (the
// backward pass, here a matmul) reads it, and that the broadcast bias is an
// operand of the region as it was of the add.

// CHECK-LABEL: braid.layer @mlp
// CHECK: %[[XW:.*]] = braid.matmul
// CHECK-NEXT: %[[B:.*]] = braid.param "fc.bias"
// CHECK-NEXT: %[[R:.*]]:2 = braid.fused(%[[XW]], %[[B]]) : (tensor<2x8x16xf32>, tensor<16xf32>) -> (tensor<2x8x16xf32>, tensor<2x8x16xf32>) {
// CHECK-NEXT: ^bb0(%[[A0:.*]]: tensor<2x8x16xf32>, %[[A1:.*]]: tensor<16xf32>):
// CHECK-NEXT: %[[S:.*]] = braid.add %[[A0]], %[[A1]]
// CHECK-NEXT: %[[G:.*]] = braid.gelu tanh %[[S]]
// CHECK-NEXT: braid.yield %[[S]], %[[G]]
// CHECK-NEXT: }
// CHECK-NEXT: %[[M:.*]] = braid.matmul %[[R]]#0, %[[R]]#1
// CHECK-NEXT: braid.yield %[[M]], %[[R]]#1
// MIN3-LABEL: braid.layer @mlp
// MIN3-NOT: braid.fused
braid.layer @mlp(%x: tensor<2x8x16xf32>) -> (tensor<2x8x8xf32>, tensor<2x8x16xf32>) {
  %w = braid.param "fc.weight" {init = #braid.init<normal(0.02)>} : tensor<16x16xf32>
  %xw = braid.matmul %x, %w : (tensor<2x8x16xf32>, tensor<16x16xf32>) -> tensor<2x8x16xf32>
  %b = braid.param "fc.bias" {init = #braid.init<zeros>} : tensor<16xf32>
  %fc = braid.add %xw, %b : (tensor<2x8x16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
  %g = braid.gelu tanh %fc : tensor<2x8x16xf32>
  %m = braid.matmul %fc, %g {transpose_b} : (tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> tensor<2x8x8xf32>
  braid.yield %m, %g : tensor<2x8x8xf32>, tensor<2x8x16xf32>
}

// -----

// Tests that a chain of three ops whose intermediate values nothing else
// reads keeps only the last one, and that two chains meeting at an op
// merge into one region (with min-ops=3 too: it has five ops).

// CHECK-LABEL: func.func @chain
// CHECK-NEXT: %[[R:.*]] = braid.fused(%{{.*}}, %{{.*}}, %{{.*}}) : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32> {
// CHECK: braid.add
// CHECK-NEXT: braid.silu
// CHECK-NEXT: braid.exp
// CHECK-NEXT: braid.mul
// CHECK-NEXT: braid.sub
// CHECK-NEXT: braid.yield %{{.*}} : tensor<4x8xf32>
// CHECK-NEXT: }
// CHECK-NEXT: return %[[R]]
// MIN3-LABEL: func.func @chain
// MIN3: braid.fused
func.func @chain(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>, %s: tensor<f32>) -> tensor<4x8xf32> {
  %0 = braid.add %a, %b : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %1 = braid.silu %0 : tensor<4x8xf32>
  %2 = braid.exp %b : tensor<4x8xf32>
  %3 = braid.mul %2, %s : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %4 = braid.sub %1, %3 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %4 : tensor<4x8xf32>
}

// -----

// Tests what stays out: an op whose result has another shape (the scalar
// mul), exact GELU (erf in double, not fusible), a lone op, and an op after
// a non-fusible use of the region's value (the reduce between the add and
// the neg): fusing the neg would place the region after the reduce that
// reads it.

// CHECK-LABEL: func.func @limits
// CHECK: %[[R:.*]]:2 = braid.fused(%{{.*}}, %{{.*}}) : (tensor<4x8xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>)
// CHECK: braid.add
// CHECK-NEXT: braid.relu
// CHECK-NEXT: braid.yield
// CHECK: braid.reduce
// CHECK-NEXT: braid.neg %[[R]]#0
// CHECK-NEXT: braid.mul
// CHECK-NEXT: braid.gelu exact
// CHECK-NEXT: braid.sqrt
// CHECK-NEXT: braid.reduce
// CHECK-NEXT: return
func.func @limits(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<f32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<8xf32>) {
  %0 = braid.add %a, %b : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %1 = braid.relu %0 : tensor<4x8xf32>
  %r = braid.reduce sum %0 {axes = array<i64: 0>} : (tensor<4x8xf32>) -> tensor<8xf32>
  %2 = braid.neg %0 : tensor<4x8xf32>
  %s = braid.mul %r, %r : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %g = braid.gelu exact %a : tensor<4x8xf32>
  %q = braid.sqrt %g : tensor<4x8xf32>
  %t = braid.reduce sum %s {axes = array<i64: 0>} : (tensor<8xf32>) -> tensor<f32>
  return %1, %2, %t, %g, %q, %r : tensor<4x8xf32>, tensor<4x8xf32>, tensor<f32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<8xf32>
}
