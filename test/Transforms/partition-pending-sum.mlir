// RUN: braid-opt %s -split-input-file -verify-diagnostics --braid-propagate-sharding --braid-partition | FileCheck %s

// Tests a state tensor marked braid.pending_sum (braid-train-step's
// defer-validation keeps a step's gradient sum of squares so): a pending
// sum stored into it is stored as each device's share, and the read of it
// earlier in the step (the value the previous call stored) is reduced
// right after the read, so that the all_reduce can overlap what runs
// before the read's first use. Without the attribute the store reduces
// first, as for any parameter.

// CHECK-LABEL: func.func @pending
// CHECK-NEXT: %[[OLD:.*]] = braid.param "sum" {braid.pending_sum, {{.*}}state} : tensor<f32>
// CHECK-NEXT: %[[OLDSUM:.*]] = braid.all_reduce sum %[[OLD]] on @mesh ["dp"]
// CHECK: %[[S:.*]] = braid.sum_squares
// CHECK-NOT: braid.all_reduce
// CHECK: braid.store_param "sum", %[[S]] {braid.pending_sum} : tensor<f32>
// CHECK-NEXT: %[[R:.*]] = braid.sqrt %[[OLDSUM]]
// CHECK-NEXT: return %[[R]]
braid.mesh @mesh {axes = ["dp"], shape = array<i64: 2>}
func.func @pending(%g: tensor<8xf32> {braid.sharding = #braid.sharding<@mesh, [["dp"]]>}) -> tensor<f32> {
  %old = braid.param "sum" {init = #braid.init<zeros>, state, braid.pending_sum} : tensor<f32>
  %s = braid.sum_squares %g : (tensor<8xf32>) -> tensor<f32>
  braid.store_param "sum", %s {braid.pending_sum} : tensor<f32>
  %r = braid.sqrt %old : tensor<f32>
  return %r : tensor<f32>
}

// -----

// CHECK-LABEL: func.func @plain
// CHECK-NEXT: %[[OLD:.*]] = braid.param "sum"
// CHECK: %[[S:.*]] = braid.sum_squares
// CHECK-NEXT: %[[SUM:.*]] = braid.all_reduce sum %[[S]] on @mesh ["dp"]
// CHECK-NEXT: braid.store_param "sum", %[[SUM]]
// CHECK-NEXT: %[[R:.*]] = braid.sqrt %[[OLD]]
braid.mesh @mesh {axes = ["dp"], shape = array<i64: 2>}
func.func @plain(%g: tensor<8xf32> {braid.sharding = #braid.sharding<@mesh, [["dp"]]>}) -> tensor<f32> {
  %old = braid.param "sum" {init = #braid.init<zeros>, state} : tensor<f32>
  %s = braid.sum_squares %g : (tensor<8xf32>) -> tensor<f32>
  braid.store_param "sum", %s : tensor<f32>
  %r = braid.sqrt %old : tensor<f32>
  return %r : tensor<f32>
}

// -----

// A replicated value needs no reduction: stored and read as is.
// CHECK-LABEL: func.func @whole
// CHECK-NOT: braid.all_reduce
// CHECK: return
braid.mesh @mesh {axes = ["dp"], shape = array<i64: 2>}
func.func @whole(%g: tensor<8xf32>) -> tensor<f32> {
  %old = braid.param "sum" {init = #braid.init<zeros>, state, braid.pending_sum} : tensor<f32>
  %s = braid.sum_squares %g : (tensor<8xf32>) -> tensor<f32>
  braid.store_param "sum", %s {braid.pending_sum} : tensor<f32>
  %r = braid.sqrt %old : tensor<f32>
  return %r : tensor<f32>
}

// -----

braid.mesh @mesh {axes = ["dp"], shape = array<i64: 2>}
func.func @store_first(%g: tensor<8xf32> {braid.sharding = #braid.sharding<@mesh, [["dp"]]>}) {
  %s = braid.sum_squares %g : (tensor<8xf32>) -> tensor<f32>
  // expected-error@+1 {{stores the pending sum 'sum', which no braid.param}}
  braid.store_param "sum", %s {braid.pending_sum} : tensor<f32>
  return
}
