// RUN: braid-opt %s --braid-zero3-prefetch | FileCheck %s --check-prefix=DEPTH1
// RUN: braid-opt %s --braid-zero3-prefetch="depth=1 across-repeats=1" | FileCheck %s --check-prefix=ACROSS
// RUN: braid-opt %s --braid-zero3-prefetch="depth=1 across-repeats=1" -o %t.mlir
// RUN: braid-eval %s --entry f --mesh mesh --seed 3 --dump > %t.f.plain
// RUN: braid-eval %t.mlir --entry f --mesh mesh --seed 3 --dump > %t.f.prefetched
// RUN: diff %t.f.plain %t.f.prefetched
// RUN: braid-eval %s --entry g --mesh mesh --seed 3 --dump > %t.g.plain
// RUN: braid-eval %t.mlir --entry g --mesh mesh --seed 3 --dump > %t.g.prefetched
// RUN: diff %t.g.plain %t.g.prefetched
// The comm report's bytes are the just-in-time program's.
// RUN: braid-opt %s --braid-comm-report -o /dev/null 2>&1 | FileCheck %s --check-prefix=REPORT
// RUN: braid-opt %t.mlir --braid-comm-report -o /dev/null 2>&1 | FileCheck %s --check-prefix=REPORT

// Tests that under bf16-mixed, where ZeRO-3 gathers a parameter's bf16
// working copy (an all_gather of the braid.convert of the share's read),
// the gather is prefetched as the share's own is: the read and its convert
// move with the start, `depth` groups ahead of the use. A layer whose first
// group gathers a working copy does not start it in the instance before
// (the converted copy is a temporary of that instance); one whose first
// group gathers shares (a layer norm's f32 weight and bias) does, and
// prefetches its working copies within the instance. Identical results.

braid.mesh @mesh {axes = ["dp"], shape = array<i64: 2>}

// The first matmul's working copy starts before the layer norm computes;
// the second's before the first matmul.
// DEPTH1-LABEL: func.func @f
// DEPTH1-NEXT: braid.param "ln.weight"
// DEPTH1-NEXT: braid.all_gather_start
// DEPTH1-NEXT: braid.param "ln.bias"
// DEPTH1-NEXT: braid.all_gather_start
// DEPTH1-NEXT: %[[X:.*]] = braid.relu %arg0
// DEPTH1-NEXT: %[[GLW:.*]] = braid.wait
// DEPTH1-NEXT: %[[GLB:.*]] = braid.wait
// DEPTH1-NEXT: %[[W1:.*]] = braid.param "w1"
// DEPTH1-NEXT: %[[C1:.*]] = braid.convert %[[W1]] : tensor<4x8xf32> to tensor<4x8xbf16>
// DEPTH1-NEXT: %[[S1:.*]] = braid.all_gather_start %[[C1]]
// DEPTH1-NEXT: %[[N:.*]] = braid.layer_norm %[[X]], %[[GLW]], %[[GLB]]
// DEPTH1-NEXT: %[[N16:.*]] = braid.convert %[[N]]
// DEPTH1-NEXT: %[[G1:.*]] = braid.wait %[[S1]]
// DEPTH1-NEXT: %[[W2:.*]] = braid.param "w2"
// DEPTH1-NEXT: %[[C2:.*]] = braid.convert %[[W2]]
// DEPTH1-NEXT: %[[S2:.*]] = braid.all_gather_start %[[C2]]
// DEPTH1-NEXT: %[[H:.*]] = braid.matmul %[[N16]], %[[G1]]
// DEPTH1-NEXT: %[[G2:.*]] = braid.wait %[[S2]]
// DEPTH1-NEXT: braid.matmul %[[H]], %[[G2]]

func.func @f(%x: tensor<2x8xf32> {braid.name = "x", braid.block_of = #braid.sharding<@mesh, [["dp"], []]>}) -> (tensor<2x8xbf16> {braid.block_of = #braid.sharding<@mesh, [["dp"], []]>}) {
  %x1 = braid.relu %x : tensor<2x8xf32>
  %lw = braid.param "ln.weight" {block_of = #braid.sharding<@mesh, [["dp"]]>, init = #braid.init<normal(1.0)>} : tensor<4xf32>
  %lb = braid.param "ln.bias" {block_of = #braid.sharding<@mesh, [["dp"]]>, init = #braid.init<normal(1.0)>} : tensor<4xf32>
  %glw = braid.all_gather %lw on @mesh ["dp"] {dim = 0 : i64} : (tensor<4xf32>) -> tensor<8xf32>
  %glb = braid.all_gather %lb on @mesh ["dp"] {dim = 0 : i64} : (tensor<4xf32>) -> tensor<8xf32>
  %n = braid.layer_norm %x1, %glw, %glb : (tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  %n16 = braid.convert %n : tensor<2x8xf32> to tensor<2x8xbf16>
  %w1 = braid.param "w1" {block_of = #braid.sharding<@mesh, [["dp"], []]>, init = #braid.init<normal(0.5)>} : tensor<4x8xf32>
  %c1 = braid.convert %w1 : tensor<4x8xf32> to tensor<4x8xbf16>
  %g1 = braid.all_gather %c1 on @mesh ["dp"] {dim = 0 : i64} : (tensor<4x8xbf16>) -> tensor<8x8xbf16>
  %h = braid.matmul %n16, %g1 : (tensor<2x8xbf16>, tensor<8x8xbf16>) -> tensor<2x8xbf16>
  %w2 = braid.param "w2" {block_of = #braid.sharding<@mesh, [["dp"], []]>, init = #braid.init<normal(0.5)>} : tensor<4x8xf32>
  %c2 = braid.convert %w2 : tensor<4x8xf32> to tensor<4x8xbf16>
  %g2 = braid.all_gather %c2 on @mesh ["dp"] {dim = 0 : i64} : (tensor<4x8xbf16>) -> tensor<8x8xbf16>
  %y = braid.matmul %h, %g2 : (tensor<2x8xbf16>, tensor<8x8xbf16>) -> tensor<2x8xbf16>
  return %y : tensor<2x8xbf16>
}

// @ln starts the next instance's layer norm shares (f32) and prefetches its
// working copy within the instance; @mm, whose first group is a working
// copy, keeps its gathers in the instance.
// ACROSS-LABEL: braid.layer @ln(
// ACROSS-SAME: !braid.future<tensor<8xf32>>, %{{.*}}: !braid.future<tensor<8xf32>>)
// ACROSS-NEXT: braid.convert %arg0
// ACROSS-NEXT: braid.wait
// ACROSS-NEXT: braid.wait
// ACROSS-NEXT: %[[W:.*]] = braid.param "w" {
// ACROSS-NEXT: %[[C:.*]] = braid.convert %[[W]]
// ACROSS-NEXT: %[[S:.*]] = braid.all_gather_start %[[C]]
// ACROSS-NEXT: braid.layer_norm
// ACROSS-NEXT: braid.convert
// ACROSS-NEXT: braid.wait %[[S]]
// ACROSS-NEXT: braid.param "ln.weight" {{{.*}}braid.next_instance
// ACROSS-NEXT: braid.all_gather_start
// ACROSS-NEXT: braid.param "ln.bias" {{{.*}}braid.next_instance
// ACROSS-NEXT: braid.all_gather_start
// ACROSS-NEXT: braid.matmul
// ACROSS-LABEL: braid.layer @mm(
// ACROSS-SAME: %{{.*}}: tensor<2x8xbf16>) -> tensor<2x8xbf16>
// ACROSS-NOT: next_instance
// ACROSS: %[[W1:.*]] = braid.param "w1"
// ACROSS-NEXT: %[[C1:.*]] = braid.convert %[[W1]]
// ACROSS-NEXT: braid.all_gather_start %[[C1]]
// ACROSS-NEXT: braid.wait
// ACROSS-NEXT: %[[W2:.*]] = braid.param "w2"
// ACROSS-NEXT: %[[C2:.*]] = braid.convert %[[W2]]
// ACROSS-NEXT: %[[S2:.*]] = braid.all_gather_start %[[C2]]
// ACROSS-NEXT: braid.matmul
// ACROSS-NEXT: braid.wait %[[S2]]
// ACROSS-NEXT: braid.matmul
// ACROSS-LABEL: func.func @g
// ACROSS-DAG: %[[P0:.*]] = braid.param "h.0.ln.weight"
// ACROSS-DAG: %[[P1:.*]] = braid.param "h.0.ln.bias"
// ACROSS-DAG: %[[S0:.*]] = braid.all_gather_start %[[P0]]
// ACROSS-DAG: %[[S1:.*]] = braid.all_gather_start %[[P1]]
// ACROSS: braid.repeat @ln(%arg0, %[[S0]], %[[S1]])

// REPORT-LABEL: braid-comm-report: @g
// REPORT: total all sent 544 bytes

braid.layer @ln(%x: tensor<2x8xbf16>) -> tensor<2x8xbf16> {
  %x32 = braid.convert %x : tensor<2x8xbf16> to tensor<2x8xf32>
  %lw = braid.param "ln.weight" {block_of = #braid.sharding<@mesh, [["dp"]]>, init = #braid.init<normal(1.0)>} : tensor<4xf32>
  %lb = braid.param "ln.bias" {block_of = #braid.sharding<@mesh, [["dp"]]>, init = #braid.init<normal(1.0)>} : tensor<4xf32>
  %glw = braid.all_gather %lw on @mesh ["dp"] {dim = 0 : i64} : (tensor<4xf32>) -> tensor<8xf32>
  %glb = braid.all_gather %lb on @mesh ["dp"] {dim = 0 : i64} : (tensor<4xf32>) -> tensor<8xf32>
  %n = braid.layer_norm %x32, %glw, %glb : (tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  %n16 = braid.convert %n : tensor<2x8xf32> to tensor<2x8xbf16>
  %w = braid.param "w" {block_of = #braid.sharding<@mesh, [["dp"], []]>, init = #braid.init<normal(0.5)>} : tensor<4x8xf32>
  %c = braid.convert %w : tensor<4x8xf32> to tensor<4x8xbf16>
  %gw = braid.all_gather %c on @mesh ["dp"] {dim = 0 : i64} : (tensor<4x8xbf16>) -> tensor<8x8xbf16>
  %h = braid.matmul %n16, %gw : (tensor<2x8xbf16>, tensor<8x8xbf16>) -> tensor<2x8xbf16>
  braid.yield %h : tensor<2x8xbf16>
}

braid.layer @mm(%x: tensor<2x8xbf16>) -> tensor<2x8xbf16> {
  %w1 = braid.param "w1" {block_of = #braid.sharding<@mesh, [["dp"], []]>, init = #braid.init<normal(0.5)>} : tensor<4x8xf32>
  %c1 = braid.convert %w1 : tensor<4x8xf32> to tensor<4x8xbf16>
  %g1 = braid.all_gather %c1 on @mesh ["dp"] {dim = 0 : i64} : (tensor<4x8xbf16>) -> tensor<8x8xbf16>
  %h = braid.matmul %x, %g1 : (tensor<2x8xbf16>, tensor<8x8xbf16>) -> tensor<2x8xbf16>
  %w2 = braid.param "w2" {block_of = #braid.sharding<@mesh, [["dp"], []]>, init = #braid.init<normal(0.5)>} : tensor<4x8xf32>
  %c2 = braid.convert %w2 : tensor<4x8xf32> to tensor<4x8xbf16>
  %g2 = braid.all_gather %c2 on @mesh ["dp"] {dim = 0 : i64} : (tensor<4x8xbf16>) -> tensor<8x8xbf16>
  %y = braid.matmul %h, %g2 : (tensor<2x8xbf16>, tensor<8x8xbf16>) -> tensor<2x8xbf16>
  braid.yield %y : tensor<2x8xbf16>
}

func.func @g(%x: tensor<2x8xbf16> {braid.name = "x", braid.block_of = #braid.sharding<@mesh, [["dp"], []]>}) -> (tensor<2x8xbf16> {braid.block_of = #braid.sharding<@mesh, [["dp"], []]>}) {
  %h = braid.repeat @ln(%x) {prefix = "h", count = 3 : i64} : (tensor<2x8xbf16>) -> tensor<2x8xbf16>
  %r = braid.repeat @mm(%h) {prefix = "m", count = 2 : i64} : (tensor<2x8xbf16>) -> tensor<2x8xbf16>
  return %r : tensor<2x8xbf16>
}
