// RUN: braid-opt %s --split-input-file --braid-bucket-collectives | FileCheck %s
// RUN: braid-opt %s --split-input-file --braid-bucket-collectives=bucket-mb=0.0001 | FileCheck %s --check-prefix=SMALL
// RUN: braid-opt %s --split-input-file --braid-bucket-collectives=bucket-mb=0 | FileCheck %s --check-prefix=OFF
// RUN: not braid-opt %s --split-input-file --braid-bucket-collectives=bucket-mb=-1 2>&1 | FileCheck %s --check-prefix=NEG
// RUN: not braid-opt %s --split-input-file --braid-bucket-collectives=bucket-mb=nan 2>&1 | FileCheck %s --check-prefix=NAN
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
// sees the reduced value) and the size cap (bucket-mb=0.0001 is 104 bytes:
// two 12-element tensors, not three); another group (axes) or phase fills a
// bucket of its own.
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

// -----

// Tests that buckets of two groups fill side by side: a sequence-parallel
// layer's W yields its norms' gradients summed over dp and tp between the
// gradients summed over dp, each kept by an all_slice (ZeRO's share), which
// moves no data and so waits below its bucket. Each fused reduction takes
// the place of its last member.
braid.mesh @mesh {axes = ["dp", "tp"], shape = array<i64: 2, 2>}

// CHECK-LABEL: func.func @groups
// CHECK: %[[DP:.*]] = braid.all_reduce sum %{{.*}} on @mesh ["dp"] {braid.bucket = 2 : i64, braid.cause = "bucket of 2 all_reduces: a; c"} : tensor<24xf32>
// CHECK: %[[BOTH:.*]] = braid.all_reduce sum %{{.*}} on @mesh ["dp", "tp"] {braid.bucket = 2 : i64, braid.cause = "bucket of 2 all_reduces: b; d"} : tensor<16xf32>
// CHECK-NEXT: braid.slice %[[BOTH]] {limit = array<i64: 8>, start = array<i64: 0>}
// CHECK-NEXT: %[[B:.*]] = braid.reshape
// CHECK-NEXT: braid.all_slice %[[B]] on @mesh ["dp"]
// CHECK-NOT: braid.all_reduce
// CHECK: return
// SMALL-LABEL: func.func @groups
// OFF-LABEL: func.func @groups
// OFF-COUNT-4: braid.all_reduce sum %{{.*}} : tensor<{{12|8}}xf32>
func.func @groups(%a: tensor<12xf32>, %b: tensor<8xf32>, %c: tensor<12xf32>, %d: tensor<8xf32>) -> (tensor<12xf32>, tensor<4xf32>, tensor<12xf32>, tensor<4xf32>) {
  %ra = braid.all_reduce sum %a on @mesh ["dp"] {braid.cause = "a"} : tensor<12xf32>
  %rb = braid.all_reduce sum %b on @mesh ["dp", "tp"] {braid.cause = "b"} : tensor<8xf32>
  %sb = braid.all_slice %rb on @mesh ["dp"] {dim = 0 : i64} : (tensor<8xf32>) -> tensor<4xf32>
  %rc = braid.all_reduce sum %c on @mesh ["dp"] {braid.cause = "c"} : tensor<12xf32>
  %rd = braid.all_reduce sum %d on @mesh ["dp", "tp"] {braid.cause = "d"} : tensor<8xf32>
  %sd = braid.all_slice %rd on @mesh ["dp"] {dim = 0 : i64} : (tensor<8xf32>) -> tensor<4xf32>
  return %ra, %sb, %rc, %sd : tensor<12xf32>, tensor<4xf32>, tensor<12xf32>, tensor<4xf32>
}

// -----

// Tests that side-effect free ops that only need earlier members' results
// do not end a bucket (a training step's gradient norm: the sum_squares of
// each reduced gradient, added up, its square root): they move below the
// fused reduction, in their order, with what depends on them, while an op
// with no such need (%sx) keeps its place. The parameter store, which
// cannot move, ends the bucket; the all_reduce after it is alone. Under
// the 104-byte cap (SMALL) a and b fill a bucket, c starts the next, which
// the store (needing only a) does not end, and the sum of the two
// buckets' norms waits for the second.
braid.mesh @mesh {axes = ["dp", "tp"], shape = array<i64: 2, 2>}

// CHECK-LABEL: func.func @norm
// CHECK-SAME: (%[[A:[^:]*]]: tensor<12xf32>, %[[B:[^:]*]]: tensor<4x3xf32>, %[[C:[^:]*]]: tensor<6xf32>, %[[X:[^:]*]]: tensor<5xf32>, %[[L:[^:]*]]: tensor<f32>)
// CHECK: %[[SX:.*]] = braid.sum_squares %[[X]]
// CHECK: %[[R:.*]] = braid.all_reduce sum %{{.*}} on @mesh ["dp"] {braid.bucket = 3 : i64, braid.cause = "bucket of 3 all_reduces: a; b; c"} : tensor<30xf32>
// CHECK-NEXT: %[[SA:.*]] = braid.slice %[[R]] {limit = array<i64: 12>, start = array<i64: 0>}
// CHECK-NEXT: %[[RA:.*]] = braid.reshape %[[SA]] : (tensor<12xf32>) -> tensor<12xf32>
// CHECK-NEXT: %[[QA:.*]] = braid.sum_squares %[[RA]]
// CHECK-NEXT: %[[SB:.*]] = braid.slice %[[R]] {limit = array<i64: 24>, start = array<i64: 12>}
// CHECK-NEXT: %[[RB:.*]] = braid.reshape %[[SB]] : (tensor<12xf32>) -> tensor<4x3xf32>
// CHECK-NEXT: %[[QB:.*]] = braid.sum_squares %[[RB]]
// CHECK-NEXT: %[[N1:.*]] = braid.add %[[QA]], %[[QB]]
// CHECK-NEXT: %[[SC:.*]] = braid.slice %[[R]] {limit = array<i64: 30>, start = array<i64: 24>}
// CHECK-NEXT: %[[RC:.*]] = braid.reshape %[[SC]] : (tensor<6xf32>) -> tensor<6xf32>
// CHECK-NEXT: %[[QC:.*]] = braid.sum_squares %[[RC]]
// CHECK-NEXT: %[[N2:.*]] = braid.add %[[N1]], %[[QC]]
// CHECK-NEXT: %[[N3:.*]] = braid.add %[[N2]], %[[SX]]
// CHECK-NEXT: %[[NORM:.*]] = braid.sqrt %[[N3]]
// CHECK-NEXT: braid.store_param "a", %[[RA]]
// CHECK-NEXT: %[[RL:.*]] = braid.all_reduce sum %[[L]] on @mesh ["dp"] : tensor<f32>
// CHECK-NEXT: return %[[NORM]], %[[RL]]
// SMALL-LABEL: func.func @norm
// SMALL: braid.all_reduce sum %{{.*}} {braid.bucket = 2 : i64, braid.cause = "bucket of 2 all_reduces: a; b"} : tensor<24xf32>
// SMALL: %[[N1:.*]] = braid.add
// SMALL: braid.store_param
// SMALL: braid.all_reduce sum %{{.*}} {braid.bucket = 2 : i64, braid.cause = "bucket of 2 all_reduces: c"} : tensor<7xf32>
// SMALL: %[[QC:.*]] = braid.sum_squares
// SMALL-NEXT: braid.add %[[N1]], %[[QC]]
// OFF-LABEL: func.func @norm
// OFF-NEXT: braid.all_reduce sum %{{.*}} {braid.cause = "a"}
// OFF-NEXT: braid.sum_squares
func.func @norm(%a: tensor<12xf32>, %b: tensor<4x3xf32>, %c: tensor<6xf32>, %x: tensor<5xf32>, %l: tensor<f32>) -> (tensor<f32>, tensor<f32>) {
  %ra = braid.all_reduce sum %a on @mesh ["dp"] {braid.cause = "a"} : tensor<12xf32>
  %qa = braid.sum_squares %ra : (tensor<12xf32>) -> tensor<f32>
  %rb = braid.all_reduce sum %b on @mesh ["dp"] {braid.cause = "b"} : tensor<4x3xf32>
  %qb = braid.sum_squares %rb : (tensor<4x3xf32>) -> tensor<f32>
  %n1 = braid.add %qa, %qb : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %sx = braid.sum_squares %x : (tensor<5xf32>) -> tensor<f32>
  %rc = braid.all_reduce sum %c on @mesh ["dp"] {braid.cause = "c"} : tensor<6xf32>
  %qc = braid.sum_squares %rc : (tensor<6xf32>) -> tensor<f32>
  %n2 = braid.add %n1, %qc : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %n3 = braid.add %n2, %sx : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %norm = braid.sqrt %n3 : tensor<f32>
  braid.store_param "a", %ra : tensor<12xf32>
  %rl = braid.all_reduce sum %l on @mesh ["dp"] : tensor<f32>
  return %norm, %rl : tensor<f32>, tensor<f32>
}

// -----

// Tests what still ends a bucket when the use is a side-effect free op:
// an all_reduce of its result (%rm: its operand needs the bucket, through
// the deferred %m), a collective of another kind using it (the
// all_gather), an op with effects using it (the store of %m2, deferred
// itself), and the terminator. The mul of members of two buckets waits
// for the later one.
braid.mesh @mesh {axes = ["dp", "tp"], shape = array<i64: 2, 2>}

// CHECK-LABEL: func.func @still_ends
// CHECK: braid.all_reduce sum %{{.*}} {braid.bucket = 2 : i64, braid.cause = "bucket of 2 all_reduces: a; b"} : tensor<24xf32>
// CHECK: %[[M:.*]] = braid.mul
// CHECK: braid.reshape %[[M]]
// CHECK: braid.all_reduce sum %{{.*}} {braid.bucket = 2 : i64, braid.cause = "bucket of 2 all_reduces: m; c"} : tensor<24xf32>
// CHECK: %[[M1:.*]] = braid.mul
// CHECK-NEXT: braid.all_gather %[[M1]]
// CHECK-NEXT: braid.all_reduce sum %{{.*}} {braid.cause = "e"} : tensor<12xf32>
// CHECK-NEXT: %[[M2:.*]] = braid.neg
// CHECK-NEXT: braid.store_param "m2", %[[M2]]
// CHECK: braid.all_reduce sum %{{.*}} {braid.bucket = 2 : i64, braid.cause = "bucket of 2 all_reduces: f; g"} : tensor<24xf32>
// CHECK-NOT: braid.bucket
// CHECK: return
func.func @still_ends(%a: tensor<12xf32>, %b: tensor<12xf32>, %c: tensor<12xf32>) -> (tensor<12xf32>, tensor<24xf32>, tensor<12xf32>, tensor<12xf32>) {
  %ra = braid.all_reduce sum %a on @mesh ["dp"] {braid.cause = "a"} : tensor<12xf32>
  %m = braid.mul %ra, %ra : (tensor<12xf32>, tensor<12xf32>) -> tensor<12xf32>
  %rb = braid.all_reduce sum %b on @mesh ["dp"] {braid.cause = "b"} : tensor<12xf32>
  %rm = braid.all_reduce sum %m on @mesh ["dp"] {braid.cause = "m"} : tensor<12xf32>
  %rc = braid.all_reduce sum %c on @mesh ["dp"] {braid.cause = "c"} : tensor<12xf32>
  %m1 = braid.mul %rc, %rb : (tensor<12xf32>, tensor<12xf32>) -> tensor<12xf32>
  %g = braid.all_gather %m1 on @mesh ["dp"] {dim = 0 : i64} : (tensor<12xf32>) -> tensor<24xf32>
  %re = braid.all_reduce sum %a on @mesh ["dp"] {braid.cause = "e"} : tensor<12xf32>
  %m2 = braid.neg %re : tensor<12xf32>
  braid.store_param "m2", %m2 : tensor<12xf32>
  %rf = braid.all_reduce sum %b on @mesh ["dp"] {braid.cause = "f"} : tensor<12xf32>
  %rg = braid.all_reduce sum %c on @mesh ["dp"] {braid.cause = "g"} : tensor<12xf32>
  return %rm, %g, %rf, %rg : tensor<12xf32>, tensor<24xf32>, tensor<12xf32>, tensor<12xf32>
}

// NEG: error: braid-bucket-collectives: bucket-mb must be non-negative and finite, got -1
// NAN: error: braid-bucket-collectives: bucket-mb must be non-negative and finite, got nan
