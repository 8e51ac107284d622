// Tests that braid-pipeline-outline moves the loss's reduction over dp out
// of the last chunk's F piece to after the braid.pipeline, like the
// gradients' (pipeline-outline-dp.mlir): B seeds the local loss and reads
// nothing of the summed one, which is only reported, so the last stage's
// dp replicas no longer meet inside every micro-batch's F action. The F
// piece returns the local loss (divided by dp); the step sums the mean over
// micro-batches once, tagged with the chunk that computed it (so
// braid-bucket-collectives fuses it with that chunk's gradient bucket).
//
// RUN: braid-opt %s --braid-pipeline-split="stages=2" --braid-autodiff --braid-train-step="accumulation=4 pipeline" --braid-shard="dp=2" --braid-propagate-sharding --braid-partition --braid-pipeline-outline -o %t.mlir
// RUN: FileCheck %s < %t.mlir
//
// The dp all_reduces inside the F pieces, counted: none (one before).
// RUN: awk '/func.func @forward_grad\.c[0-9]+\.F\(/ {f = 1} f && /braid.all_reduce .* \["dp"\]/ {n++} f && /^  }/ {f = 0} END {print "dp all_reduces in F pieces: " n + 0}' %t.mlir | FileCheck %s --check-prefix=COUNT
// COUNT: dp all_reduces in F pieces: 0
//
// With tp as well (this model's layers then compute the loss replicated
// over tp, so only its dp sum moves).
// RUN: braid-opt %s --braid-pipeline-split="stages=2" --braid-autodiff --braid-train-step="accumulation=4 pipeline" --braid-shard="dp=2 tp=2" --braid-propagate-sharding --braid-partition --braid-pipeline-outline -o %t.tp.mlir
// RUN: awk '/func.func @forward_grad\.c[0-9]+\.F\(/ {f = 1} f && /braid.all_reduce .* \["dp"\]/ {n++} f && /^  }/ {f = 0} END {print "dp all_reduces in F pieces: " n + 0}' %t.tp.mlir | FileCheck %s --check-prefix=COUNT
// RUN: FileCheck %s --check-prefix=TP < %t.tp.mlir

// CHECK-LABEL: func.func @forward_grad.c1.F(
// CHECK-NOT: braid.all_reduce
// CHECK: %[[CE:.*]] = braid.cross_entropy
// CHECK-NOT: braid.all_reduce
// CHECK: %[[L:.*]] = braid.div %[[CE]]
// CHECK-NOT: braid.all_reduce
// CHECK: return {{.*}}%[[L]] :

// CHECK-LABEL: func.func @train_step(
// CHECK: %[[P:.*]]:{{[0-9]+}} = braid.pipeline @forward_grad(
// CHECK: %[[S:.*]] = braid.all_reduce sum %[[P]]#{{[0-9]+}} on @mesh ["dp"] {{{.*}}braid.chunk = 1 : i64} : tensor<f32>
// CHECK: return %[[S]],

// TP-LABEL: func.func @forward_grad.c1.F(
// TP-NOT: braid.all_reduce
// TP: return
// TP-LABEL: func.func @train_step(
// TP: braid.pipeline @forward_grad(
// TP: braid.all_reduce sum {{.*}} on @mesh ["dp"] {{.*}} : tensor<f32>

braid.layer @block(%x: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %w = braid.param "w" {init = #braid.init<normal(0.1)>} : tensor<8x8xf32>
  %y = braid.matmul %x, %w : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %z = braid.relu %y : tensor<2x4x8xf32>
  braid.yield %z : tensor<2x4x8xf32>
}

func.func @forward(%x: tensor<2x4x8xf32>,
                   %labels: tensor<2x4xi32> {braid.name = "labels", braid.range = 8 : i64}) -> tensor<f32> {
  %h = braid.repeat @block(%x) {prefix = "h", count = 2 : i64} : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %b = braid.param "b" {init = #braid.init<normal(0.1)>} : tensor<8xf32>
  %logits = braid.add %h, %b : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %loss = braid.cross_entropy %logits, %labels : (tensor<2x4x8xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
