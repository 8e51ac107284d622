// RUN: braid-opt %s --split-input-file --braid-bucket-collectives | FileCheck %s
// RUN: braid-opt %s --split-input-file --braid-bucket-collectives=bucket-mb=0.0001 | FileCheck %s --check-prefix=SMALL
// RUN: braid-opt %s --split-input-file --braid-bucket-collectives=bucket-mb=0 | FileCheck %s --check-prefix=OFF
// RUN: not braid-opt %s --split-input-file --braid-bucket-collectives=bucket-mb=-1 2>&1 | FileCheck %s --check-prefix=NEG
// RUN: braid-opt %s --split-input-file --braid-bucket-collectives --braid-comm-report -o /dev/null | FileCheck %s --check-prefix=REPORT

// Tests that consecutive all_reduces over the same group become one over
// the concatenation of their flattened inputs, each result sliced back out
// and reshaped, in place of the last; that the bucket keeps phase and
// names its members; and that the results equal the unfused ones
// (braid-bucket-collectives-eval.mlir runs both).

braid.mesh @mesh {axes = ["dp", "tp"], shape = array<i64: 2, 2>}

// CHECK-LABEL: func.func @three
// CHECK-SAME: (%[[A:.*]]: tensor<2x3xf32>, %[[B:.*]]: tensor<4xf32>, %[[C:.*]]: tensor<f32>)
// CHECK-NEXT: %[[FA:.*]] = braid.reshape %[[A]] : (tensor<2x3xf32>) -> tensor<6xf32>
// CHECK-NEXT: %[[FB:.*]] = braid.reshape %[[B]] : (tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT: %[[FC:.*]] = braid.reshape %[[C]] : (tensor<f32>) -> tensor<1xf32>
// CHECK-NEXT: %[[ALL:.*]] = braid.concat %[[FA]], %[[FB]], %[[FC]] {axis = 0 : i64} : (tensor<6xf32>, tensor<4xf32>, tensor<1xf32>) -> tensor<11xf32>
// CHECK-NEXT: %[[R:.*]] = braid.all_reduce sum %[[ALL]] on @mesh ["dp"] {braid.bucket = 3 : i64, braid.cause = "bucket of 3 all_reduces: a; b; c", braid.phase = "W"} : tensor<11xf32>
// CHECK-NEXT: %[[SA:.*]] = braid.slice %[[R]] {limit = array<i64: 6>, start = array<i64: 0>} : (tensor<11xf32>) -> tensor<6xf32>
// CHECK-NEXT: %[[RA:.*]] = braid.reshape %[[SA]] : (tensor<6xf32>) -> tensor<2x3xf32>
// CHECK-NEXT: %[[SB:.*]] = braid.slice %[[R]] {limit = array<i64: 10>, start = array<i64: 6>} : (tensor<11xf32>) -> tensor<4xf32>
// CHECK-NEXT: %[[RB:.*]] = braid.reshape %[[SB]] : (tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT: %[[SC:.*]] = braid.slice %[[R]] {limit = array<i64: 11>, start = array<i64: 10>} : (tensor<11xf32>) -> tensor<1xf32>
// CHECK-NEXT: %[[RC:.*]] = braid.reshape %[[SC]] : (tensor<1xf32>) -> tensor<f32>
// CHECK-NEXT: return %[[RA]], %[[RB]], %[[RC]]
// SMALL-LABEL: func.func @three
// SMALL: braid.bucket = 3
// OFF-LABEL: func.func @three
// OFF-NOT: braid.concat
// REPORT: bucket of 3 all_reduces: a; b; c
func.func @three(%a: tensor<2x3xf32>, %b: tensor<4xf32>, %c: tensor<f32>) -> (tensor<2x3xf32>, tensor<4xf32>, tensor<f32>) {
  %ra = braid.all_reduce sum %a on @mesh ["dp"] {braid.cause = "a", braid.phase = "W"} : tensor<2x3xf32>
  %rb = braid.all_reduce sum %b on @mesh ["dp"] {braid.cause = "b", braid.phase = "W"} : tensor<4xf32>
  %rc = braid.all_reduce sum %c on @mesh ["dp"] {braid.cause = "c", braid.phase = "W"} : tensor<f32>
  return %ra, %rb, %rc : tensor<2x3xf32>, tensor<4xf32>, tensor<f32>
}

// -----

// Tests what ends a bucket: a use of a member's result (so the use still
// sees the reduced value), another group (axes), another phase, and the
// size cap (bucket-mb=0.0001 is 104 bytes: two 12-element tensors, not
// three).
braid.mesh @mesh {axes = ["dp", "tp"], shape = array<i64: 2, 2>}

// CHECK-LABEL: func.func @ends
// CHECK: braid.all_reduce sum %{{.*}} on @mesh ["dp"] {braid.bucket = 2 : i64{{.*}}} : tensor<24xf32>
// CHECK-NEXT: braid.slice
// CHECK: braid.mul
// CHECK: braid.all_reduce sum %{{.*}} on @mesh ["dp"] {braid.bucket = 2 : i64{{.*}}} : tensor<24xf32>
// CHECK: braid.all_reduce sum %{{.*}} on @mesh ["tp"] : tensor<12xf32>
// CHECK: braid.all_reduce sum %{{.*}} on @mesh ["dp"] {braid.phase = "F"} : tensor<12xf32>
// CHECK: braid.all_reduce sum %{{.*}} on @mesh ["dp"] {braid.phase = "B"} : tensor<12xf32>
// SMALL-LABEL: func.func @ends
// SMALL-COUNT-2: braid.bucket = 2
// SMALL-NOT: braid.bucket
func.func @ends(%a: tensor<12xf32>, %b: tensor<12xf32>) -> tensor<12xf32> {
  %0 = braid.all_reduce sum %a on @mesh ["dp"] : tensor<12xf32>
  %1 = braid.all_reduce sum %b on @mesh ["dp"] : tensor<12xf32>
  %u = braid.mul %0, %1 : (tensor<12xf32>, tensor<12xf32>) -> tensor<12xf32>
  %2 = braid.all_reduce sum %u on @mesh ["dp"] : tensor<12xf32>
  %3 = braid.all_reduce sum %a on @mesh ["dp"] : tensor<12xf32>
  %4 = braid.all_reduce sum %b on @mesh ["tp"] : tensor<12xf32>
  %5 = braid.all_reduce sum %a on @mesh ["dp"] {braid.phase = "F"} : tensor<12xf32>
  %6 = braid.all_reduce sum %b on @mesh ["dp"] {braid.phase = "B"} : tensor<12xf32>
  %s1 = braid.add %2, %3 : (tensor<12xf32>, tensor<12xf32>) -> tensor<12xf32>
  %s2 = braid.add %s1, %4 : (tensor<12xf32>, tensor<12xf32>) -> tensor<12xf32>
  %s3 = braid.add %s2, %5 : (tensor<12xf32>, tensor<12xf32>) -> tensor<12xf32>
  %s4 = braid.add %s3, %6 : (tensor<12xf32>, tensor<12xf32>) -> tensor<12xf32>
  return %s4 : tensor<12xf32>
}

// NEG: error: braid-bucket-collectives: bucket-mb must be non-negative, got -1
