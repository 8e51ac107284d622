// RUN: braid-opt %s --braid-lower-to-emitc=spmd | FileCheck %s
// RUN: braid-opt %s --braid-lower-to-emitc | FileCheck %s --check-prefix=ALONE

// Tests that `spmd` lowers a module without a mesh as a per-rank program of
// one rank: it includes program_spmd.h and describes its parameter slots for
// checkpoints (name, rank, whole shape, block spec: replicated; owner: every
// rank; no strided blocks; no pipeline), which a
// program without it does not.

// CHECK-DAG: emitc.include "braid/rt/program_spmd.h"
// CHECK-LABEL: emitc.func @braid_program_init(
// CHECK: emitc.verbatim "static const int64_t braid_slot_shape_0[] = {4, 3, 0};
// CHECK-SAME: static const int64_t braid_slot_spec_0[] = {0, 0, 0};
// CHECK-SAME: {\22w\22, 2, braid_slot_shape_0, braid_slot_spec_0, -1, 0},
// CHECK-SAME: static const int64_t braid_num_slots = 1;
// CHECK-SAME: static const int64_t braid_pipeline_mask = 0;"

// ALONE-NOT: program_spmd.h
// ALONE-NOT: braid_num_slots
func.func @f(%x: tensor<2x4xf32>) -> tensor<2x3xf32> {
  %w = braid.param "w" {init = #braid.init<normal(0.02)>} : tensor<4x3xf32>
  %y = braid.matmul %x, %w : (tensor<2x4xf32>, tensor<4x3xf32>) -> tensor<2x3xf32>
  return %y : tensor<2x3xf32>
}
