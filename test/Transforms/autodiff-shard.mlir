// Tests braid.shard's gradient: the same constraint (sharding and priority)
// on the cotangent, as JAX's with_sharding_constraint transposes. A user's
// sharding on an activation of a whole-tensor forward program (a matmul
// chain, the hidden activation's rows over dp) reaches braid-autodiff
// before any sharding pass, as in braidc's pipeline.
//
// RUN: braid-opt %s --braid-autodiff | FileCheck %s
//
// A sharding is not a computation: the training step with the constraint
// prints the same losses, to the last digit, as the one without it (the
// same model with the braid.shard line removed), and the per-device program
// (propagated from the user's constraint and its gradient's, partitioned
// on dp=2) the serial one's within 1e-5.
// RUN: braid-opt %s --braid-autodiff --braid-train-step -o %t.train.mlir
// RUN: sed -e '/= braid.shard/d' -e 's/%hs\b/%h/g' %s > %t.plain.mlir
// RUN: braid-opt %t.plain.mlir --braid-autodiff --braid-train-step -o %t.plain.train.mlir
// RUN: braid-eval %t.train.mlir --steps 3 --seed 4 > %t.shard.out
// RUN: braid-eval %t.plain.train.mlir --steps 3 --seed 4 > %t.plain.out
// RUN: diff %t.shard.out %t.plain.out
// RUN: FileCheck %s --check-prefix=STEPS < %t.shard.out
// RUN: braid-opt %t.train.mlir --braid-propagate-sharding --braid-partition -o %t.dp2.mlir
// RUN: FileCheck %s --check-prefix=SPMD < %t.dp2.mlir
// RUN: braid-eval %t.dp2.mlir --mesh mesh --steps 3 --seed 4 > %t.dp2.out
// RUN: %PYTHON %S/../Integration/Inputs/compare-results.py %t.dp2.out %t.shard.out --rtol 1e-5 | FileCheck %s --check-prefix=DP2

// CHECK-LABEL: func.func @forward_grad
// CHECK: %[[H:.*]] = braid.matmul {{.*}} {braid.phase = "F"}
// CHECK: %[[HS:.*]] = braid.shard %[[H]] : tensor<4x16xf32> to #braid.sharding<@mesh, {{\[}}["dp"], []]> {braid.phase = "F", priority = 3 : i64}
// CHECK: %[[DA:.*]] = braid.relu_grad %[[HS]], %{{.*}} {braid.phase = "B"}
// CHECK-NEXT: %[[DH:.*]] = braid.shard %[[DA]] : tensor<4x16xf32> to #braid.sharding<@mesh, {{\[}}["dp"], []]> {braid.phase = "B", priority = 3 : i64}
// CHECK: braid.matmul %{{.*}}, %[[DH]] {braid.phase = "W", transpose_a}

// STEPS: step 2 loss
// The constraint and its gradient's make the step data parallel: the
// batch split over dp, the parameters' gradients summed.
// SPMD-LABEL: func.func @train_step(%arg0: tensor<2x8xf32> {braid.block_of = #braid.sharding<@mesh, {{\[}}["dp"], []]>, braid.name = "x"}, %arg1: tensor<2xi32> {braid.block_of = #braid.sharding<@mesh, {{\[}}["dp"]]>
// SPMD: braid.all_reduce sum %{{.*}} on @mesh ["dp"] {{.*}} : tensor<16x10xf32>
// SPMD: braid.all_reduce sum %{{.*}} on @mesh ["dp"] {{.*}} : tensor<8x16xf32>
// DP2: ok: 3 losses within 1e-05

braid.mesh @mesh {axes = ["dp"], shape = array<i64: 2>}
func.func @forward(%x: tensor<4x8xf32> {braid.name = "x"},
                   %y: tensor<4xi32> {braid.name = "labels", braid.range = 10 : i64}) -> tensor<f32> {
  %w1 = braid.param "w1" {init = #braid.init<normal(0.5)>} : tensor<8x16xf32>
  %h = braid.matmul %x, %w1 : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %hs = braid.shard %h : tensor<4x16xf32> to #braid.sharding<@mesh, [["dp"], []]> {priority = 3}
  %a = braid.relu %hs : tensor<4x16xf32>
  %w2 = braid.param "w2" {init = #braid.init<normal(0.5)>} : tensor<16x10xf32>
  %l = braid.matmul %a, %w2 : (tensor<4x16xf32>, tensor<16x10xf32>) -> tensor<4x10xf32>
  %loss = braid.cross_entropy %l, %y : (tensor<4x10xf32>, tensor<4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
