// Tests braidc's outputs short of an executable (--emit mlir, --emit cpp)
// and that an op without a lowering stops it with the op's location.
//
// RUN: braidc %s --entry f --emit mlir -o - | FileCheck %s --check-prefix=MLIR
// RUN: braidc %s --entry f --emit cpp -o - | FileCheck %s --check-prefix=CPP
// RUN: not braidc %s --entry g -o %t.prog 2>&1 | FileCheck %s --check-prefix=ERR
// RUN: not braidc %s --entry h -o %t.prog 2>&1 | FileCheck %s --check-prefix=NOFN

// MLIR: emitc.func @braid_f(%{{.*}}: !emitc.ptr<f32>, %{{.*}}: !emitc.ptr<f32>)
// MLIR: call_opaque "braid_rt_relu_f32"

// CPP: #include "braid/rt/kernels.h"
// CPP: void braid_f(float* [[X:v[0-9]+]], float* [[Y:v[0-9]+]]) {
// CPP: braid_rt_relu_f32(braid_rt_program_stream(), [[X]],
// CPP: int main(int argc, char **argv) {
// CPP: braid_program_init(seed);
// CPP: braid_rt_program_init_f32(seed, "x", BRAID_RT_INIT_NORMAL, 1.0, 0.0, 4, in0);
// CPP: braid_f(in0, out0);
// CPP: braid_rt_program_print_tensor("loss", out0, 4, 4, 1, dump);
// main() reads and writes its buffers only through the program runtime's
// staging helpers (they are device memory on the CUDA target).
// CPP-NOT: {{(in|out)[0-9]+(_whole)?\[}}

// ERR: braidc.mlir:[[@LINE+7]]:8: error: 'arith.addf' op has no lowering to EmitC yet
// NOFN: error: no function @h to compile
func.func @f(%x: tensor<4xf32> {braid.name = "x"}) -> tensor<4xf32> {
  %y = braid.relu %x : tensor<4xf32>
  return %y : tensor<4xf32>
}
func.func @g(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = arith.addf %x, %x : tensor<4xf32>
  return %y : tensor<4xf32>
}
