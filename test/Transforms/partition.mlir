// RUN: braid-opt %s -split-input-file --braid-propagate-sharding --braid-partition | FileCheck %s

// Tests Megatron's MLP on dp x tp: the column-parallel first matmul needs
// no communication, the row-parallel second one leaves a partial sum that
// exactly one all_reduce over tp resolves; the batch split over dp needs
// none in the forward pass. The replicated result is gathered over dp.

// CHECK-LABEL: func.func @mlp
// CHECK-SAME: (%[[X:.*]]: tensor<2x8xf32> {braid.block_of = #braid.sharding<@mesh, {{\[}}["dp"], []]>}) -> tensor<4x8xf32>
// CHECK: %[[W1:.*]] = braid.param "w1" {block_of = #braid.sharding<@mesh, {{\[}}[], ["tp"]]>, {{.*}}} : tensor<8x8xf32>
// CHECK: %[[H:.*]] = braid.matmul %[[X]], %[[W1]] : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
// CHECK: %[[A:.*]] = braid.gelu tanh %[[H]] : tensor<2x8xf32>
// CHECK: %[[W2:.*]] = braid.param "w2" {block_of = #braid.sharding<@mesh, {{\[}}["tp"], []]>, {{.*}}} : tensor<8x8xf32>
// CHECK: %[[P:.*]] = braid.matmul %[[A]], %[[W2]] : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
// CHECK-COUNT-1: braid.all_reduce
// CHECK-NEXT: %[[Y:.*]] = braid.all_gather %{{.*}} on @mesh ["dp"] {{{.*}}dim = 0 : i64} : (tensor<2x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: return %[[Y]]
braid.mesh @mesh {axes = ["dp", "tp"], shape = array<i64: 2, 2>}
func.func @mlp(%x: tensor<4x8xf32> {braid.sharding = #braid.sharding<@mesh, [["dp"], []]>}) -> tensor<4x8xf32> {
  %w1 = braid.param "w1" {init = #braid.init<normal(0.5)>} : tensor<8x16xf32>
  %w1s = braid.shard %w1 : tensor<8x16xf32> to #braid.sharding<@mesh, [[], ["tp"]]>
  %h = braid.matmul %x, %w1s : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %a = braid.gelu tanh %h : tensor<4x16xf32>
  %w2 = braid.param "w2" {init = #braid.init<normal(0.5)>} : tensor<16x8xf32>
  %w2s = braid.shard %w2 : tensor<16x8xf32> to #braid.sharding<@mesh, [["tp"], []]>
  %y = braid.matmul %a, %w2s : (tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// Tests that a pending sum consumed split over the summed axis becomes a
// reduce_scatter (as sequence parallelism needs), not an all_reduce.

// CHECK-LABEL: func.func @scatter
// CHECK: %[[P:.*]] = braid.matmul
// CHECK-NOT: braid.all_reduce
// CHECK: braid.reduce_scatter %[[P]] on @mesh ["tp"] {{{.*}}dim = 0 : i64} : (tensor<4x8xf32>) -> tensor<2x8xf32>
braid.mesh @mesh {axes = ["tp"], shape = array<i64: 2>}
func.func @scatter(%x: tensor<4x16xf32> {braid.sharding = #braid.sharding<@mesh, [[], ["tp"]]>}) -> (tensor<4x8xf32> {braid.sharding = #braid.sharding<@mesh, [["tp"], []]>}) {
  %w = braid.param "w" {init = #braid.init<normal(0.5)>} : tensor<16x8xf32>
  %ws = braid.shard %w : tensor<16x8xf32> to #braid.sharding<@mesh, [["tp"], []]>
  %y = braid.matmul %x, %ws : (tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// Tests that a sum of pending sums wanted split over the summed axis is
// formed first and reduce-scattered once (sequence parallelism's
// dq + dk + dv in the backward pass), not reduce-scattered term by term.

// CHECK-LABEL: func.func @scatter_sum
// CHECK-NOT: braid.reduce_scatter
// CHECK: %[[S:.*]] = braid.add %{{.*}}, %{{.*}} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NOT: braid.reduce_scatter
// CHECK: %[[T:.*]] = braid.add %[[S]], %{{.*}} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: %[[R:.*]] = braid.reduce_scatter %[[T]] on @mesh ["tp"] {{{.*}}dim = 0 : i64} : (tensor<4x8xf32>) -> tensor<2x8xf32>
// CHECK-NOT: braid.reduce_scatter
// CHECK-NOT: braid.all_
// CHECK: return %[[R]]
braid.mesh @mesh {axes = ["tp"], shape = array<i64: 2>}
func.func @scatter_sum(%x: tensor<4x16xf32> {braid.sharding = #braid.sharding<@mesh, [[], ["tp"]]>}) -> (tensor<4x8xf32> {braid.sharding = #braid.sharding<@mesh, [["tp"], []]>}) {
  %a = braid.param "a" {init = #braid.init<normal(0.5)>} : tensor<16x8xf32>
  %as = braid.shard %a : tensor<16x8xf32> to #braid.sharding<@mesh, [["tp"], []]>
  %b = braid.param "b" {init = #braid.init<normal(0.5)>} : tensor<16x8xf32>
  %bs = braid.shard %b : tensor<16x8xf32> to #braid.sharding<@mesh, [["tp"], []]>
  %c = braid.param "c" {init = #braid.init<normal(0.5)>} : tensor<16x8xf32>
  %cs = braid.shard %c : tensor<16x8xf32> to #braid.sharding<@mesh, [["tp"], []]>
  %ya = braid.matmul %x, %as : (tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
  %yb = braid.matmul %x, %bs : (tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
  %yc = braid.matmul %x, %cs : (tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
  %s = braid.add %ya, %yb : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %t = braid.add %s, %yc : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %ts = braid.shard %t : tensor<4x8xf32> to #braid.sharding<@mesh, [["tp"], []]>
  return %ts : tensor<4x8xf32>
}

// -----

// Tests that a pending sum is resolved before a linear op whose result is
// larger than its operands (a broadcast wanted split over the summed axis
// all_reduces its small operand, then keeps its share), and before a linear
// op when another op reads it too (one reduce_scatter serves both).

// CHECK-LABEL: func.func @resolve_first
// CHECK: %[[P:.*]] = braid.matmul {{.*}} -> tensor<1x8xf32>
// CHECK-NEXT: %[[R:.*]] = braid.all_reduce sum %[[P]] on @mesh ["tp"]
// CHECK-NOT: braid.reduce_scatter
// CHECK: braid.broadcast %[[R]] : (tensor<1x8xf32>) -> tensor<2x8xf32>
// CHECK-NOT: braid.reduce_scatter
// CHECK-NOT: braid.all_reduce
// CHECK: %[[Q:.*]] = braid.matmul {{.*}} -> tensor<4x8xf32>
// CHECK-NEXT: %[[S:.*]] = braid.reduce_scatter %[[Q]] on @mesh ["tp"] {{{.*}}dim = 0 : i64} : (tensor<4x8xf32>) -> tensor<2x8xf32>
// CHECK-NOT: braid.reduce_scatter
// CHECK-NOT: braid.all_reduce
// CHECK: braid.neg %[[S]] : tensor<2x8xf32>
// CHECK-NOT: braid.reduce_scatter
// CHECK-NOT: braid.all_reduce
// CHECK: braid.exp %[[S]] : tensor<2x8xf32>
// CHECK-NOT: braid.reduce_scatter
// CHECK-NOT: braid.all_reduce
// CHECK: return
braid.mesh @mesh {axes = ["tp"], shape = array<i64: 2>}
func.func @resolve_first(%x: tensor<1x16xf32> {braid.sharding = #braid.sharding<@mesh, [[], ["tp"]]>}, %z: tensor<4x16xf32> {braid.sharding = #braid.sharding<@mesh, [[], ["tp"]]>}) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) {
  %w = braid.param "w" {init = #braid.init<normal(0.5)>} : tensor<16x8xf32>
  %ws = braid.shard %w : tensor<16x8xf32> to #braid.sharding<@mesh, [["tp"], []]>
  %p = braid.matmul %x, %ws : (tensor<1x16xf32>, tensor<16x8xf32>) -> tensor<1x8xf32>
  %b = braid.broadcast %p : (tensor<1x8xf32>) -> tensor<4x8xf32>
  %bs = braid.shard %b : tensor<4x8xf32> to #braid.sharding<@mesh, [["tp"], []]>
  %q = braid.matmul %z, %ws : (tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
  %n = braid.neg %q : tensor<4x8xf32>
  %ns = braid.shard %n : tensor<4x8xf32> to #braid.sharding<@mesh, [["tp"], []]>
  %e = braid.exp %q : tensor<4x8xf32>
  %es = braid.shard %e : tensor<4x8xf32> to #braid.sharding<@mesh, [["tp"], []]>
  return %bs, %ns, %es : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// Tests a mean over a batch split over dp = 3: each device's mean is
// divided by the number of devices before the sum. The count is an integer
// constant, exact in any precision (1/3 rounded to f32 is not).

// CHECK-LABEL: func.func @loss
// CHECK: %[[L:.*]] = braid.cross_entropy %{{.*}}, %{{.*}} : (tensor<2x5xf32>, tensor<2xi32>) -> tensor<f32>
// CHECK: %[[N:.*]] = braid.constant dense<3.000000e+00> : tensor<f32>
// CHECK: %[[W:.*]] = braid.div %[[L]], %[[N]]
// CHECK: braid.all_reduce sum %[[W]] on @mesh ["dp"] {{.*}}: tensor<f32>
braid.mesh @mesh {axes = ["dp"], shape = array<i64: 3>}
func.func @loss(%l: tensor<6x5xf32> {braid.sharding = #braid.sharding<@mesh, [["dp"], []]>},
                %y: tensor<6xi32> {braid.sharding = #braid.sharding<@mesh, [["dp"]]>}) -> tensor<f32> {
  %c = braid.cross_entropy %l, %y : (tensor<6x5xf32>, tensor<6xi32>) -> tensor<f32>
  return %c : tensor<f32>
}
