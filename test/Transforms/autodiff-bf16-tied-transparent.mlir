// RUN: braid-opt %s -split-input-file --braid-autodiff -verify-diagnostics | FileCheck %s

// Tests that a tied parameter's bf16 working copy made of the parameter
// read through sharding-transparent ops (here a negation) still has its
// partial gradients summed in f32, as autodiff-tied-working-copy.mlir's
// copy of the bare parameter: each op's contribution (the head's, the
// embedding's) is converted back to f32 on its own and the two are added
// in f32; the sum then goes back through the negation to the parameter.
// Looking for the parameter only right under the convert, the contributions
// would be added in bf16 and the sum converted after (what
// braid-pipeline-outline can no longer hoist).

// CHECK-LABEL: func.func @forward_grad
// CHECK-SAME: -> (tensor<f32>, tensor<16x4xf32> {braid.gradient_of = "wte"})
// CHECK-NOT: braid.add {{.*}} -> tensor<16x4xbf16>
// CHECK: %[[HEAD:.*]] = braid.reduce sum {{.*}} -> tensor<16x4xbf16>
// CHECK-NEXT: %[[HEAD32:.*]] = braid.convert %[[HEAD]] {braid.phase = "W"} : tensor<16x4xbf16> to tensor<16x4xf32>
// CHECK-NOT: braid.add {{.*}} -> tensor<16x4xbf16>
// CHECK: %[[EMB:.*]] = braid.embedding_grad {{.*}} -> tensor<16x4xbf16>
// CHECK-NEXT: %[[EMB32:.*]] = braid.convert %[[EMB]] {braid.phase = "W"} : tensor<16x4xbf16> to tensor<16x4xf32>
// CHECK-NEXT: %[[SUM:.*]] = braid.add %[[HEAD32]], %[[EMB32]] {braid.phase = "W"} : (tensor<16x4xf32>, tensor<16x4xf32>) -> tensor<16x4xf32>
// CHECK-NEXT: %[[G:.*]] = braid.neg %[[SUM]] {braid.phase = "W"} : tensor<16x4xf32>
// CHECK-NEXT: return %{{.*}}, %[[G]] :
func.func @forward(%tokens: tensor<2x8xi32> {braid.name = "tokens", braid.range = 16 : i64}, %labels: tensor<2x8xi32> {braid.name = "labels", braid.range = 16 : i64}) -> tensor<f32> {
  %wte = braid.param "wte" {init = #braid.init<normal(0.02)>} : tensor<16x4xf32>
  %n = braid.neg %wte : tensor<16x4xf32>
  %wte16 = braid.convert %n : tensor<16x4xf32> to tensor<16x4xbf16>
  %e = braid.embedding %wte16, %tokens : (tensor<16x4xbf16>, tensor<2x8xi32>) -> tensor<2x8x4xbf16>
  %logits = braid.matmul %e, %wte16 {transpose_b} : (tensor<2x8x4xbf16>, tensor<16x4xbf16>) -> tensor<2x8x16xbf16>
  %l32 = braid.convert %logits : tensor<2x8x16xbf16> to tensor<2x8x16xf32>
  %loss = braid.cross_entropy %l32, %labels : (tensor<2x8x16xf32>, tensor<2x8xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// A sharding constraint is sharding-transparent too, and sharedWorkingCopy
// looks through it alike: the tied partials are summed in f32, and the
// sum then goes back through braid.shard's gradient (the same constraint
// on the cotangent) to the parameter. (braidc and the documented pass
// orders run braid-shard after braid-autodiff, so there the tied working
// copy is convert(shard(param)) only with a user's constraint.)

// CHECK-LABEL: func.func @forward_grad
// CHECK-SAME: -> (tensor<f32>, tensor<16x4xf32> {braid.gradient_of = "wte"})
// CHECK-NOT: braid.add {{.*}} -> tensor<16x4xbf16>
// CHECK: %[[HEAD:.*]] = braid.reduce sum {{.*}} -> tensor<16x4xbf16>
// CHECK-NEXT: %[[HEAD32:.*]] = braid.convert %[[HEAD]] {braid.phase = "W"} : tensor<16x4xbf16> to tensor<16x4xf32>
// CHECK-NOT: braid.add {{.*}} -> tensor<16x4xbf16>
// CHECK: %[[EMB:.*]] = braid.embedding_grad {{.*}} -> tensor<16x4xbf16>
// CHECK-NEXT: %[[EMB32:.*]] = braid.convert %[[EMB]] {braid.phase = "W"} : tensor<16x4xbf16> to tensor<16x4xf32>
// CHECK-NEXT: %[[SUM:.*]] = braid.add %[[HEAD32]], %[[EMB32]] {braid.phase = "W"} : (tensor<16x4xf32>, tensor<16x4xf32>) -> tensor<16x4xf32>
// CHECK-NEXT: %[[G:.*]] = braid.shard %[[SUM]] : tensor<16x4xf32> to #braid.sharding<@mesh, {{\[}}["tp"], []]> {braid.phase = "W"}
// CHECK-NEXT: return %{{.*}}, %[[G]] :
braid.mesh @mesh {axes = ["tp"], shape = array<i64: 2>}
func.func @forward(%tokens: tensor<2x8xi32> {braid.name = "tokens", braid.range = 16 : i64}, %labels: tensor<2x8xi32> {braid.name = "labels", braid.range = 16 : i64}) -> tensor<f32> {
  %wte = braid.param "wte" {init = #braid.init<normal(0.02)>} : tensor<16x4xf32>
  %s = braid.shard %wte : tensor<16x4xf32> to #braid.sharding<@mesh, [["tp"], []]>
  %wte16 = braid.convert %s : tensor<16x4xf32> to tensor<16x4xbf16>
  %e = braid.embedding %wte16, %tokens : (tensor<16x4xbf16>, tensor<2x8xi32>) -> tensor<2x8x4xbf16>
  %logits = braid.matmul %e, %wte16 {transpose_b} : (tensor<2x8x4xbf16>, tensor<16x4xbf16>) -> tensor<2x8x16xbf16>
  %l32 = braid.convert %logits : tensor<2x8x16xbf16> to tensor<2x8x16xf32>
  %loss = braid.cross_entropy %l32, %labels : (tensor<2x8x16xf32>, tensor<2x8xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
