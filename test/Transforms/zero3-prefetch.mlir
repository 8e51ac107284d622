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
