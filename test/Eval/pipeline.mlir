// Tests that braid-eval --pipeline runs the pieces on simulated ranks in
// schedule order, and that a broken schedule (a lost send, a lost recv, a
// bad action) is an error, not a different result.
//
// RUN: rm -rf %t && mkdir -p %t
// RUN: braid-opt %s --braid-pipeline-split="stages=3" --braid-autodiff --braid-pipeline-outline --braid-pipeline-schedule="schedule=1f1b microbatches=3" -o %t/p.mlir
// RUN: braid-eval %t/p.mlir --entry forward_grad --pipeline --seed 1 | FileCheck %s
// CHECK: @forward_grad (seed 1): 5 result(s)
// CHECK-NEXT: result 0: tensor<f32> =
// (That the results equal running each micro-batch in turn is checked
// numerically by python/tests/test_pipeline_split.py.)
//
// RUN: sed 's/"send activation 0.0 to rank 1", //' %t/p.mlir > %t/nosend.mlir
// RUN: not braid-eval %t/nosend.mlir --entry forward_grad --pipeline 2>&1 | FileCheck %s --check-prefix=NOSEND
// NOSEND: error: the pipeline ranks deadlock: rank 0 waits at 'recv gradient 0.0 from rank 1'; rank 1 waits at 'recv activation 0.0 from rank 0';
// RUN: sed 's/"recv activation 1.0 from rank 0", //' %t/p.mlir > %t/norecv.mlir
// RUN: not braid-eval %t/norecv.mlir --entry forward_grad --pipeline 2>&1 | FileCheck %s --check-prefix=NORECV
// NORECV: error: 'func.call' op rank 1 runs F1 of chunk 1 without an input it neither computed nor received (the schedule misses a transfer)
// RUN: sed 's/"F1.0", "send activation 1.0 to rank 1"/"F7.0", "send activation 1.0 to rank 1"/' %t/p.mlir > %t/badmb.mlir
// RUN: not braid-eval %t/badmb.mlir --entry forward_grad --pipeline 2>&1 | FileCheck %s --check-prefix=BADMB
// BADMB: error: bad action 'F7.0' in braid.schedule
// RUN: not braid-eval %t/p.mlir --entry forward_grad --pipeline --save-inputs %t/x.st 2>&1 | FileCheck %s --check-prefix=SAVEIN
// SAVEIN: error: --save-inputs does not apply to --pipeline (micro-batch i's inputs are drawn with seed + i)
// RUN: not braid-eval %s --pipeline 2>&1 | FileCheck %s --check-prefix=NOSCHED
// NOSCHED: error: --pipeline: @forward neither carries a braid.schedule nor contains braid.pipeline ops

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
