// RUN: braid-opt %s --braid-zero3-prefetch | FileCheck %s --check-prefix=DEPTH1
// RUN: braid-opt %s --braid-zero3-prefetch=depth=2 | FileCheck %s --check-prefix=DEPTH2
// RUN: braid-opt %s --braid-zero3-prefetch=depth=0 | FileCheck %s --check-prefix=DEPTH0
// RUN: braid-opt %s --braid-async-collectives --braid-zero3-prefetch | FileCheck %s --check-prefix=DEPTH1
// RUN: not braid-opt %s --braid-zero3-prefetch=depth=-1 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: braid-opt %s --braid-zero3-prefetch=depth=2 -o %t.mlir
// RUN: braid-eval %s --entry f --mesh mesh --seed 3 --dump > %t.plain
// RUN: braid-eval %t.mlir --entry f --mesh mesh --seed 3 --dump > %t.prefetched
// RUN: diff %t.plain %t.prefetched

// Tests that the gathers of ZeRO-3 parameter shares start `depth` groups
// ahead of their use: group k (the parameters one op needs) starts right
// before the op that consumes group k - depth, after that group's waits,
// so at most `depth` are in flight; the first `depth` groups start at the
// top. Each is waited for right before its first use, and the results are
// unchanged (the dumps are identical).

braid.mesh @mesh {axes = ["dp"], shape = array<i64: 2>}

// DEPTH1-LABEL: func.func @f
// DEPTH1-NEXT: %[[LW:.*]] = braid.param "ln.weight"
// DEPTH1-NEXT: %[[SLW:.*]] = braid.all_gather_start %[[LW]] on @mesh ["dp"] {braid.phase = "F", dim = 0 : i64}
// DEPTH1-NEXT: %[[LB:.*]] = braid.param "ln.bias"
// DEPTH1-NEXT: %[[SLB:.*]] = braid.all_gather_start %[[LB]]
// DEPTH1-NEXT: %[[X:.*]] = braid.relu %arg0
// DEPTH1-NEXT: %[[GLW:.*]] = braid.wait %[[SLW]] {braid.phase = "F"}
// DEPTH1-NEXT: %[[GLB:.*]] = braid.wait %[[SLB]]
// Group 1 (w1) starts before group 0's layer norm computes.
// DEPTH1-NEXT: %[[W1:.*]] = braid.param "w1"
// DEPTH1-NEXT: %[[S1:.*]] = braid.all_gather_start %[[W1]]
// DEPTH1-NEXT: %[[N:.*]] = braid.layer_norm %[[X]], %[[GLW]], %[[GLB]]
// DEPTH1-NEXT: %[[G1:.*]] = braid.wait %[[S1]]
// DEPTH1-NEXT: %[[W2:.*]] = braid.param "w2"
// DEPTH1-NEXT: %[[S2:.*]] = braid.all_gather_start %[[W2]]
// DEPTH1-NEXT: %[[H:.*]] = braid.matmul %[[N]], %[[G1]]
// DEPTH1-NEXT: %[[G2:.*]] = braid.wait %[[S2]]
// DEPTH1-NEXT: %[[Y:.*]] = braid.matmul %[[H]], %[[G2]]
// DEPTH1-NEXT: return %[[Y]]

// DEPTH2-LABEL: func.func @f
// DEPTH2-NEXT: braid.param "ln.weight"
// DEPTH2-NEXT: braid.all_gather_start
// DEPTH2-NEXT: braid.param "ln.bias"
// DEPTH2-NEXT: braid.all_gather_start
// DEPTH2-NEXT: %[[W1:.*]] = braid.param "w1"
// DEPTH2-NEXT: %[[S1:.*]] = braid.all_gather_start %[[W1]]
// DEPTH2-NEXT: braid.relu
// DEPTH2-NEXT: braid.wait
// DEPTH2-NEXT: braid.wait
// DEPTH2-NEXT: %[[W2:.*]] = braid.param "w2"
// DEPTH2-NEXT: %[[S2:.*]] = braid.all_gather_start %[[W2]]
// DEPTH2-NEXT: braid.layer_norm
// DEPTH2-NEXT: braid.wait %[[S1]]
// DEPTH2-NEXT: braid.matmul
// DEPTH2-NEXT: braid.wait %[[S2]]

// DEPTH0-LABEL: func.func @f
// DEPTH0-NOT: _start
// DEPTH0: return

// BAD: braid-zero3-prefetch: depth must be >= 0, got -1

func.func @f(%x: tensor<2x8xf32> {braid.name = "x", braid.block_of = #braid.sharding<@mesh, [["dp"], []]>}) -> (tensor<2x8xf32> {braid.block_of = #braid.sharding<@mesh, [["dp"], []]>}) {
  %x1 = braid.relu %x {braid.phase = "F"} : tensor<2x8xf32>
  %lw = braid.param "ln.weight" {block_of = #braid.sharding<@mesh, [["dp"]]>, braid.phase = "F", init = #braid.init<ones>} : tensor<4xf32>
  %lb = braid.param "ln.bias" {block_of = #braid.sharding<@mesh, [["dp"]]>, braid.phase = "F", init = #braid.init<normal(1.0)>} : tensor<4xf32>
  %glw = braid.all_gather %lw on @mesh ["dp"] {braid.phase = "F", dim = 0 : i64} : (tensor<4xf32>) -> tensor<8xf32>
  %glb = braid.all_gather %lb on @mesh ["dp"] {braid.phase = "F", dim = 0 : i64} : (tensor<4xf32>) -> tensor<8xf32>
  %n = braid.layer_norm %x1, %glw, %glb {braid.phase = "F"} : (tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  %w1 = braid.param "w1" {block_of = #braid.sharding<@mesh, [["dp"], []]>, braid.phase = "F", init = #braid.init<normal(0.5)>} : tensor<4x8xf32>
  %g1 = braid.all_gather %w1 on @mesh ["dp"] {braid.phase = "F", dim = 0 : i64} : (tensor<4x8xf32>) -> tensor<8x8xf32>
  %h = braid.matmul %n, %g1 {braid.phase = "F"} : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
  %w2 = braid.param "w2" {block_of = #braid.sharding<@mesh, [["dp"], []]>, braid.phase = "F", init = #braid.init<normal(0.5)>} : tensor<4x8xf32>
  %g2 = braid.all_gather %w2 on @mesh ["dp"] {braid.phase = "F", dim = 0 : i64} : (tensor<4x8xf32>) -> tensor<8x8xf32>
  %y = braid.matmul %h, %g2 {braid.phase = "F"} : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// A store of a parameter between the new and the old place keeps its read
// (and gather) where they were.
// DEPTH1-LABEL: func.func @stored
// DEPTH1-NEXT: %[[A:.*]] = braid.param "a"
// DEPTH1-NEXT: braid.all_gather_start %[[A]]
// DEPTH1: braid.store_param "b"
// DEPTH1-NEXT: braid.param "b"
// DEPTH1-NEXT: braid.all_gather_start
func.func @stored(%x: tensor<2x8xf32> {braid.name = "x"}) -> tensor<2x8xf32> {
  %pa = braid.param "a" {block_of = #braid.sharding<@mesh, [["dp"], []]>, init = #braid.init<normal(0.5)>} : tensor<4x8xf32>
  %ga = braid.all_gather %pa on @mesh ["dp"] {dim = 0 : i64} : (tensor<4x8xf32>) -> tensor<8x8xf32>
  %h = braid.matmul %x, %ga : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
  braid.store_param "b", %pa : tensor<4x8xf32>
  %pb = braid.param "b" {block_of = #braid.sharding<@mesh, [["dp"], []]>, init = #braid.init<normal(0.5)>} : tensor<4x8xf32>
  %gb = braid.all_gather %pb on @mesh ["dp"] {dim = 0 : i64} : (tensor<4x8xf32>) -> tensor<8x8xf32>
  %y = braid.matmul %h, %gb : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// With across-repeats, a repeated layer's first `depth` groups are started
// by the instance before (reading the next instance's share, marked
// braid.next_instance) and carried into the next instance as futures; the
// first instance's start before the repeat, placed as a group of the
// function. Forward and reverse repeats alike; identical results.
// RUN: braid-opt %s --braid-zero3-prefetch="depth=1 across-repeats=1" | FileCheck %s --check-prefix=ACROSS1
// RUN: braid-opt %s --braid-zero3-prefetch="depth=2 across-repeats=1" | FileCheck %s --check-prefix=ACROSS2
// RUN: braid-opt %s --braid-zero3-prefetch="depth=1 across-repeats=1" -o %t.across1.mlir
// RUN: braid-opt %s --braid-zero3-prefetch="depth=2 across-repeats=1" -o %t.across2.mlir
// RUN: braid-eval %s --entry g --mesh mesh --seed 3 --dump > %t.g.plain
// RUN: braid-eval %t.across1.mlir --entry g --mesh mesh --seed 3 --dump > %t.g.across1
// RUN: braid-eval %t.across2.mlir --entry g --mesh mesh --seed 3 --dump > %t.g.across2
// RUN: diff %t.g.plain %t.g.across1
// RUN: diff %t.g.plain %t.g.across2
// The comm report counts the next instance's gathers once per instance but
// the last, so the bytes equal the just-in-time program's.
// RUN: braid-opt %s --braid-comm-report -o /dev/null 2>&1 | FileCheck %s --check-prefix=REPORT
// RUN: braid-opt %t.across1.mlir --braid-comm-report -o /dev/null 2>&1 | FileCheck %s --check-prefixes=REPORT,REPORT-ACROSS
// REPORT-LABEL: braid-comm-report: @g
// REPORT-ACROSS: @block - all_gather dp 2 32 16 5.000e-06 2 [async]
// REPORT: total all sent 1088 bytes

// Depth 1: the layer's first group (ln) crosses; the next instance's starts
// right before the op that consumes the last group (w). Before each repeat,
// its first instance's: h.0 forward, h.2 in reverse; the second repeat's
// right before the first (the group before it, as in any block).
// ACROSS1-LABEL: braid.layer @block(
// ACROSS1-SAME: %{{.*}}: tensor<2x8xf32>, %[[F0:.*]]: !braid.future<tensor<8xf32>>, %[[F1:.*]]: !braid.future<tensor<8xf32>>) -> (tensor<2x8xf32>, !braid.future<tensor<8xf32>>, !braid.future<tensor<8xf32>>)
// ACROSS1-NEXT: %[[LW:.*]] = braid.wait %[[F0]]
// ACROSS1-NEXT: %[[LB:.*]] = braid.wait %[[F1]]
// ACROSS1-NEXT: braid.param "w" {
// ACROSS1-NEXT: braid.all_gather_start
// ACROSS1-NEXT: braid.layer_norm %{{.*}}, %[[LW]], %[[LB]]
// ACROSS1-NEXT: braid.wait
// ACROSS1-NEXT: %[[NW:.*]] = braid.param "ln.weight" {{{.*}}braid.next_instance
// ACROSS1-NEXT: %[[SW:.*]] = braid.all_gather_start %[[NW]]
// ACROSS1-NEXT: %[[NB:.*]] = braid.param "ln.bias" {{{.*}}braid.next_instance
// ACROSS1-NEXT: %[[SB:.*]] = braid.all_gather_start %[[NB]]
// ACROSS1-NEXT: braid.matmul
// ACROSS1-NEXT: %[[Y:.*]] = braid.silu
// ACROSS1-NEXT: braid.yield %[[Y]], %[[SW]], %[[SB]]
// ACROSS1-LABEL: func.func @g
// ACROSS1: braid.wait
// ACROSS1-NEXT: %[[P0:.*]] = braid.param "h.0.ln.weight"
// ACROSS1-NOT: next_instance
// ACROSS1-NEXT: %[[S0:.*]] = braid.all_gather_start %[[P0]]
// ACROSS1-NEXT: braid.param "h.0.ln.bias"
// ACROSS1-NEXT: %[[S1:.*]] = braid.all_gather_start
// ACROSS1-NEXT: %[[X1:.*]] = braid.matmul
// ACROSS1-NEXT: %[[P2:.*]] = braid.param "h.2.ln.weight"
// ACROSS1-NEXT: %[[S2:.*]] = braid.all_gather_start %[[P2]]
// ACROSS1-NEXT: braid.param "h.2.ln.bias"
// ACROSS1-NEXT: %[[S3:.*]] = braid.all_gather_start
// ACROSS1-NEXT: %[[H:.*]]:3 = braid.repeat @block(%[[X1]], %[[S0]], %[[S1]]) {count = 3 : i64, prefix = "h"}
// ACROSS1-NEXT: %[[X2:.*]] = braid.silu %[[H]]#0
// ACROSS1-NEXT: braid.repeat @block(%[[X2]], %[[S2]], %[[S3]]) {count = 3 : i64, prefix = "h", reverse}

// Depth 2: both groups cross, each right before the op consuming the group
// two behind it (the layer norm, the matmul); two groups in flight at each
// point, instance boundaries included.
// ACROSS2-LABEL: braid.layer @block(
// ACROSS2-SAME: %{{.*}}: tensor<2x8xf32>, %[[F0:.*]]: !braid.future<tensor<8xf32>>, %[[F1:.*]]: !braid.future<tensor<8xf32>>, %[[F2:.*]]: !braid.future<tensor<8x8xf32>>)
// ACROSS2-NEXT: braid.wait %[[F0]]
// ACROSS2-NEXT: braid.wait %[[F1]]
// ACROSS2-NEXT: %[[NW:.*]] = braid.param "ln.weight" {{{.*}}braid.next_instance
// ACROSS2-NEXT: %[[SW:.*]] = braid.all_gather_start %[[NW]]
// ACROSS2-NEXT: braid.param "ln.bias" {{{.*}}braid.next_instance
// ACROSS2-NEXT: %[[SB:.*]] = braid.all_gather_start
// ACROSS2-NEXT: braid.layer_norm
// ACROSS2-NEXT: braid.wait %[[F2]]
// ACROSS2-NEXT: braid.param "w" {{{.*}}braid.next_instance
// ACROSS2-NEXT: %[[SM:.*]] = braid.all_gather_start
// ACROSS2-NEXT: braid.matmul
// ACROSS2-NEXT: %[[Y:.*]] = braid.silu
// ACROSS2-NEXT: braid.yield %[[Y]], %[[SW]], %[[SB]], %[[SM]]
// ACROSS2-LABEL: func.func @g
// ACROSS2: braid.param "h.0.w"
// ACROSS2-NEXT: braid.all_gather_start
// ACROSS2-NEXT: braid.matmul
// ACROSS2-NEXT: braid.param "h.2.ln.weight"
// ACROSS2: braid.param "h.2.w"
// ACROSS2-NEXT: braid.all_gather_start
// ACROSS2-NEXT: braid.repeat @block({{.*}}) {count = 3 : i64, prefix = "h"}

braid.layer @block(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %lw = braid.param "ln.weight" {block_of = #braid.sharding<@mesh, [["dp"]]>, init = #braid.init<normal(1.0)>} : tensor<4xf32>
  %lb = braid.param "ln.bias" {block_of = #braid.sharding<@mesh, [["dp"]]>, init = #braid.init<normal(1.0)>} : tensor<4xf32>
  %glw = braid.all_gather %lw on @mesh ["dp"] {dim = 0 : i64} : (tensor<4xf32>) -> tensor<8xf32>
  %glb = braid.all_gather %lb on @mesh ["dp"] {dim = 0 : i64} : (tensor<4xf32>) -> tensor<8xf32>
  %n = braid.layer_norm %x, %glw, %glb : (tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  %w = braid.param "w" {block_of = #braid.sharding<@mesh, [["dp"], []]>, init = #braid.init<normal(0.5)>} : tensor<4x8xf32>
  %gw = braid.all_gather %w on @mesh ["dp"] {dim = 0 : i64} : (tensor<4x8xf32>) -> tensor<8x8xf32>
  %h = braid.matmul %n, %gw : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
  %y = braid.silu %h : tensor<2x8xf32>
  braid.yield %y : tensor<2x8xf32>
}

func.func @g(%x: tensor<2x8xf32> {braid.name = "x", braid.block_of = #braid.sharding<@mesh, [["dp"], []]>}) -> (tensor<2x8xf32> {braid.block_of = #braid.sharding<@mesh, [["dp"], []]>}) {
  %pe = braid.param "e" {block_of = #braid.sharding<@mesh, [["dp"], []]>, init = #braid.init<normal(0.5)>} : tensor<4x8xf32>
  %ge = braid.all_gather %pe on @mesh ["dp"] {dim = 0 : i64} : (tensor<4x8xf32>) -> tensor<8x8xf32>
  %x1 = braid.matmul %x, %ge : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
  %h = braid.repeat @block(%x1) {prefix = "h", count = 3 : i64} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %x2 = braid.silu %h : tensor<2x8xf32>
  %r = braid.repeat @block(%x2) {prefix = "h", count = 3 : i64, reverse} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  return %r : tensor<2x8xf32>
}
