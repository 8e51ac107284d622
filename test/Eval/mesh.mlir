// Tests braid-eval --mesh on per-device programs: results assembled from
// the devices' blocks, and every error a multi-device run can meet.
//
// RUN: braid-eval %S/Inputs/megatron-mlp.mlir --entry mlp_spmd --mesh mesh --seed 3 | FileCheck %s --check-prefix=SPMD
// SPMD: @mlp_spmd (seed 3, mesh @mesh): 1 result(s)
// SPMD-NEXT: result 0: tensor<4x8xf64>
//
// RUN: not braid-eval %S/Inputs/megatron-mlp.mlir --entry disagree --mesh mesh 2>&1 | FileCheck %s --check-prefix=REPLICAS
// REPLICAS: error: result 0: devices 0 and 1 should hold the same block (they are replicas) but differ at element 0
//
// RUN: not braid-eval %S/Inputs/megatron-mlp.mlir --entry mlp_spmd 2>&1 | FileCheck %s --check-prefix=SERIAL
// SERIAL: error: argument 'x' is sharded; evaluate the per-device program with braid-eval --mesh
//
// RUN: not braid-eval %S/Inputs/megatron-mlp.mlir --entry mlp_spmd --mesh other 2>&1 | FileCheck %s --check-prefix=NOMESH
// NOMESH: error: no braid.mesh @other in {{.*}}megatron-mlp.mlir
//
// RUN: not braid-eval %s --entry collective 2>&1 | FileCheck %s --check-prefix=COLLECTIVE
// COLLECTIVE: mesh.mlir:[[@LINE+6]]:8: error: 'braid.all_reduce' op exchanges data between 4 devices; evaluate the per-device program with braid-eval --mesh
//
// RUN: not braid-eval %s --entry collective --mesh mesh --inputs %t.missing 2>&1 | FileCheck %s --check-prefix=INPUTS
// INPUTS: error: {{.*}}missing: cannot read
braid.mesh @mesh {axes = ["tp"], shape = array<i64: 4>}
func.func @collective(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = braid.all_reduce sum %x on @mesh ["tp"] : tensor<4xf32>
  return %0 : tensor<4xf32>
}
