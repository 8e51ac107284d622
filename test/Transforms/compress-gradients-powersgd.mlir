// RUN: braid-opt %s --split-input-file --braid-compress-gradients="format=powersgd rank=1" | FileCheck %s
// RUN: braid-opt %s --split-input-file --braid-compress-gradients="format=powersgd rank=1" --braid-async-collectives --braid-schedule-collectives | FileCheck %s --check-prefix=ASYNC
// RUN: braid-opt %s --split-input-file --braid-compress-gradients="format=powersgd rank=1" --braid-comm-report -o /dev/null | FileCheck %s --check-prefix=REPORT

// Tests that on a dp x tp mesh the PowerSGD state of a dp reduction is per
// tp block (the gradient is this device's block): Q is its block of a
// tensor split over tp, the error its block of one split over dp and tp;
// that the state is read first in the block; and that a start scheduled
// as early as its operand allows still comes after those reads.

braid.mesh @mesh {axes = ["dp", "tp"], shape = array<i64: 2, 2>}

// CHECK-LABEL: func.func @tp_block
// CHECK-NEXT: braid.param "powersgd.tp_block.0.q" {block_of = #braid.sharding<@mesh, {{\[\["tp"\], \[\]\]}}>, init = #braid.init<normal(1.000000e+00)>, state} : tensor<3x1xf32>
// CHECK-NEXT: braid.param "powersgd.tp_block.0.error" {block_of = #braid.sharding<@mesh, {{\[\["dp", "tp"\], \[\]\]}}>, init = #braid.init<zeros>, state} : tensor<4x3xf32>
// CHECK-NEXT: braid.param "powersgd.tp_block.1.q"
// CHECK-NEXT: braid.param "powersgd.tp_block.1.error"
// CHECK: braid.all_reduce sum %{{.*}} on @mesh ["dp"] {braid.compress = "powersgd", braid.powersgd = {error = "powersgd.tp_block.0.error", q = "powersgd.tp_block.0.q", rank = 1 : i64}} : tensor<4x3xf32>
// CHECK: braid.all_reduce sum %{{.*}} on @mesh ["dp"] {braid.compress = "powersgd", braid.powersgd = {error = "powersgd.tp_block.1.error", q = "powersgd.tp_block.1.q", rank = 1 : i64}} : tensor<4x3xf32>
// ASYNC-LABEL: func.func @tp_block
// ASYNC: braid.param "powersgd.tp_block.0.q"
// ASYNC-NEXT: braid.param "powersgd.tp_block.0.error"
// ASYNC: braid.all_reduce_start sum {{.*}}error = "powersgd.tp_block.0.error"
// ASYNC: braid.param "powersgd.tp_block.1.q"
// ASYNC-NEXT: braid.param "powersgd.tp_block.1.error"
// ASYNC: braid.all_reduce_start sum {{.*}}error = "powersgd.tp_block.1.error"
// ASYNC-LABEL: func.func @dp_only
// ASYNC: braid.param "powersgd.dp_only.0.q"
// ASYNC-NEXT: braid.param "powersgd.dp_only.0.error"
// ASYNC: braid.all_reduce_start sum {{.*}}error = "powersgd.dp_only.0.error"
func.func @tp_block(%w: tensor<4x3xf32>) -> (tensor<4x3xf32>, tensor<4x3xf32>) {
  %x = braid.mul %w, %w : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  %r = braid.all_reduce sum %x on @mesh ["dp"] : tensor<4x3xf32>
  %y = braid.add %w, %w : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  %s = braid.all_reduce sum %y on @mesh ["dp"] : tensor<4x3xf32>
  return %r, %s : tensor<4x3xf32>, tensor<4x3xf32>
}

// -----

// Tests that on a mesh whose other axes have one device the state is as
// on a dp mesh: Q replicated, the error split over dp.

braid.mesh @mesh {axes = ["dp", "tp"], shape = array<i64: 2, 1>}

// CHECK-LABEL: func.func @dp_only
// CHECK-NEXT: braid.param "powersgd.dp_only.0.q" {init = #braid.init<normal(1.000000e+00)>, state} : tensor<3x1xf32>
// CHECK-NEXT: braid.param "powersgd.dp_only.0.error" {block_of = #braid.sharding<@mesh, {{\[\["dp"\], \[\]\]}}>, init = #braid.init<zeros>, state} : tensor<4x3xf32>
func.func @dp_only(%w: tensor<4x3xf32>) -> tensor<4x3xf32> {
  %x = braid.mul %w, %w : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  %r = braid.all_reduce sum %x on @mesh ["dp"] : tensor<4x3xf32>
  return %r : tensor<4x3xf32>
}

// -----

// Tests that a stacked gradient (a repeat's instances, as a pipeline returns
// them) is a batch of matrices, each with its own state, and that
// braid-comm-report counts P and Q per matrix: 2 x (4 + 3) x 1 floats, two
// all_reduces each, instead of 2 x 4 x 3.

braid.mesh @mesh {axes = ["dp"], shape = array<i64: 2>}

// CHECK-LABEL: func.func @stacked
// CHECK-NEXT: braid.param "powersgd.stacked.0.q" {init = #braid.init<normal(1.000000e+00)>, state} : tensor<2x3x1xf32>
// CHECK-NEXT: braid.param "powersgd.stacked.0.error" {block_of = #braid.sharding<@mesh, {{\[\["dp"\], \[\], \[\]\]}}>, init = #braid.init<zeros>, state} : tensor<2x4x3xf32>
// CHECK: braid.all_reduce sum %{{.*}} on @mesh ["dp"] {braid.compress = "powersgd", braid.powersgd = {error = "powersgd.stacked.0.error", q = "powersgd.stacked.0.q", rank = 1 : i64}} : tensor<2x4x3xf32>
// REPORT-LABEL: braid-comm-report: @stacked
// REPORT: all_reduce dp 2 96 56 {{.*}} [powersgd]
// REPORT: compressed gradient reductions: sent 56 bytes instead of 96, saved 40 bytes
func.func @stacked(%w: tensor<2x4x3xf32>) -> tensor<2x4x3xf32> {
  %r = braid.all_reduce sum %w on @mesh ["dp"] : tensor<2x4x3xf32>
  return %r : tensor<2x4x3xf32>
}

// -----

// Tests that a reduce_scatter of a matrix (ZeRO's gradient reduction) is
// marked too, its state shaped like its input (the whole local gradient),
// and that braid-comm-report counts the all_reduces of P and Q it sends,
// (8 + 6) x 1 floats at 2 x (2 - 1) / 2 = 56 bytes, instead of the
// reduce_scatter's 192 x (2 - 1) / 2 = 96.

braid.mesh @mesh {axes = ["dp"], shape = array<i64: 2>}

// CHECK-LABEL: func.func @scattered
// CHECK-NEXT: braid.param "powersgd.scattered.0.q" {init = #braid.init<normal(1.000000e+00)>, state} : tensor<6x1xf32>
// CHECK-NEXT: braid.param "powersgd.scattered.0.error" {block_of = #braid.sharding<@mesh, {{\[\["dp"\], \[\]\]}}>, init = #braid.init<zeros>, state} : tensor<8x6xf32>
// CHECK: braid.reduce_scatter %{{.*}} on @mesh ["dp"] {braid.compress = "powersgd", braid.powersgd = {error = "powersgd.scattered.0.error", q = "powersgd.scattered.0.q", rank = 1 : i64}, dim = 0 : i64} : (tensor<8x6xf32>) -> tensor<4x6xf32>
// REPORT-LABEL: braid-comm-report: @scattered
// REPORT: reduce_scatter dp 2 192 56 {{.*}} [powersgd]
// REPORT: compressed gradient reductions: sent 56 bytes instead of 96, saved 40 bytes
func.func @scattered(%w: tensor<8x6xf32>) -> tensor<4x6xf32> {
  %r = braid.reduce_scatter %w on @mesh ["dp"] {dim = 0 : i64} : (tensor<8x6xf32>) -> tensor<4x6xf32>
  return %r : tensor<4x6xf32>
}
