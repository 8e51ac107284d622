// RUN: braid-opt %s | braid-opt | FileCheck %s
// RUN: braid-opt %s --mlir-print-op-generic | braid-opt | FileCheck %s

// Tests that meshes, shardings, sharding constraints and collectives
// round-trip.

// CHECK: braid.mesh @mesh {axes = ["dp", "tp"], shape = array<i64: 2, 4>}
braid.mesh @mesh {axes = ["dp", "tp"], shape = array<i64: 2, 4>}

// CHECK-LABEL: func.func @annotate
// CHECK-SAME: braid.sharding = #braid.sharding<@mesh, {{\[}}["dp"], []]>
func.func @annotate(%x: tensor<8x16xf32> {braid.sharding = #braid.sharding<@mesh, [["dp"], []]>}) -> tensor<8x16xf32> {
  // CHECK: braid.shard %{{.*}} : tensor<8x16xf32> to #braid.sharding<@mesh, {{\[}}["dp"], ["tp"]]> {priority = 2 : i64}
  %0 = braid.shard %x : tensor<8x16xf32> to #braid.sharding<@mesh, [["dp"], ["tp"]]> {priority = 2 : i64}
  // CHECK: braid.shard %{{.*}} : tensor<8x16xf32> to #braid.sharding<@mesh, {{\[}}[], []], partial = ["tp"]>
  %1 = braid.shard %0 : tensor<8x16xf32> to #braid.sharding<@mesh, [[], []], partial = ["tp"]>
  // CHECK: braid.shard %{{.*}} : tensor<8x16xf32> to #braid.sharding<@mesh, {{\[}}["dp", "tp"], []]>
  %2 = braid.shard %1 : tensor<8x16xf32> to #braid.sharding<@mesh, [["dp", "tp"], []]>
  // A split strided over blocks (rows viewed as [2, 4], each block split).
  // CHECK: braid.shard %{{.*}} : tensor<8x16xf32> to #braid.sharding<@mesh, {{\[}}["dp"], []], blocks = [2, 1]>
  %3 = braid.shard %2 : tensor<8x16xf32> to #braid.sharding<@mesh, [["dp"], []], blocks = [2, 1]>
  return %3 : tensor<8x16xf32>
}

// CHECK-LABEL: func.func @device
// CHECK-SAME: braid.block_of = #braid.sharding<@mesh, {{\[}}["dp"], []]>
func.func @device(%x: tensor<4x16xf32> {braid.block_of = #braid.sharding<@mesh, [["dp"], []]>}) {
  // CHECK: braid.param "w" {block_of = #braid.sharding<@mesh, {{\[}}[], ["tp"]]>, init = #braid.init<zeros>} : tensor<16x2xf32>
  %w = braid.param "w" {init = #braid.init<zeros>, block_of = #braid.sharding<@mesh, [[], ["tp"]]>} : tensor<16x2xf32>
  // CHECK: braid.all_reduce sum %{{.*}} on @mesh ["tp"] : tensor<4x16xf32>
  %0 = braid.all_reduce sum %x on @mesh ["tp"] : tensor<4x16xf32>
  // CHECK: braid.all_reduce max %{{.*}} on @mesh ["dp", "tp"] : tensor<4x16xf32>
  %1 = braid.all_reduce max %x on @mesh ["dp", "tp"] : tensor<4x16xf32>
  // CHECK: braid.all_gather %{{.*}} on @mesh ["tp"] {dim = 1 : i64} : (tensor<4x16xf32>) -> tensor<4x64xf32>
  %2 = braid.all_gather %x on @mesh ["tp"] {dim = 1 : i64} : (tensor<4x16xf32>) -> tensor<4x64xf32>
  // CHECK: braid.reduce_scatter %{{.*}} on @mesh ["tp"] {dim = 1 : i64} : (tensor<4x16xf32>) -> tensor<4x4xf32>
  %3 = braid.reduce_scatter %x on @mesh ["tp"] {dim = 1 : i64} : (tensor<4x16xf32>) -> tensor<4x4xf32>
  // CHECK: braid.all_to_all %{{.*}} on @mesh ["tp"] {concat_dim = 0 : i64, split_dim = 1 : i64} : (tensor<4x16xf32>) -> tensor<16x4xf32>
  %4 = braid.all_to_all %x on @mesh ["tp"] {split_dim = 1 : i64, concat_dim = 0 : i64} : (tensor<4x16xf32>) -> tensor<16x4xf32>
  // CHECK: braid.broadcast_from %{{.*}} on @mesh ["dp"] {root = 1 : i64} : tensor<4x16xf32>
  %5 = braid.broadcast_from %x on @mesh ["dp"] {root = 1 : i64} : tensor<4x16xf32>
  return
}

// Tests the asynchronous forms: each collective's start op and braid.wait.
// CHECK-LABEL: func.func @async
func.func @async(%x: tensor<4x16xf32>) -> tensor<4x64xf32> {
  // CHECK: %[[F0:.*]] = braid.all_reduce_start sum %{{.*}} on @mesh ["tp"] : tensor<4x16xf32> -> !braid.future<tensor<4x16xf32>>
  %f0 = braid.all_reduce_start sum %x on @mesh ["tp"] : tensor<4x16xf32> -> !braid.future<tensor<4x16xf32>>
  // CHECK: braid.all_gather_start %{{.*}} on @mesh ["tp"] {dim = 1 : i64} : tensor<4x16xf32> -> !braid.future<tensor<4x64xf32>>
  %f1 = braid.all_gather_start %x on @mesh ["tp"] {dim = 1 : i64} : tensor<4x16xf32> -> !braid.future<tensor<4x64xf32>>
  // CHECK: braid.reduce_scatter_start %{{.*}} on @mesh ["tp"] {dim = 1 : i64} : tensor<4x16xf32> -> !braid.future<tensor<4x4xf32>>
  %f2 = braid.reduce_scatter_start %x on @mesh ["tp"] {dim = 1 : i64} : tensor<4x16xf32> -> !braid.future<tensor<4x4xf32>>
  // CHECK: braid.all_to_all_start %{{.*}} on @mesh ["tp"] {concat_dim = 0 : i64, split_dim = 1 : i64} : tensor<4x16xf32> -> !braid.future<tensor<16x4xf32>>
  %f3 = braid.all_to_all_start %x on @mesh ["tp"] {split_dim = 1 : i64, concat_dim = 0 : i64} : tensor<4x16xf32> -> !braid.future<tensor<16x4xf32>>
  // CHECK: braid.broadcast_from_start %{{.*}} on @mesh ["dp"] {root = 1 : i64} : tensor<4x16xf32> -> !braid.future<tensor<4x16xf32>>
  %f4 = braid.broadcast_from_start %x on @mesh ["dp"] {root = 1 : i64} : tensor<4x16xf32> -> !braid.future<tensor<4x16xf32>>
  // CHECK: braid.wait %[[F0]] : !braid.future<tensor<4x16xf32>>
  %0 = braid.wait %f0 : !braid.future<tensor<4x16xf32>>
  %1 = braid.wait %f1 : !braid.future<tensor<4x64xf32>>
  %2 = braid.wait %f2 : !braid.future<tensor<4x4xf32>>
  %3 = braid.wait %f3 : !braid.future<tensor<16x4xf32>>
  %4 = braid.wait %f4 : !braid.future<tensor<4x16xf32>>
  return %1 : tensor<4x64xf32>
}

// Tests a layer that yields a future and a repeat returning the future of
// the stack (one collective per instance), waited for after it.
// CHECK-LABEL: braid.layer @reduced
// CHECK: braid.yield %{{.*}} : !braid.future<tensor<4x16xf32>>
braid.layer @reduced(%x: tensor<4x16xf32>) -> !braid.future<tensor<4x16xf32>> {
  %f = braid.all_reduce_start sum %x on @mesh ["dp"] : tensor<4x16xf32> -> !braid.future<tensor<4x16xf32>>
  braid.yield %f : !braid.future<tensor<4x16xf32>>
}

// CHECK-LABEL: func.func @stacked_future
func.func @stacked_future(%xs: tensor<3x4x16xf32>) -> tensor<3x4x16xf32> {
  // CHECK: %[[F:.*]] = braid.repeat @reduced(%{{.*}}) {carried = 0 : i64, count = 3 : i64} : (tensor<3x4x16xf32>) -> !braid.future<tensor<3x4x16xf32>>
  %f = braid.repeat @reduced(%xs) {count = 3 : i64, carried = 0 : i64} : (tensor<3x4x16xf32>) -> !braid.future<tensor<3x4x16xf32>>
  // CHECK: braid.wait %[[F]] : !braid.future<tensor<3x4x16xf32>>
  %y = braid.wait %f : !braid.future<tensor<3x4x16xf32>>
  return %y : tensor<3x4x16xf32>
}
