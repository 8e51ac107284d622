// RUN: braid-opt %s --braid-async-collectives | FileCheck %s
// RUN: braid-opt %s --braid-async-collectives --braid-comm-report -o /dev/null | FileCheck %s --check-prefix=REPORT

// Tests that each collective starts where it was and is waited for right
// before its first use, so that the matmul runs during the all_reduce, and
// that attributes carry over to both halves.

braid.mesh @mesh {axes = ["dp", "tp"], shape = array<i64: 2, 2>}

// CHECK-LABEL: func.func @overlap
// CHECK: %[[F:.*]] = braid.all_reduce_start sum %{{.*}} on @mesh ["tp"] {braid.cause = "the block", braid.phase = "F"} : tensor<2x8xf32> -> !braid.future<tensor<2x8xf32>>
// CHECK-NEXT: %[[H:.*]] = braid.matmul
// CHECK-NEXT: %[[Y:.*]] = braid.wait %[[F]] {braid.cause = "the block", braid.phase = "F"} : !braid.future<tensor<2x8xf32>>
// CHECK-NEXT: braid.add %[[Y]], %[[H]]
// An unused result is waited for at the end of its block.
// CHECK: %[[G:.*]] = braid.all_gather_start
// CHECK-NEXT: braid.wait %[[G]]
// CHECK-NEXT: return
func.func @overlap(%p: tensor<2x8xf32>, %a: tensor<2x8xf32>, %b: tensor<8x8xf32>) -> tensor<2x8xf32> {
  %y = braid.all_reduce sum %p on @mesh ["tp"] {braid.cause = "the block", braid.phase = "F"} : tensor<2x8xf32>
  %h = braid.matmul %a, %b : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
  %z = braid.add %y, %h : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %unused = braid.all_gather %p on @mesh ["dp"] {dim = 0 : i64} : (tensor<2x8xf32>) -> tensor<4x8xf32>
  return %z : tensor<2x8xf32>
}

// Tests that a use inside a nested region counts at its ancestor in the
// block, and that layers are rewritten too.
// CHECK-LABEL: braid.layer @block
// CHECK: %[[R:.*]] = braid.reduce_scatter_start
// CHECK-NEXT: %[[W:.*]] = braid.wait %[[R]]
// CHECK-NEXT: braid.yield %[[W]]
braid.layer @block(%x: tensor<4x8xf32>) -> tensor<2x8xf32> {
  %r = braid.reduce_scatter %x on @mesh ["tp"] {dim = 0 : i64} : (tensor<4x8xf32>) -> tensor<2x8xf32>
  braid.yield %r : tensor<2x8xf32>
}

// Tests that all_to_all and broadcast_from start with their dimensions and
// root, and that all_slice, which has no asynchronous form, stays.
// CHECK-LABEL: func.func @forms
// CHECK: %[[A:.*]] = braid.all_to_all_start %{{.*}} on @mesh ["tp"] {concat_dim = 1 : i64, split_dim = 0 : i64} : tensor<2x8xf32> -> !braid.future<tensor<1x16xf32>>
// CHECK-NEXT: %[[B:.*]] = braid.broadcast_from_start %{{.*}} on @mesh ["dp"] {root = 1 : i64} : tensor<2x8xf32> -> !braid.future<tensor<2x8xf32>>
// CHECK-NEXT: %[[S:.*]] = braid.all_slice %{{.*}} on @mesh ["dp"] {dim = 1 : i64} : (tensor<2x8xf32>) -> tensor<2x4xf32>
// CHECK-NEXT: %[[WA:.*]] = braid.wait %[[A]]
// CHECK-NEXT: %[[WB:.*]] = braid.wait %[[B]]
// CHECK-NEXT: return %[[WA]], %[[WB]], %[[S]]
func.func @forms(%p: tensor<2x8xf32>) -> (tensor<1x16xf32>, tensor<2x8xf32>, tensor<2x4xf32>) {
  %a = braid.all_to_all %p on @mesh ["tp"] {split_dim = 0 : i64, concat_dim = 1 : i64} : (tensor<2x8xf32>) -> tensor<1x16xf32>
  %b = braid.broadcast_from %p on @mesh ["dp"] {root = 1 : i64} : tensor<2x8xf32>
  %s = braid.all_slice %p on @mesh ["dp"] {dim = 1 : i64} : (tensor<2x8xf32>) -> tensor<2x4xf32>
  return %a, %b, %s : tensor<1x16xf32>, tensor<2x8xf32>, tensor<2x4xf32>
}

// The comm report lists start forms as their collectives, marked async.
// REPORT: @overlap {{.*}} all_reduce      tp {{.*}} [async] the block
// REPORT: @overlap {{.*}} all_gather      dp
