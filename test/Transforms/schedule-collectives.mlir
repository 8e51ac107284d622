// RUN: braid-opt %s --split-input-file --braid-schedule-collectives | FileCheck %s
// RUN: braid-opt %s --split-input-file --braid-schedule-collectives=max-in-flight=1 | FileCheck %s --check-prefix=ONE
// RUN: not braid-opt %s --split-input-file --braid-schedule-collectives=max-in-flight=0 2>&1 | FileCheck %s --check-prefix=ZERO

// ZERO: braid-schedule-collectives: max-in-flight must be at least 1, got 0

// Tests that a start moves up to just after its operand, above compute and
// a layer repeat it does not depend on, pulling the cheap op that produces
// its operand (the scale) ahead of the repeat; and that the wait, with the
// add that uses it, moves down below the independent matmul to where the
// store needs it.

braid.mesh @mesh {axes = ["dp"], shape = array<i64: 2>}

braid.layer @block(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %w = braid.param "w" {init = #braid.init<ones>} : tensor<8x8xf32>
  %y = braid.matmul %x, %w : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
  braid.yield %y : tensor<2x8xf32>
}

// CHECK-LABEL: func.func @early_late
// CHECK-SAME: (%[[G:.*]]: tensor<2x8xf32>, %[[X:.*]]: tensor<2x8xf32>, %[[B:.*]]: tensor<8x8xf32>)
// CHECK-NEXT: %[[S:.*]] = braid.mul %[[G]], %[[G]]
// CHECK-NEXT: %[[F:.*]] = braid.all_reduce_start sum %[[S]] on @mesh ["dp"]
// CHECK-NEXT: %[[H:.*]] = braid.matmul %[[X]], %[[B]]
// CHECK-NEXT: %[[R:.*]] = braid.repeat @block(%[[H]])
// CHECK-NEXT: %[[M:.*]] = braid.matmul %[[R]], %[[B]]
// CHECK-NEXT: %[[Y:.*]] = braid.wait %[[F]]
// CHECK-NEXT: %[[Z:.*]] = braid.add %[[Y]], %[[M]]
// CHECK-NEXT: braid.store_param "acc", %[[Z]]
// CHECK-NEXT: return
func.func @early_late(%g: tensor<2x8xf32>, %x: tensor<2x8xf32>, %b: tensor<8x8xf32>) {
  %h = braid.matmul %x, %b : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
  %r = braid.repeat @block(%h) {prefix = "h", count = 2 : i64} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %s = braid.mul %g, %g : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %f = braid.all_reduce_start sum %s on @mesh ["dp"] : tensor<2x8xf32> -> !braid.future<tensor<2x8xf32>>
  %y = braid.wait %f : !braid.future<tensor<2x8xf32>>
  %m = braid.matmul %r, %b : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
  %z = braid.add %y, %m : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  braid.store_param "acc", %z : tensor<2x8xf32>
  return
}

// -----

// Tests what does not move: a start whose operand is defined just before
// it (by a repeat, which is never pulled ahead), a wait whose result the
// next op (a repeat) needs, and starts and waits around a store of a
// parameter whose buffer they may read (a started all_gather reads its
// operand until its wait, and a parameter read shares the parameter's
// buffer): the wait of "p" stays above the store of "p", and the start on
// "q" read before its store stays below that store. The start on "q" still
// moves above the matmul it does not need.

braid.mesh @mesh {axes = ["dp"], shape = array<i64: 2>}

braid.layer @block(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %w = braid.param "w" {init = #braid.init<ones>} : tensor<8x8xf32>
  %y = braid.matmul %x, %w : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
  braid.yield %y : tensor<2x8xf32>
}

// CHECK-LABEL: func.func @pinned
// CHECK-SAME: (%[[X:.*]]: tensor<2x8xf32>, %[[B:.*]]: tensor<8x8xf32>)
// CHECK-NEXT: %[[P:.*]] = braid.param "p"
// CHECK-NEXT: %[[G:.*]] = braid.all_gather_start %[[P]]
// CHECK-NEXT: %[[R:.*]] = braid.repeat @block(%[[X]])
// CHECK-NEXT: %[[F:.*]] = braid.all_reduce_start sum %[[R]]
// CHECK-NEXT: %[[Y:.*]] = braid.wait %[[F]]
// CHECK-NEXT: %[[R2:.*]] = braid.repeat @block(%[[Y]])
// CHECK-NEXT: %[[WG:.*]] = braid.wait %[[G]]
// CHECK-NEXT: braid.store_param "p", %[[R2]]
// CHECK-NEXT: %[[Q:.*]] = braid.param "q"
// CHECK-NEXT: braid.store_param "q", %[[R2]]
// CHECK-NEXT: %[[GQ:.*]] = braid.all_gather_start %[[Q]]
// CHECK-NEXT: %[[H:.*]] = braid.matmul %[[X]], %[[B]]
// CHECK-NEXT: %[[M:.*]] = braid.matmul %[[H]], %[[B]]
// CHECK-NEXT: %[[WQ:.*]] = braid.wait %[[GQ]]
// CHECK-NEXT: return %[[WG]], %[[WQ]], %[[M]]
func.func @pinned(%x: tensor<2x8xf32>, %b: tensor<8x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<2x8xf32>) {
  %p = braid.param "p" {init = #braid.init<ones>} : tensor<2x8xf32>
  %g = braid.all_gather_start %p on @mesh ["dp"] {dim = 0 : i64} : tensor<2x8xf32> -> !braid.future<tensor<4x8xf32>>
  %r = braid.repeat @block(%x) {prefix = "h", count = 2 : i64} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %f = braid.all_reduce_start sum %r on @mesh ["dp"] : tensor<2x8xf32> -> !braid.future<tensor<2x8xf32>>
  %y = braid.wait %f : !braid.future<tensor<2x8xf32>>
  %r2 = braid.repeat @block(%y) {prefix = "g", count = 1 : i64} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %w = braid.wait %g : !braid.future<tensor<4x8xf32>>
  braid.store_param "p", %r2 : tensor<2x8xf32>
  %q = braid.param "q" {init = #braid.init<ones>} : tensor<2x8xf32>
  braid.store_param "q", %r2 : tensor<2x8xf32>
  %h = braid.matmul %x, %b : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
  %gq = braid.all_gather_start %q on @mesh ["dp"] {dim = 0 : i64} : tensor<2x8xf32> -> !braid.future<tensor<4x8xf32>>
  %m = braid.matmul %h, %b : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
  %wq = braid.wait %gq : !braid.future<tensor<4x8xf32>>
  return %w, %wq, %m : tensor<4x8xf32>, tensor<4x8xf32>, tensor<2x8xf32>
}

// -----

// Tests the bound on collectives in flight: with the default (8) both
// reductions start before the repeat; with max-in-flight=1 the second
// starts where it was (the first is still in flight). Also tests a layer
// body: the wait and the op using its result move below the independent
// matmul.

braid.mesh @mesh {axes = ["dp"], shape = array<i64: 2>}

braid.layer @block(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %w = braid.param "w" {init = #braid.init<ones>} : tensor<8x8xf32>
  %y = braid.matmul %x, %w : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
  braid.yield %y : tensor<2x8xf32>
}

// CHECK-LABEL: func.func @bounded
// CHECK-SAME: (%[[A:.*]]: tensor<2x8xf32>, %[[B:.*]]: tensor<2x8xf32>, %[[X:.*]]: tensor<2x8xf32>)
// CHECK-NEXT: %[[FA:.*]] = braid.all_reduce_start sum %[[A]]
// CHECK-NEXT: %[[FB:.*]] = braid.all_reduce_start sum %[[B]]
// CHECK-NEXT: %[[R:.*]] = braid.repeat @block(%[[X]])
// CHECK-NEXT: %[[WA:.*]] = braid.wait %[[FA]]
// CHECK-NEXT: %[[WB:.*]] = braid.wait %[[FB]]
// CHECK-NEXT: return %[[WA]], %[[WB]], %[[R]]
// ONE-LABEL: func.func @bounded
// ONE-SAME: (%[[A:.*]]: tensor<2x8xf32>, %[[B:.*]]: tensor<2x8xf32>, %[[X:.*]]: tensor<2x8xf32>)
// ONE-NEXT: %[[FA:.*]] = braid.all_reduce_start sum %[[A]]
// ONE-NEXT: %[[R:.*]] = braid.repeat @block(%[[X]])
// ONE-NEXT: %[[FB:.*]] = braid.all_reduce_start sum %[[B]]
// ONE-NEXT: %[[WA:.*]] = braid.wait %[[FA]]
// ONE-NEXT: %[[WB:.*]] = braid.wait %[[FB]]
// ONE-NEXT: return %[[WA]], %[[WB]], %[[R]]
func.func @bounded(%a: tensor<2x8xf32>, %b: tensor<2x8xf32>, %x: tensor<2x8xf32>) -> (tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>) {
  %r = braid.repeat @block(%x) {prefix = "h", count = 2 : i64} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %fa = braid.all_reduce_start sum %a on @mesh ["dp"] : tensor<2x8xf32> -> !braid.future<tensor<2x8xf32>>
  %wa = braid.wait %fa : !braid.future<tensor<2x8xf32>>
  %fb = braid.all_reduce_start sum %b on @mesh ["dp"] : tensor<2x8xf32> -> !braid.future<tensor<2x8xf32>>
  %wb = braid.wait %fb : !braid.future<tensor<2x8xf32>>
  return %wa, %wb, %r : tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>
}

// CHECK-LABEL: braid.layer @grads
// CHECK-NEXT: %[[F:.*]] = braid.all_reduce_start sum
// CHECK-NEXT: %[[M:.*]] = braid.matmul
// CHECK-NEXT: %[[W:.*]] = braid.wait %[[F]]
// CHECK-NEXT: %[[S:.*]] = braid.mul %[[W]], %[[W]]
// CHECK-NEXT: braid.yield %[[S]], %[[M]]
braid.layer @grads(%g: tensor<2x8xf32>, %x: tensor<2x8xf32>, %b: tensor<8x8xf32>) -> (tensor<2x8xf32>, tensor<2x8xf32>) {
  %f = braid.all_reduce_start sum %g on @mesh ["dp"] : tensor<2x8xf32> -> !braid.future<tensor<2x8xf32>>
  %w = braid.wait %f : !braid.future<tensor<2x8xf32>>
  %s = braid.mul %w, %w : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %m = braid.matmul %x, %b : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
  braid.yield %s, %m : tensor<2x8xf32>, tensor<2x8xf32>
}
