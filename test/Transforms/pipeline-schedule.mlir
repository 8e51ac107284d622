// Tests that braid-pipeline-schedule attaches a verified schedule that fits
// the split, timed by the FLOPs of the outlined pieces, and rejects schedules
// that do not fit.
//
// RUN: braid-opt %s --braid-pipeline-split="stages=2 chunks=2 placement=v layers=1,2,2,1" --braid-autodiff --braid-pipeline-outline --braid-pipeline-schedule="schedule=zb-v microbatches=2 report" | FileCheck %s
// RUN: braid-opt %s --braid-pipeline-split="stages=2" --braid-autodiff --braid-pipeline-outline --braid-pipeline-schedule="schedule=1f1b" | FileCheck %s --check-prefix=DEFAULT
// RUN: not braid-opt %s --braid-pipeline-split="stages=2 chunks=2" --braid-autodiff --braid-pipeline-outline --braid-pipeline-schedule="schedule=zb-v" -o /dev/null 2>&1 | FileCheck %s --check-prefix=PLACEMENT
// RUN: not braid-opt %s --braid-pipeline-split="stages=2" --braid-autodiff --braid-pipeline-outline --braid-pipeline-schedule="schedule=interleaved-1f1b" -o /dev/null 2>&1 | FileCheck %s --check-prefix=CHUNKS
// RUN: not braid-opt %s --braid-pipeline-split="stages=2" --braid-autodiff --braid-pipeline-schedule -o /dev/null 2>&1 | FileCheck %s --check-prefix=OUTLINE
// RUN: not braid-opt %s --braid-pipeline-split="stages=2" --braid-autodiff --braid-pipeline-outline --braid-pipeline-schedule="schedule=zz" -o /dev/null 2>&1 | FileCheck %s --check-prefix=NAME
// RUN: not braid-opt %s --braid-pipeline-split="stages=2" --braid-autodiff --braid-pipeline-outline --braid-pipeline-schedule="schedule=auto mem-limit=0.5" -o /dev/null 2>&1 | FileCheck %s --check-prefix=MEMORY
// RUN: not braid-opt %s --braid-autodiff --braid-pipeline-schedule -o /dev/null 2>&1 | FileCheck %s --check-prefix=UNSPLIT

// Relative F times: chunk 3 holds h.5 and the head, 576 + 4353 = 4929 of
// 8097 forward FLOPs, so 4929 / (8097 / 4) = 2.435 times the mean chunk.
// CHECK: braid-pipeline-schedule: zb-v on 2 stages x 2 chunk(s), 2 micro-batches
// CHECK: 3 2.435 {{[0-9.]+}} {{[0-9.]+}}
// CHECK: rank 0: F0.0
// CHECK: rank 1: <a0.0@0 F0.0 F0.1
// CHECK: simulated bubble rate
// CHECK-LABEL: func.func @forward_grad(
// CHECK-SAME: braid.schedule = {microbatches = 2 : i64, name = "zb-v", ranks = {{\[\[}}"F0.0", "send activation 0.0 to rank 1",

// DEFAULT: braid.schedule = {microbatches = 2 : i64, name = "1f1b", ranks = {{\[\[}}"F0.0", "send activation 0.0 to rank 1", "F1.0",

// PLACEMENT: error: braid-pipeline-schedule: schedule 'zb-v' runs chunk 2 on stage 1, but the split placed it on stage 0 (use placement=v for zb-v, loop otherwise)
// CHUNKS: error: braid-pipeline-schedule: interleaved-1f1b needs at least 2 chunks per rank (got 1) (the split has 2 stages with 1 chunk(s) each)
// OUTLINE: error: braid-pipeline-schedule: no function @forward_grad.c0.F; run braid-pipeline-outline first
// NAME: error: braid-pipeline-schedule: unknown schedule 'zz'; expected gpipe, 1f1b, interleaved-1f1b, zb-h1, zb-h2, zb-v or auto
// MEMORY: error: braid-pipeline-schedule: memory limit 0.5 is below one micro-batch activation; no forward can run
// UNSPLIT: error: braid-pipeline-schedule: @forward has no braid.chunk_stages; run braid-pipeline-split first

braid.layer @block(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %w = braid.param "w" {init = #braid.init<normal(0.1)>} : tensor<8x8xf32>
  %y = braid.matmul %x, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %z = braid.relu %y : tensor<4x8xf32>
  braid.yield %z : tensor<4x8xf32>
}

func.func @forward(%x: tensor<4x4xf32>, %labels: tensor<4xi32> {braid.range = 64 : i64}) -> tensor<f32> {
  %w_in = braid.param "w_in" {init = #braid.init<normal(0.1)>} : tensor<4x8xf32>
  %h0 = braid.matmul %x, %w_in : (tensor<4x4xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %h = braid.repeat @block(%h0) {prefix = "h", count = 6 : i64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %w_out = braid.param "w_out" {init = #braid.init<normal(0.1)>} : tensor<8x64xf32>
  %logits = braid.matmul %h, %w_out : (tensor<4x8xf32>, tensor<8x64xf32>) -> tensor<4x64xf32>
  %loss = braid.cross_entropy %logits, %labels : (tensor<4x64xf32>, tensor<4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
