// RUN: braid-opt %s --braid-compress-gradients | FileCheck %s
// RUN: braid-opt %s --braid-compress-gradients=format=fp16 | FileCheck %s --check-prefix=FP16
// RUN: braid-opt %s --braid-compress-gradients --braid-bucket-collectives | FileCheck %s --check-prefix=BUCKET
// RUN: braid-opt %s --braid-compress-gradients --braid-async-collectives | FileCheck %s --check-prefix=ASYNC
// RUN: braid-opt %s --braid-compress-gradients --braid-comm-report -o /dev/null | FileCheck %s --check-prefix=REPORT
// RUN: not braid-opt %s --braid-compress-gradients=format=int8 2>&1 | FileCheck %s --check-prefix=FORMAT
// RUN: braid-opt %s --braid-compress-gradients="format=powersgd rank=1" --braid-bucket-collectives | FileCheck %s --check-prefix=PSGD
// RUN: braid-opt %s --braid-compress-gradients="format=powersgd rank=1" --braid-comm-report -o /dev/null | FileCheck %s --check-prefix=PSGD-REPORT
// RUN: braid-opt %s --braid-compress-gradients="format=powersgd rank=2" | FileCheck %s --check-prefix=PSGD-BIG
// RUN: not braid-opt %s --braid-compress-gradients="format=powersgd rank=0" 2>&1 | FileCheck %s --check-prefix=PSGD-RANK

// Tests that braid-compress-gradients marks the f32 sums of rank >= 1 over
// dp alone (all_reduce, reduce_scatter, started forms) with braid.compress
// and leaves the loss (rank 0), tensor-parallel sums, maxima and other
// collectives exact; that buckets keep compressed and exact reductions
// apart; that the mark survives braid-async-collectives; and that
// braid-comm-report counts 16 bits per element on the wire and prints the
// bytes saved.

braid.mesh @mesh {axes = ["dp", "tp"], shape = array<i64: 2, 2>}

// CHECK-LABEL: func.func @grads
// CHECK: braid.all_reduce sum %{{.*}} on @mesh ["dp"] {braid.cause = "a", braid.compress = "bf16"} : tensor<2x3xf32>
// CHECK: braid.all_reduce sum %{{.*}} on @mesh ["dp"] {braid.cause = "c", braid.compress = "bf16"} : tensor<4xf32>
// CHECK: braid.all_reduce sum %{{.*}} on @mesh ["dp"] {braid.cause = "b"} : tensor<f32>
// CHECK: braid.all_reduce sum %{{.*}} on @mesh ["tp"] {braid.cause = "tp"} : tensor<4xf32>
// CHECK: braid.all_reduce sum %{{.*}} on @mesh ["dp", "tp"] {braid.cause = "dptp"} : tensor<4xf32>
// CHECK: braid.all_reduce max %{{.*}} on @mesh ["dp"] {braid.cause = "max"} : tensor<4xf32>
// CHECK: braid.reduce_scatter %{{.*}} on @mesh ["dp"] {braid.cause = "e", braid.compress = "bf16", dim = 0 : i64}
// CHECK: braid.all_gather %{{.*}} on @mesh ["dp"] {dim = 0 : i64}
// CHECK-NOT: braid.compress
// FP16-LABEL: func.func @grads
// FP16: braid.compress = "fp16"
// BUCKET-LABEL: func.func @grads
// BUCKET: braid.all_reduce sum %{{.*}} on @mesh ["dp"] {braid.bucket = 2 : i64, braid.cause = "bucket of 2 all_reduces: a; c", braid.compress = "bf16"} : tensor<10xf32>
// BUCKET: braid.all_reduce sum %{{.*}} on @mesh ["dp"] {braid.cause = "b"} : tensor<f32>
// ASYNC-LABEL: func.func @grads
// ASYNC: braid.all_reduce_start sum %{{.*}} on @mesh ["dp"] {braid.cause = "a", braid.compress = "bf16"}
// REPORT-LABEL: braid-comm-report: @grads
// REPORT: all_reduce dp 2 24 12 {{.*}} [bf16] a
// REPORT: all_reduce dp 2 16 8 {{.*}} [bf16] c
// REPORT: all_reduce dp 2 4 4 {{.*}} b
// REPORT: reduce_scatter dp 2 32 8 {{.*}} [bf16] e
// REPORT: compressed gradient reductions: sent 28 bytes instead of 56, saved 28 bytes
// FORMAT: braid-compress-gradients: unknown format 'int8'; expected bf16, fp16 or powersgd
//
// PowerSGD: the 2-D gradient's all_reduce reads its state first (on this
// dp x tp mesh Q per tp block, the error per device) and is not bucketed; 1-D gradients,
// reduce_scatters and the rest stay exact. Wire bytes: P [2, 1] and
// Q [3, 1] in f32 instead of the 2 x 3 matrix; at rank 2 P and Q would
// be larger than the matrix, which then stays exact.
// PSGD-LABEL: func.func @grads
// PSGD: braid.param "powersgd.grads.0.q" {block_of = #braid.sharding<@mesh, {{\[\["tp"\], \[\]\]}}>, init = #braid.init<normal(1.000000e+00)>, state} : tensor<3x1xf32>
// PSGD: braid.param "powersgd.grads.0.error" {block_of = #braid.sharding<@mesh, {{\[\["dp", "tp"\], \[\]\]}}>, init = #braid.init<zeros>, state} : tensor<2x3xf32>
// PSGD: braid.all_reduce sum %{{.*}} on @mesh ["dp"] {braid.cause = "a", braid.compress = "powersgd", braid.powersgd = {error = "powersgd.grads.0.error", q = "powersgd.grads.0.q", rank = 1 : i64}} : tensor<2x3xf32>
// PSGD-NOT: braid.compress
// PSGD-REPORT: all_reduce dp 2 24 20 {{.*}} [powersgd] a
// PSGD-REPORT: compressed gradient reductions: sent 20 bytes instead of 24, saved 4 bytes
// PSGD-RANK: braid-compress-gradients: rank must be positive, got 0
// PSGD-BIG-LABEL: func.func @grads
// PSGD-BIG-NOT: braid.compress
func.func @grads(%a: tensor<2x3xf32>, %b: tensor<f32>, %c: tensor<4xf32>, %e: tensor<8xf32>) -> (tensor<2x3xf32>, tensor<f32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<16xf32>) {
  %ra = braid.all_reduce sum %a on @mesh ["dp"] {braid.cause = "a"} : tensor<2x3xf32>
  %rc = braid.all_reduce sum %c on @mesh ["dp"] {braid.cause = "c"} : tensor<4xf32>
  %rb = braid.all_reduce sum %b on @mesh ["dp"] {braid.cause = "b"} : tensor<f32>
  %rt = braid.all_reduce sum %c on @mesh ["tp"] {braid.cause = "tp"} : tensor<4xf32>
  %rdt = braid.all_reduce sum %c on @mesh ["dp", "tp"] {braid.cause = "dptp"} : tensor<4xf32>
  %rm = braid.all_reduce max %c on @mesh ["dp"] {braid.cause = "max"} : tensor<4xf32>
  %rs = braid.reduce_scatter %e on @mesh ["dp"] {braid.cause = "e", dim = 0 : i64} : (tensor<8xf32>) -> tensor<4xf32>
  %g = braid.all_gather %e on @mesh ["dp"] {dim = 0 : i64} : (tensor<8xf32>) -> tensor<16xf32>
  return %ra, %rb, %rc, %rt, %rdt, %rm, %rs, %g : tensor<2x3xf32>, tensor<f32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<16xf32>
}
