// RUN: braid-opt %s --split-input-file --braid-schedule-collectives | braid-opt --split-input-file | FileCheck %s
// RUN: braid-opt %s --split-input-file --braid-schedule-collectives=max-in-flight=1 | FileCheck %s --check-prefix=ONE
// RUN: braid-opt %s --split-input-file --braid-schedule-collectives=across-repeats=false | FileCheck %s --check-prefix=OFF
// RUN: braid-opt %s --split-input-file --braid-schedule-collectives=max-in-flight=3 | FileCheck %s --check-prefix=THREE
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

// -----

// Tests that a layer is split at the wait of its gradient bucket: @grad
// yields the future (and its other result), the repeat returns the future
// of the stack (one all_reduce per instance, in flight while the next
// instances compute), and the wait and the slices reading the bucket (a
// repeat of the new layer @grad.waited) follow it, below the independent
// matmul, where the store needs them; the results keep their places. The
// carried layer @carry keeps its wait (its result feeds the next
// instance). With max-in-flight=1 the three instances' collectives would
// not fit, and with across-repeats=false nothing is split.

braid.mesh @mesh {axes = ["dp"], shape = array<i64: 2>}

// CHECK-LABEL: braid.layer @grad(
// CHECK-SAME: -> (tensor<2x8xf32>, !braid.future<tensor<32xf32>>)
// CHECK: %[[G:.*]] = braid.mul
// CHECK: %[[F:.*]] = braid.all_reduce_start sum %{{.*}} on @mesh ["dp"] {braid.phase = "W"}
// CHECK-NEXT: braid.yield %[[G]], %[[F]] : tensor<2x8xf32>, !braid.future<tensor<32xf32>>
// CHECK-LABEL: braid.layer @grad.waited(
// CHECK-SAME: %[[R:.*]]: tensor<32xf32>) -> (tensor<2x8xf32>, tensor<2x8xf32>)
// CHECK-NEXT: %[[S0:.*]] = braid.slice %[[R]] {limit = array<i64: 16>, start = array<i64: 0>}
// CHECK-NEXT: %[[G0:.*]] = braid.reshape %[[S0]]
// CHECK-NEXT: %[[S1:.*]] = braid.slice %[[R]] {limit = array<i64: 32>, start = array<i64: 16>}
// CHECK-NEXT: %[[G1:.*]] = braid.reshape %[[S1]]
// CHECK-NEXT: braid.yield %[[G0]], %[[G1]]
// CHECK-LABEL: braid.layer @carry(
// CHECK: braid.all_reduce_start
// CHECK-NEXT: braid.wait
// CHECK-NEXT: braid.yield
// CHECK-LABEL: func.func @step
// CHECK-SAME: (%[[XS:.*]]: tensor<3x2x8xf32>, %[[DS:.*]]: tensor<3x2x8xf32>, %[[A:.*]]: tensor<8x8xf32>, %[[C:.*]]: tensor<2x8xf32>)
// CHECK-NEXT: %[[CR:.*]] = braid.repeat @carry(%[[C]])
// CHECK-NEXT: %[[H:.*]]:2 = braid.repeat @grad(%[[XS]], %[[DS]]) {{.*}} : (tensor<3x2x8xf32>, tensor<3x2x8xf32>) -> (tensor<3x2x8xf32>, !braid.future<tensor<3x32xf32>>)
// CHECK-NEXT: %[[M:.*]] = braid.matmul %[[A]], %[[A]]
// CHECK-NEXT: %[[W:.*]] = braid.wait %[[H]]#1 {braid.phase = "W"} : !braid.future<tensor<3x32xf32>>
// CHECK-NEXT: %[[T:.*]]:2 = braid.repeat @grad.waited(%[[W]]) {{.*}}count = 3 : i64{{.*}} : (tensor<3x32xf32>) -> (tensor<3x2x8xf32>, tensor<3x2x8xf32>)
// CHECK-NEXT: %[[N:.*]] = braid.add %[[T]]#0, %[[T]]#1
// CHECK-NEXT: braid.store_param "acc", %[[N]]
// CHECK-NEXT: return %[[N]], %[[H]]#0, %[[M]], %[[CR]]
// ONE-LABEL: braid.layer @grad(
// ONE: braid.wait
// ONE-NOT: grad.waited
// OFF-LABEL: braid.layer @grad(
// OFF: braid.wait
// OFF-NOT: grad.waited

braid.layer @grad(%x: tensor<2x8xf32>, %d: tensor<2x8xf32>) -> (tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>) {
  %g = braid.mul %x, %d : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %fg = braid.reshape %g : (tensor<2x8xf32>) -> tensor<16xf32>
  %fd = braid.reshape %d : (tensor<2x8xf32>) -> tensor<16xf32>
  %all = braid.concat %fg, %fd {axis = 0 : i64} : (tensor<16xf32>, tensor<16xf32>) -> tensor<32xf32>
  %f = braid.all_reduce_start sum %all on @mesh ["dp"] {braid.phase = "W"} : tensor<32xf32> -> !braid.future<tensor<32xf32>>
  %r = braid.wait %f {braid.phase = "W"} : !braid.future<tensor<32xf32>>
  %s0 = braid.slice %r {limit = array<i64: 16>, start = array<i64: 0>} : (tensor<32xf32>) -> tensor<16xf32>
  %g0 = braid.reshape %s0 : (tensor<16xf32>) -> tensor<2x8xf32>
  %s1 = braid.slice %r {limit = array<i64: 32>, start = array<i64: 16>} : (tensor<32xf32>) -> tensor<16xf32>
  %g1 = braid.reshape %s1 : (tensor<16xf32>) -> tensor<2x8xf32>
  braid.yield %g0, %g, %g1 : tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>
}

braid.layer @carry(%h: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %f = braid.all_reduce_start sum %h on @mesh ["dp"] : tensor<2x8xf32> -> !braid.future<tensor<2x8xf32>>
  %r = braid.wait %f : !braid.future<tensor<2x8xf32>>
  braid.yield %r : tensor<2x8xf32>
}

func.func @step(%xs: tensor<3x2x8xf32>, %ds: tensor<3x2x8xf32>, %a: tensor<8x8xf32>, %c: tensor<2x8xf32>) -> (tensor<3x2x8xf32>, tensor<3x2x8xf32>, tensor<8x8xf32>, tensor<2x8xf32>) {
  %cr = braid.repeat @carry(%c) {count = 2 : i64} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %g0, %g, %g1 = braid.repeat @grad(%xs, %ds) {braid.phase = "W", carried = 0 : i64, count = 3 : i64, prefix = "h"} : (tensor<3x2x8xf32>, tensor<3x2x8xf32>) -> (tensor<3x2x8xf32>, tensor<3x2x8xf32>, tensor<3x2x8xf32>)
  %m = braid.matmul %a, %a : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  %n = braid.add %g0, %g1 : (tensor<3x2x8xf32>, tensor<3x2x8xf32>) -> tensor<3x2x8xf32>
  braid.store_param "acc", %n : tensor<3x2x8xf32>
  return %n, %g, %m, %cr : tensor<3x2x8xf32>, tensor<3x2x8xf32>, tensor<8x8xf32>, tensor<2x8xf32>
}

// -----

// Tests that starts moved early leave room for the collectives that a
// repeat returning futures will have in flight (it keeps its place): with
// max-in-flight=3, the 3 instances of @reduce fill it, so the start on %a
// stays below the repeat; with the default (8) it moves to the top.

braid.mesh @mesh {axes = ["dp"], shape = array<i64: 2>}

braid.layer @reduce(%x: tensor<2x8xf32>) -> !braid.future<tensor<2x8xf32>> {
  %f = braid.all_reduce_start sum %x on @mesh ["dp"] : tensor<2x8xf32> -> !braid.future<tensor<2x8xf32>>
  braid.yield %f : !braid.future<tensor<2x8xf32>>
}

// CHECK-LABEL: func.func @room
// CHECK-SAME: (%[[XS:.*]]: tensor<3x2x8xf32>, %[[A:.*]]: tensor<2x8xf32>)
// CHECK-NEXT: %[[FA:.*]] = braid.all_reduce_start sum %[[A]]
// CHECK-NEXT: %[[F:.*]] = braid.repeat @reduce(%[[XS]])
// CHECK-NEXT: %[[W:.*]] = braid.wait %[[F]]
// CHECK-NEXT: %[[WA:.*]] = braid.wait %[[FA]]
// CHECK-NEXT: return %[[W]], %[[WA]]
// THREE-LABEL: func.func @room
// THREE-SAME: (%[[XS:.*]]: tensor<3x2x8xf32>, %[[A:.*]]: tensor<2x8xf32>)
// THREE-NEXT: %[[F:.*]] = braid.repeat @reduce(%[[XS]])
// THREE-NEXT: %[[FA:.*]] = braid.all_reduce_start sum %[[A]]
func.func @room(%xs: tensor<3x2x8xf32>, %a: tensor<2x8xf32>) -> (tensor<3x2x8xf32>, tensor<2x8xf32>) {
  %f = braid.repeat @reduce(%xs) {carried = 0 : i64, count = 3 : i64} : (tensor<3x2x8xf32>) -> !braid.future<tensor<3x2x8xf32>>
  %fa = braid.all_reduce_start sum %a on @mesh ["dp"] : tensor<2x8xf32> -> !braid.future<tensor<2x8xf32>>
  %w = braid.wait %f : !braid.future<tensor<3x2x8xf32>>
  %wa = braid.wait %fa : !braid.future<tensor<2x8xf32>>
  return %w, %wa : tensor<3x2x8xf32>, tensor<2x8xf32>
}

// -----

// Tests earliest deadline first: both starts can go to the top (their
// operands are products, in buffers of their own), and the one whose result
// is needed first (%f2, by the store of "a") is issued first, although it
// comes second in the block. With max-in-flight=1 only it
// starts early; %f1 stays where it was.

braid.mesh @mesh {axes = ["dp"], shape = array<i64: 2>}

// CHECK-LABEL: func.func @deadline
// CHECK-SAME: (%[[G1:.*]]: tensor<2x8xf32>, %[[G2:.*]]: tensor<2x8xf32>, %[[X:.*]]: tensor<2x8xf32>, %[[B:.*]]: tensor<8x8xf32>)
// CHECK-NEXT: %[[S2:.*]] = braid.matmul %[[G2]], %[[B]]
// CHECK-NEXT: %[[F2:.*]] = braid.all_reduce_start sum %[[S2]]
// CHECK-NEXT: %[[S1:.*]] = braid.matmul %[[G1]], %[[B]]
// CHECK-NEXT: %[[F1:.*]] = braid.all_reduce_start sum %[[S1]]
// CHECK-NEXT: %[[H:.*]] = braid.matmul %[[X]], %[[B]]
// CHECK-NEXT: %[[M:.*]] = braid.matmul %[[H]], %[[B]]
// CHECK-NEXT: %[[Y2:.*]] = braid.wait %[[F2]]
// CHECK-NEXT: %[[Z2:.*]] = braid.add %[[Y2]], %[[M]]
// CHECK-NEXT: braid.store_param "a", %[[Z2]]
// CHECK-NEXT: %[[Y1:.*]] = braid.wait %[[F1]]
// CHECK-NEXT: braid.store_param "b", %[[Y1]]
// ONE-LABEL: func.func @deadline
// ONE-SAME: (%[[G1:.*]]: tensor<2x8xf32>, %[[G2:.*]]: tensor<2x8xf32>, %[[X:.*]]: tensor<2x8xf32>, %[[B:.*]]: tensor<8x8xf32>)
// ONE-NEXT: %[[S2:.*]] = braid.matmul %[[G2]], %[[B]]
// ONE-NEXT: %[[F2:.*]] = braid.all_reduce_start sum %[[S2]]
// ONE-NEXT: %[[H:.*]] = braid.matmul %[[X]], %[[B]]
// ONE-NEXT: %[[S1:.*]] = braid.matmul %[[G1]], %[[B]]
// ONE-NEXT: %[[F1:.*]] = braid.all_reduce_start sum %[[S1]]
// ONE-NEXT: %[[M:.*]] = braid.matmul %[[H]], %[[B]]
// ONE-NEXT: %[[Y2:.*]] = braid.wait %[[F2]]
func.func @deadline(%g1: tensor<2x8xf32>, %g2: tensor<2x8xf32>, %x: tensor<2x8xf32>, %b: tensor<8x8xf32>) {
  %h = braid.matmul %x, %b : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
  %s1 = braid.matmul %g1, %b : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
  %f1 = braid.all_reduce_start sum %s1 on @mesh ["dp"] : tensor<2x8xf32> -> !braid.future<tensor<2x8xf32>>
  %s2 = braid.matmul %g2, %b : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
  %f2 = braid.all_reduce_start sum %s2 on @mesh ["dp"] : tensor<2x8xf32> -> !braid.future<tensor<2x8xf32>>
  %m = braid.matmul %h, %b : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
  %y2 = braid.wait %f2 : !braid.future<tensor<2x8xf32>>
  %z2 = braid.add %y2, %m : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  braid.store_param "a", %z2 : tensor<2x8xf32>
  %y1 = braid.wait %f1 : !braid.future<tensor<2x8xf32>>
  braid.store_param "b", %y1 : tensor<2x8xf32>
  return
}

// -----

// Tests the deadline of a start whose result another start needs: %f1's
// wait is needed by the start %f3, which is placed where it is at the
// latest, before the store that needs %f2, so %f1 still goes first.

braid.mesh @mesh {axes = ["dp"], shape = array<i64: 2>}

// CHECK-LABEL: func.func @chain
// CHECK-SAME: (%[[G1:.*]]: tensor<2x8xf32>, %[[G2:.*]]: tensor<2x8xf32>, %[[B:.*]]: tensor<8x8xf32>)
// CHECK-NEXT: %[[S1:.*]] = braid.matmul %[[G1]], %[[B]]
// CHECK-NEXT: %[[F1:.*]] = braid.all_reduce_start sum %[[S1]]
// CHECK-NEXT: %[[S2:.*]] = braid.matmul %[[G2]], %[[B]]
// CHECK-NEXT: %[[F2:.*]] = braid.all_reduce_start sum %[[S2]]
// CHECK-NEXT: %[[Y1:.*]] = braid.wait %[[F1]]
// CHECK-NEXT: %[[F3:.*]] = braid.all_reduce_start sum %[[Y1]]
// CHECK-NEXT: %[[Y2:.*]] = braid.wait %[[F2]]
// CHECK-NEXT: braid.store_param "a", %[[Y2]]
func.func @chain(%g1: tensor<2x8xf32>, %g2: tensor<2x8xf32>, %b: tensor<8x8xf32>) -> tensor<2x8xf32> {
  %s1 = braid.matmul %g1, %b : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
  %f1 = braid.all_reduce_start sum %s1 on @mesh ["dp"] : tensor<2x8xf32> -> !braid.future<tensor<2x8xf32>>
  %s2 = braid.matmul %g2, %b : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
  %f2 = braid.all_reduce_start sum %s2 on @mesh ["dp"] : tensor<2x8xf32> -> !braid.future<tensor<2x8xf32>>
  %y1 = braid.wait %f1 : !braid.future<tensor<2x8xf32>>
  %f3 = braid.all_reduce_start sum %y1 on @mesh ["dp"] : tensor<2x8xf32> -> !braid.future<tensor<2x8xf32>>
  %y2 = braid.wait %f2 : !braid.future<tensor<2x8xf32>>
  braid.store_param "a", %y2 : tensor<2x8xf32>
  %y3 = braid.wait %f3 : !braid.future<tensor<2x8xf32>>
  return %y3 : tensor<2x8xf32>
}
