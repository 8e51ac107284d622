// Tests that braid-pipeline-split rejects impossible splits with a located
// error naming what is wrong.
// RUN: not braid-opt %s --braid-pipeline-split="stages=2 layers=1,1" 2>&1 | FileCheck %s --check-prefix=SUM
// RUN: not braid-opt %s --braid-pipeline-split="stages=2 layers=3" 2>&1 | FileCheck %s --check-prefix=COUNT
// RUN: not braid-opt %s --braid-pipeline-split="stages=2 layers=4,-1" 2>&1 | FileCheck %s --check-prefix=NEG
// RUN: not braid-opt %s --braid-pipeline-split="stages=8" 2>&1 | FileCheck %s --check-prefix=FEW
// RUN: not braid-opt %s --braid-pipeline-split="stages=0" 2>&1 | FileCheck %s --check-prefix=ZERO
// RUN: not braid-opt %s --braid-pipeline-split="stages=2 placement=zigzag" 2>&1 | FileCheck %s --check-prefix=PLACE
// RUN: not braid-opt %s --braid-pipeline-split="stages=2 chunks=3 placement=v" 2>&1 | FileCheck %s --check-prefix=VCHUNKS
// RUN: not braid-opt %s --braid-pipeline-split="entry=nope" 2>&1 | FileCheck %s --check-prefix=ENTRY
// RUN: not braid-opt %s --braid-autodiff --braid-pipeline-split=entry=forward_grad 2>&1 | FileCheck %s --check-prefix=AFTER

// SUM: pipeline-split-errors.mlir:[[@LINE+16]]:1: error: braid-pipeline-split: layers= places 2 layer instances, but @forward has 3; every layer must be placed exactly once
// COUNT: error: braid-pipeline-split: layers= gives 1 chunks, but stages*chunks = 2
// NEG: error: braid-pipeline-split: layers= has a negative count -1
// FEW: error: braid-pipeline-split: @forward has 5 units to place (layer instances and runs of ops outside layers), fewer than the 8 chunks
// ZERO: error: braid-pipeline-split: stages and chunks must be at least 1 (got stages=0, chunks=1)
// PLACE: error: braid-pipeline-split: unknown placement 'zigzag'; expected loop or v
// VCHUNKS: error: braid-pipeline-split: placement=v needs chunks=2 (got 3)
// ENTRY: error: braid-pipeline-split: no function @nope
// AFTER: error: braid-pipeline-split: only plain repeats (every operand carried, forward order) can be split; run it before braid-autodiff

braid.layer @block(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %w = braid.param "w" {init = #braid.init<normal(0.1)>} : tensor<8x8xf32>
  %y = braid.matmul %x, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  braid.yield %y : tensor<4x8xf32>
}

func.func @forward(%x: tensor<4x8xf32>, %labels: tensor<4xi32> {braid.range = 8 : i64}) -> tensor<f32> {
  %h0 = braid.relu %x : tensor<4x8xf32>
  %h = braid.repeat @block(%h0) {prefix = "h", count = 3 : i64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %loss = braid.cross_entropy %h, %labels : (tensor<4x8xf32>, tensor<4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
