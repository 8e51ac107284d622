// RUN: not braid-opt %s --braid-propagate-sharding 2>&1 | FileCheck %s

// Tests that propagation refuses a module without a mesh.
// CHECK: error: braid-propagate-sharding: needs exactly one braid.mesh, found 0
func.func @nomesh(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  return %x : tensor<4x8xf32>
}
