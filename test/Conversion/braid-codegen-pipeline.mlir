// RUN: braid-opt %s --braid-codegen-pipeline=entry=f | FileCheck %s

// Tests that braidc's pipeline, registered in braid-opt, lowers only the
// entry: @g (with an op that has no lowering) is dropped, not an error.

// CHECK: emitc.func @braid_f(
// CHECK-NOT: emitc.func @braid_g
// CHECK: emitc.func @braid_program_init(
braid.mesh @mesh {axes = ["dp"], shape = array<i64: 2>}
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = braid.relu %x : tensor<4xf32>
  return %y : tensor<4xf32>
}
func.func @g(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = braid.all_reduce sum %x on @mesh ["dp"] : tensor<4xf32>
  return %y : tensor<4xf32>
}
