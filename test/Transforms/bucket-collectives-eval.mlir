// RUN: braid-opt %s --braid-bucket-collectives -o %t.bucketed.mlir
// RUN: grep -c "braid.bucket = 3" %t.bucketed.mlir | FileCheck %s --check-prefix=FUSED
// RUN: braid-eval %s --entry f --mesh mesh --seed 3 --dump > %t.plain
// RUN: braid-eval %t.bucketed.mlir --entry f --mesh mesh --seed 3 --dump > %t.bucketed
// RUN: diff %t.plain %t.bucketed
// RUN: FileCheck %s < %t.bucketed

// Tests that a bucket reduces to exactly what its members did, element by
// element (the dumps are identical), on a 2 x 2 mesh whose devices hold
// different blocks of a and b; the gradient norm's sum_squares between
// the members moves below the bucket and sees the same reduced values.

// FUSED: 1
// CHECK: result 0: tensor<8x3xf32>
// CHECK: result 1: tensor<16xf32>
// CHECK: result 2: tensor<4xf32>
// CHECK: result 3: tensor<4xf32>

braid.mesh @mesh {axes = ["dp", "tp"], shape = array<i64: 2, 2>}
func.func @f(%a: tensor<2x3xf32> {braid.name = "a", braid.block_of = #braid.sharding<@mesh, [["dp", "tp"], []]>}, %b: tensor<4xf32> {braid.name = "b", braid.block_of = #braid.sharding<@mesh, [["dp", "tp"]]>}, %c: tensor<f32> {braid.name = "c"}) -> (tensor<8x3xf32>, tensor<16xf32>, tensor<4xf32>, tensor<4xf32>) {
  %ra = braid.all_reduce sum %a on @mesh ["dp"] : tensor<2x3xf32>
  %qa = braid.sum_squares %ra : (tensor<2x3xf32>) -> tensor<f32>
  %rb = braid.all_reduce sum %b on @mesh ["dp"] : tensor<4xf32>
  %qb = braid.sum_squares %rb : (tensor<4xf32>) -> tensor<f32>
  %n = braid.add %qa, %qb : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %rc = braid.all_reduce sum %c on @mesh ["dp"] : tensor<f32>
  %ga = braid.all_gather %ra on @mesh ["dp", "tp"] {dim = 0 : i64} : (tensor<2x3xf32>) -> tensor<8x3xf32>
  %gb = braid.all_gather %rb on @mesh ["dp", "tp"] {dim = 0 : i64} : (tensor<4xf32>) -> tensor<16xf32>
  %gc = braid.reshape %rc : (tensor<f32>) -> tensor<1xf32>
  %gcc = braid.all_gather %gc on @mesh ["dp", "tp"] {dim = 0 : i64} : (tensor<1xf32>) -> tensor<4xf32>
  %n1 = braid.reshape %n : (tensor<f32>) -> tensor<1xf32>
  %gn = braid.all_gather %n1 on @mesh ["dp", "tp"] {dim = 0 : i64} : (tensor<1xf32>) -> tensor<4xf32>
  return %ga, %gb, %gcc, %gn : tensor<8x3xf32>, tensor<16xf32>, tensor<4xf32>, tensor<4xf32>
}
