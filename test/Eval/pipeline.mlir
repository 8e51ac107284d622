// Tests braid-eval --pipeline: the pieces run on simulated ranks in schedule
// order, each rank with only what it computed or received, and a broken
// schedule (a lost send, a lost recv) is an error, not a different result.
//
// RUN: rm -rf %t && mkdir -p %t
// RUN: braid-opt %s --braid-pipeline-split="stages=3" --braid-autodiff --braid-pipeline-outline --braid-pipeline-schedule="schedule=1f1b microbatches=3" -o %t/p.mlir
// RUN: braid-eval %t/p.mlir --entry forward_grad --pipeline --seed 1 | FileCheck %s
// The mean of the three micro-batches' losses, run one by one:
// RUN: braid-eval %t/p.mlir --entry forward_grad --seed 1 --save-inputs %t/i0.st | FileCheck %s --check-prefix=MB0
// RUN: braid-eval %t/p.mlir --entry forward_grad --seed 2 --save-inputs %t/i1.st > /dev/null
// RUN: braid-eval %t/p.mlir --entry forward_grad --seed 3 --save-inputs %t/i2.st > /dev/null
// RUN: braid-eval %t/p.mlir --entry forward_grad --seed 1 --inputs %t/i1.st | FileCheck %s --check-prefix=MB1
// RUN: braid-eval %t/p.mlir --entry forward_grad --seed 1 --inputs %t/i2.st | FileCheck %s --check-prefix=MB2
// CHECK: result 0: tensor<f32> = 4.15888341
// MB0: result 0: tensor<f32> = 4.158883571
// MB1: result 0: tensor<f32> = 4.158883094
// MB2: result 0: tensor<f32> = 4.158883571
//
// RUN: sed 's/"send activation 0.0 to rank 1", //' %t/p.mlir > %t/nosend.mlir
// RUN: not braid-eval %t/nosend.mlir --entry forward_grad --pipeline 2>&1 | FileCheck %s --check-prefix=NOSEND
// NOSEND: error: --pipeline: the ranks deadlock: rank 0 waits at 'recv gradient 0.0 from rank 1'; rank 1 waits at 'recv activation 0.0 from rank 0';
// RUN: sed 's/"recv activation 1.0 from rank 0", //' %t/p.mlir > %t/norecv.mlir
// RUN: not braid-eval %t/norecv.mlir --entry forward_grad --pipeline 2>&1 | FileCheck %s --check-prefix=NORECV
// NORECV: error: 'func.call' op --pipeline: rank 1 runs F1 of chunk 1 without an input it neither computed nor received (the schedule misses a transfer)
// RUN: sed 's/"F1.0", "send activation 1.0 to rank 1"/"F7.0", "send activation 1.0 to rank 1"/' %t/p.mlir > %t/badmb.mlir
// RUN: not braid-eval %t/badmb.mlir --entry forward_grad --pipeline 2>&1 | FileCheck %s --check-prefix=BADMB
// BADMB: error: --pipeline: bad action 'F7.0'
// RUN: not braid-eval %t/p.mlir --entry forward_grad --pipeline --save-inputs %t/x.st 2>&1 | FileCheck %s --check-prefix=SAVEIN
// SAVEIN: error: --save-inputs does not apply to --pipeline (micro-batch i's inputs are drawn with seed + i)
// RUN: not braid-eval %s --pipeline 2>&1 | FileCheck %s --check-prefix=NOSCHED
// NOSCHED: error: --pipeline needs braid.schedule on @forward (run braid-pipeline-outline and braid-pipeline-schedule)

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
