// RUN: braid-opt %s --braid-bucket-collectives | FileCheck %s
// RUN: braid-opt %s --braid-bucket-collectives=bucket-mb=0.0001 | FileCheck %s --check-prefix=SMALL
// RUN: braid-opt %s --braid-bucket-collectives --braid-comm-report -o /dev/null | FileCheck %s --check-prefix=REPORT
//
// The fused program computes exactly what the members did, element by
// element: braid-eval on a 2 x 2 mesh whose devices hold different blocks
// (seeded), every result gathered whole and dumped.
// RUN: braid-opt %s --braid-bucket-collectives -o %t.bucketed.mlir
// RUN: braid-eval %s --entry f --mesh mesh --seed 3 --dump > %t.plain
// RUN: braid-eval %t.bucketed.mlir --entry f --mesh mesh --seed 3 --dump > %t.bucketed
// RUN: diff %t.plain %t.bucketed
// RUN: FileCheck %s --check-prefix=EVAL < %t.bucketed

// Tests that consecutive reduce_scatters over one group become one whose
// block for each group position is the concatenation of the members'
// blocks for it: an outermost scattered dimension is a reshape to
// [n, block], a scattered dimension after one of size > 1 (%c, dim 1 of
// 3x4) a reshape to [outer, n, rest] and a transpose, one after a size-1
// dimension (%d) a reshape; the rows concatenated along dimension 1 and
// flattened; each result its slice of the fused block, reshaped back. The
// all_reduce between them fills its own bucket and does not end theirs.

braid.mesh @mesh {axes = ["dp", "tp"], shape = array<i64: 2, 2>}

// CHECK-LABEL: func.func @f
// CHECK-SAME: (%[[A:[^:]*]]: tensor<4x3xf32> {{.*}}, %[[B:[^:]*]]: tensor<6xf32> {{.*}}, %[[C:[^:]*]]: tensor<3x4xf32> {{.*}}, %[[D:[^:]*]]: tensor<1x4xf32> {{.*}}, %[[E:[^:]*]]: tensor<2xf32> {{.*}})
// CHECK-NEXT: %[[X:.*]] = braid.all_reduce sum %[[E]] on @mesh ["dp"] {braid.cause = "e", braid.phase = "W"} : tensor<2xf32>
// CHECK-NEXT: %[[RA:.*]] = braid.reshape %[[A]] : (tensor<4x3xf32>) -> tensor<2x6xf32>
// CHECK-NEXT: %[[RB:.*]] = braid.reshape %[[B]] : (tensor<6xf32>) -> tensor<2x3xf32>
// CHECK-NEXT: %[[C3:.*]] = braid.reshape %[[C]] : (tensor<3x4xf32>) -> tensor<3x2x2xf32>
// CHECK-NEXT: %[[CT:.*]] = braid.transpose %[[C3]] {permutation = array<i64: 1, 0, 2>} : (tensor<3x2x2xf32>) -> tensor<2x3x2xf32>
// CHECK-NEXT: %[[RC:.*]] = braid.reshape %[[CT]] : (tensor<2x3x2xf32>) -> tensor<2x6xf32>
// CHECK-NEXT: %[[RD:.*]] = braid.reshape %[[D]] : (tensor<1x4xf32>) -> tensor<2x2xf32>
// CHECK-NEXT: %[[ROWS:.*]] = braid.concat %[[RA]], %[[RB]], %[[RC]], %[[RD]] {axis = 1 : i64} : (tensor<2x6xf32>, tensor<2x3xf32>, tensor<2x6xf32>, tensor<2x2xf32>) -> tensor<2x17xf32>
// CHECK-NEXT: %[[FLAT:.*]] = braid.reshape %[[ROWS]] : (tensor<2x17xf32>) -> tensor<34xf32>
// CHECK-NEXT: %[[R:.*]] = braid.reduce_scatter %[[FLAT]] on @mesh ["dp"] {braid.bucket = 4 : i64, braid.cause = "bucket of 4 reduce_scatters: a; b; c; d", braid.phase = "W", dim = 0 : i64} : (tensor<34xf32>) -> tensor<17xf32>
// CHECK-NEXT: %[[SA:.*]] = braid.slice %[[R]] {limit = array<i64: 6>, start = array<i64: 0>} : (tensor<17xf32>) -> tensor<6xf32>
// CHECK-NEXT: %[[OA:.*]] = braid.reshape %[[SA]] : (tensor<6xf32>) -> tensor<2x3xf32>
// CHECK-NEXT: %[[SB:.*]] = braid.slice %[[R]] {limit = array<i64: 9>, start = array<i64: 6>} : (tensor<17xf32>) -> tensor<3xf32>
// CHECK-NEXT: %[[OB:.*]] = braid.reshape %[[SB]] : (tensor<3xf32>) -> tensor<3xf32>
// CHECK-NEXT: %[[SC:.*]] = braid.slice %[[R]] {limit = array<i64: 15>, start = array<i64: 9>} : (tensor<17xf32>) -> tensor<6xf32>
// CHECK-NEXT: %[[OC:.*]] = braid.reshape %[[SC]] : (tensor<6xf32>) -> tensor<3x2xf32>
// CHECK-NEXT: %[[SD:.*]] = braid.slice %[[R]] {limit = array<i64: 17>, start = array<i64: 15>} : (tensor<17xf32>) -> tensor<2xf32>
// CHECK-NEXT: %[[OD:.*]] = braid.reshape %[[SD]] : (tensor<2xf32>) -> tensor<1x2xf32>
// CHECK-NEXT: braid.all_gather %[[OA]]
// CHECK-NEXT: braid.all_gather %[[OB]]
// CHECK-NEXT: braid.all_gather %[[X]]
// CHECK-NEXT: braid.all_gather %[[OC]]
// CHECK-NEXT: braid.all_gather %[[OD]]
// SMALL-LABEL: func.func @f
// SMALL: braid.bucket = 2 : i64, braid.cause = "bucket of 2 reduce_scatters: a; b"
// SMALL: braid.bucket = 2 : i64, braid.cause = "bucket of 2 reduce_scatters: c; d"
// REPORT-LABEL: braid-comm-report: @f
// REPORT: reduce_scatter dp {{.*}} bucket of 4 reduce_scatters: a; b; c; d
// EVAL-LABEL: result 0: tensor<8x3xf32>
// EVAL: result 1: tensor<12xf32>
// EVAL: result 2: tensor<8xf32>
// EVAL: result 3: tensor<12x2xf32>
// EVAL: result 4: tensor<4x2xf32>
func.func @f(%a: tensor<4x3xf32> {braid.name = "a", braid.block_of = #braid.sharding<@mesh, [["dp", "tp"], []]>},
             %b: tensor<6xf32> {braid.name = "b", braid.block_of = #braid.sharding<@mesh, [["dp", "tp"]]>},
             %c: tensor<3x4xf32> {braid.name = "c", braid.block_of = #braid.sharding<@mesh, [["dp", "tp"], []]>},
             %d: tensor<1x4xf32> {braid.name = "d", braid.block_of = #braid.sharding<@mesh, [[], ["dp", "tp"]]>},
             %e: tensor<2xf32> {braid.name = "e", braid.block_of = #braid.sharding<@mesh, [["dp", "tp"]]>})
    -> (tensor<8x3xf32>, tensor<12xf32>, tensor<8xf32>, tensor<12x2xf32>, tensor<4x2xf32>) {
  %ra = braid.reduce_scatter %a on @mesh ["dp"] {dim = 0 : i64, braid.cause = "a", braid.phase = "W"} : (tensor<4x3xf32>) -> tensor<2x3xf32>
  %rb = braid.reduce_scatter %b on @mesh ["dp"] {dim = 0 : i64, braid.cause = "b", braid.phase = "W"} : (tensor<6xf32>) -> tensor<3xf32>
  %re = braid.all_reduce sum %e on @mesh ["dp"] {braid.cause = "e", braid.phase = "W"} : tensor<2xf32>
  %rc = braid.reduce_scatter %c on @mesh ["dp"] {dim = 1 : i64, braid.cause = "c", braid.phase = "W"} : (tensor<3x4xf32>) -> tensor<3x2xf32>
  %rd = braid.reduce_scatter %d on @mesh ["dp"] {dim = 1 : i64, braid.cause = "d", braid.phase = "W"} : (tensor<1x4xf32>) -> tensor<1x2xf32>
  %ga = braid.all_gather %ra on @mesh ["dp", "tp"] {dim = 0 : i64} : (tensor<2x3xf32>) -> tensor<8x3xf32>
  %gb = braid.all_gather %rb on @mesh ["dp", "tp"] {dim = 0 : i64} : (tensor<3xf32>) -> tensor<12xf32>
  %ge = braid.all_gather %re on @mesh ["dp", "tp"] {dim = 0 : i64} : (tensor<2xf32>) -> tensor<8xf32>
  %gc = braid.all_gather %rc on @mesh ["dp", "tp"] {dim = 0 : i64} : (tensor<3x2xf32>) -> tensor<12x2xf32>
  %gd = braid.all_gather %rd on @mesh ["dp", "tp"] {dim = 0 : i64} : (tensor<1x2xf32>) -> tensor<4x2xf32>
  return %ga, %gb, %ge, %gc, %gd : tensor<8x3xf32>, tensor<12xf32>, tensor<8xf32>, tensor<12x2xf32>, tensor<4x2xf32>
}

// Tests what ends a reduce_scatter bucket: a use of a member's result
// that cannot move below later members (the parameter store after the
// side-effect free mul, which waits itself), another group (axes),
// another phase; the first two pairs are buckets under the 104-byte cap
// too (12 floats each).

// CHECK-LABEL: func.func @ends
// CHECK: braid.reduce_scatter %{{.*}} on @mesh ["dp"] {braid.bucket = 2 : i64{{.*}}dim = 0 : i64} : (tensor<24xf32>) -> tensor<12xf32>
// CHECK: braid.mul
// CHECK-NEXT: braid.store_param "u"
// CHECK: braid.reduce_scatter %{{.*}} on @mesh ["dp"] {braid.bucket = 2 : i64{{.*}}dim = 0 : i64} : (tensor<24xf32>) -> tensor<12xf32>
// CHECK: braid.reduce_scatter %{{.*}} on @mesh ["tp"] {dim = 0 : i64} : (tensor<12xf32>) -> tensor<6xf32>
// CHECK: braid.reduce_scatter %{{.*}} on @mesh ["dp"] {braid.phase = "F", dim = 0 : i64} : (tensor<12xf32>) -> tensor<6xf32>
// CHECK: braid.reduce_scatter %{{.*}} on @mesh ["dp"] {braid.phase = "B", dim = 0 : i64} : (tensor<12xf32>) -> tensor<6xf32>
// CHECK-NOT: braid.bucket
// CHECK: return
// SMALL-LABEL: func.func @ends
// SMALL-COUNT-2: braid.bucket = 2
// SMALL-NOT: braid.bucket
func.func @ends(%a: tensor<12xf32>, %b: tensor<12xf32>) -> tensor<6xf32> {
  %0 = braid.reduce_scatter %a on @mesh ["dp"] {dim = 0 : i64} : (tensor<12xf32>) -> tensor<6xf32>
  %1 = braid.reduce_scatter %b on @mesh ["dp"] {dim = 0 : i64} : (tensor<12xf32>) -> tensor<6xf32>
  %u = braid.mul %0, %1 : (tensor<6xf32>, tensor<6xf32>) -> tensor<6xf32>
  braid.store_param "u", %u : tensor<6xf32>
  %2 = braid.reduce_scatter %a on @mesh ["dp"] {dim = 0 : i64} : (tensor<12xf32>) -> tensor<6xf32>
  %3 = braid.reduce_scatter %b on @mesh ["dp"] {dim = 0 : i64} : (tensor<12xf32>) -> tensor<6xf32>
  %4 = braid.reduce_scatter %a on @mesh ["tp"] {dim = 0 : i64} : (tensor<12xf32>) -> tensor<6xf32>
  %5 = braid.reduce_scatter %a on @mesh ["dp"] {braid.phase = "F", dim = 0 : i64} : (tensor<12xf32>) -> tensor<6xf32>
  %6 = braid.reduce_scatter %b on @mesh ["dp"] {braid.phase = "B", dim = 0 : i64} : (tensor<12xf32>) -> tensor<6xf32>
  %s1 = braid.add %u, %2 : (tensor<6xf32>, tensor<6xf32>) -> tensor<6xf32>
  %s2 = braid.add %s1, %3 : (tensor<6xf32>, tensor<6xf32>) -> tensor<6xf32>
  %s3 = braid.add %s2, %4 : (tensor<6xf32>, tensor<6xf32>) -> tensor<6xf32>
  %s4 = braid.add %s3, %5 : (tensor<6xf32>, tensor<6xf32>) -> tensor<6xf32>
  %s5 = braid.add %s4, %6 : (tensor<6xf32>, tensor<6xf32>) -> tensor<6xf32>
  return %s5 : tensor<6xf32>
}

// Tests that the gradient norm of a ZeRO step does not end the bucket of
// the gradients outside the layers: the sum_squares of each scattered
// gradient moves below the fused reduce_scatter, and the all_reduce of a
// gradient dp does not divide (e) stays alone, as the all_reduce of the
// norm's partial sums needs both (so it ends both buckets) and joins the
// loss's all_reduce (l) instead.

// CHECK-LABEL: func.func @zero_norm
// CHECK: %[[RS:.*]] = braid.reduce_scatter %{{.*}} on @mesh ["dp"] {braid.bucket = 2 : i64, braid.cause = "bucket of 2 reduce_scatters: a; b", dim = 0 : i64} : (tensor<20xf32>) -> tensor<10xf32>
// CHECK: %[[QA:.*]] = braid.sum_squares
// CHECK: %[[QB:.*]] = braid.sum_squares
// CHECK-NEXT: %[[N1:.*]] = braid.add %[[QA]], %[[QB]]
// CHECK-NEXT: %[[RE:.*]] = braid.all_reduce sum %{{.*}} on @mesh ["dp"] {braid.cause = "e"} : tensor<3xf32>
// CHECK-NEXT: %[[QE:.*]] = braid.sum_squares %[[RE]]
// CHECK-NEXT: %[[N2:.*]] = braid.add %[[N1]], %[[QE]]
// CHECK: braid.all_reduce sum %{{.*}} on @mesh ["dp"] {braid.bucket = 2 : i64, braid.cause = "bucket of 2 all_reduces: n; l"} : tensor<2xf32>
// CHECK: braid.sqrt
// CHECK: return
// SMALL-LABEL: func.func @zero_norm
// SMALL: braid.bucket = 2 : i64, braid.cause = "bucket of 2 reduce_scatters: a; b"
func.func @zero_norm(%a: tensor<12xf32>, %b: tensor<4x2xf32>, %e: tensor<3xf32>, %l: tensor<f32>) -> (tensor<f32>, tensor<f32>, tensor<3xf32>) {
  %ra = braid.reduce_scatter %a on @mesh ["dp"] {dim = 0 : i64, braid.cause = "a"} : (tensor<12xf32>) -> tensor<6xf32>
  %qa = braid.sum_squares %ra : (tensor<6xf32>) -> tensor<f32>
  %rb = braid.reduce_scatter %b on @mesh ["dp"] {dim = 1 : i64, braid.cause = "b"} : (tensor<4x2xf32>) -> tensor<4x1xf32>
  %qb = braid.sum_squares %rb : (tensor<4x1xf32>) -> tensor<f32>
  %n1 = braid.add %qa, %qb : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %re = braid.all_reduce sum %e on @mesh ["dp"] {braid.cause = "e"} : tensor<3xf32>
  %qe = braid.sum_squares %re : (tensor<3xf32>) -> tensor<f32>
  %n2 = braid.add %n1, %qe : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %nr = braid.all_reduce sum %n2 on @mesh ["dp"] {braid.cause = "n"} : tensor<f32>
  %norm = braid.sqrt %nr : tensor<f32>
  %rl = braid.all_reduce sum %l on @mesh ["dp"] {braid.cause = "l"} : tensor<f32>
  return %norm, %rl, %re : tensor<f32>, tensor<f32>, tensor<3xf32>
}
