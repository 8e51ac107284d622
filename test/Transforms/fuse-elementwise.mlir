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

// -----

// Tests that a residual add and the layer_norm reading it become one
// region computed row by row: the bias and residual adds, then the norm of
// their row. The sum stays a result because a later op (here the return,
// as the next layer's residual) reads it; scale and bias are operands.

// CHECK-LABEL: func.func @residual_layer_norm
// CHECK-NEXT: %[[R:.*]]:2 = braid.fused(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) : (tensor<2x8x16xf32>, tensor<16xf32>, tensor<2x8x16xf32>, tensor<16xf32>, tensor<16xf32>) -> (tensor<2x8x16xf32>, tensor<2x8x16xf32>) {
// CHECK-NEXT: ^bb0(%[[H:.*]]: tensor<2x8x16xf32>, %[[B:.*]]: tensor<16xf32>, %[[X:.*]]: tensor<2x8x16xf32>, %[[G:.*]]: tensor<16xf32>, %[[BETA:.*]]: tensor<16xf32>):
// CHECK-NEXT: %[[HB:.*]] = braid.add %[[H]], %[[B]]
// CHECK-NEXT: %[[S:.*]] = braid.add %[[X]], %[[HB]]
// CHECK-NEXT: %[[N:.*]] = braid.layer_norm %[[S]], %[[G]], %[[BETA]]
// CHECK-NEXT: braid.yield %[[S]], %[[N]]
// CHECK-NEXT: }
// CHECK-NEXT: return %[[R]]#0, %[[R]]#1
func.func @residual_layer_norm(%x: tensor<2x8x16xf32>, %h: tensor<2x8x16xf32>, %b: tensor<16xf32>, %g: tensor<16xf32>, %beta: tensor<16xf32>) -> (tensor<2x8x16xf32>, tensor<2x8x16xf32>) {
  %0 = braid.add %h, %b : (tensor<2x8x16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
  %1 = braid.add %x, %0 : (tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  %2 = braid.layer_norm %1, %g, %beta : (tensor<2x8x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
  return %1, %2 : tensor<2x8x16xf32>, tensor<2x8x16xf32>
}

// -----

// Tests that scaled scores and their softmax over the last axis are one
// region (the scaled scores are not a result: nothing else reads them), and
// that a softmax over another axis stays out.

// CHECK-LABEL: func.func @scaled_softmax
// CHECK-NEXT: %[[R:.*]] = braid.fused(%{{.*}}, %{{.*}}) : (tensor<2x4x8x8xf32>, tensor<f32>) -> tensor<2x4x8x8xf32> {
// CHECK-NEXT: ^bb0(%[[A:.*]]: tensor<2x4x8x8xf32>, %[[C:.*]]: tensor<f32>):
// CHECK-NEXT: %[[M:.*]] = braid.mul %[[A]], %[[C]]
// CHECK-NEXT: %[[P:.*]] = braid.softmax %[[M]] {axis = 3 : i64}
// CHECK-NEXT: braid.yield %[[P]] : tensor<2x4x8x8xf32>
// CHECK-NEXT: }
// CHECK-NEXT: %[[M2:.*]] = braid.mul
// CHECK-NEXT: braid.softmax %[[M2]] {axis = 2 : i64}
// CHECK-NEXT: return
func.func @scaled_softmax(%s: tensor<2x4x8x8xf32>, %c: tensor<f32>) -> (tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>) {
  %0 = braid.mul %s, %c : (tensor<2x4x8x8xf32>, tensor<f32>) -> tensor<2x4x8x8xf32>
  %1 = braid.softmax %0 {axis = 3 : i64} : tensor<2x4x8x8xf32>
  %2 = braid.mul %s, %c : (tensor<2x4x8x8xf32>, tensor<f32>) -> tensor<2x4x8x8xf32>
  %3 = braid.softmax %2 {axis = 2 : i64} : tensor<2x4x8x8xf32>
  return %1, %3 : tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>
}

// -----

// Tests that the loss and its gradient over the same logits are one region
// (they share the rows' maxima, sums and exponentials), though neither
// reads the other: the labels are an operand of one label per row, and the
// rank-0 loss a result.

// CHECK-LABEL: func.func @cross_entropy
// CHECK-NEXT: %[[R:.*]]:2 = braid.fused(%{{.*}}, %{{.*}}, %{{.*}}) : (tensor<2x8x32xf32>, tensor<2x8xi32>, tensor<f32>) -> (tensor<f32>, tensor<2x8x32xf32>) {
// CHECK-NEXT: ^bb0(%[[L:.*]]: tensor<2x8x32xf32>, %[[Y:.*]]: tensor<2x8xi32>, %[[D:.*]]: tensor<f32>):
// CHECK-NEXT: %[[LOSS:.*]] = braid.cross_entropy %[[L]], %[[Y]]
// CHECK-NEXT: %[[G:.*]] = braid.cross_entropy_grad %[[L]], %[[Y]], %[[D]]
// CHECK-NEXT: braid.yield %[[LOSS]], %[[G]] : tensor<f32>, tensor<2x8x32xf32>
// CHECK-NEXT: }
// CHECK-NEXT: return %[[R]]#0, %[[R]]#1
func.func @cross_entropy(%logits: tensor<2x8x32xf32>, %labels: tensor<2x8xi32>, %dl: tensor<f32>) -> (tensor<f32>, tensor<2x8x32xf32>) {
  %0 = braid.cross_entropy %logits, %labels : (tensor<2x8x32xf32>, tensor<2x8xi32>) -> tensor<f32>
  %1 = braid.cross_entropy_grad %logits, %labels, %dl : (tensor<2x8x32xf32>, tensor<2x8xi32>, tensor<f32>) -> tensor<2x8x32xf32>
  return %0, %1 : tensor<f32>, tensor<2x8x32xf32>
}

// -----

// Tests the backward of a norm: the gradient sum feeding layer_norm_grad
// and the residual gradient add after it are one region (the norm's
// gradient is not a result); and that an RMS norm whose input another op
// reads in between (the matmul) stays alone: the region of the residual add
// was closed by that use.

// CHECK-LABEL: func.func @norm_grad
// CHECK-NEXT: %[[R:.*]] = braid.fused(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) : (tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<16xf32>) -> tensor<4x16xf32> {
// CHECK: %[[S:.*]] = braid.add
// CHECK-NEXT: %[[N:.*]] = braid.layer_norm_grad %{{.*}}, %{{.*}}, %[[S]]
// CHECK-NEXT: %[[T:.*]] = braid.add %{{.*}}, %[[N]]
// CHECK-NEXT: braid.yield %[[T]] : tensor<4x16xf32>
// CHECK-NEXT: }
// CHECK-NEXT: %[[A:.*]] = braid.add
// CHECK-NEXT: braid.matmul %[[A]]
// CHECK-NEXT: braid.rms_norm %[[A]]
// CHECK-NEXT: return
func.func @norm_grad(%x: tensor<4x16xf32>, %d1: tensor<4x16xf32>, %d2: tensor<4x16xf32>, %g: tensor<16xf32>, %w: tensor<16x16xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>) {
  %0 = braid.add %d1, %d2 : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  %1 = braid.layer_norm_grad %x, %g, %0 : (tensor<4x16xf32>, tensor<16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  %2 = braid.add %d1, %1 : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  %3 = braid.add %x, %d1 : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  %4 = braid.matmul %3, %w : (tensor<4x16xf32>, tensor<16x16xf32>) -> tensor<4x16xf32>
  %5 = braid.rms_norm %3, %g : (tensor<4x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  return %2, %4, %5 : tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>
}

// -----

// Tests that a gradient reading the loss of the same logits stays out of
// the loss's region: the loss, a mean over every row, is known only after
// the region's loop.

// CHECK-LABEL: func.func @loss_feeds_grad
// CHECK-NEXT: %[[LOSS:.*]] = braid.cross_entropy
// CHECK-NEXT: braid.cross_entropy_grad %{{.*}}, %{{.*}}, %[[LOSS]]
// CHECK-NEXT: return
func.func @loss_feeds_grad(%logits: tensor<2x8x32xf32>, %labels: tensor<2x8xi32>) -> (tensor<f32>, tensor<2x8x32xf32>) {
  %0 = braid.cross_entropy %logits, %labels : (tensor<2x8x32xf32>, tensor<2x8xi32>) -> tensor<f32>
  %1 = braid.cross_entropy_grad %logits, %labels, %0 : (tensor<2x8x32xf32>, tensor<2x8xi32>, tensor<f32>) -> tensor<2x8x32xf32>
  return %0, %1 : tensor<f32>, tensor<2x8x32xf32>
}
