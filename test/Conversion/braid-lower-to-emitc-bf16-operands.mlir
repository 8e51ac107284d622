// RUN: braid-opt %s --braid-legalize-bf16 --braid-lower-to-emitc=reuse-buffers=false | FileCheck %s
//
// RUN: %PYTHON -m braid.models gpt --layers 2 --hidden 32 --heads 4 --seq 8 --vocab 64 --batch 4 -o %t.mlir
// RUN: braid-opt %t.mlir --braid-codegen-pipeline="train=true precision=bf16-mixed" | FileCheck %s --check-prefix=STEP16 --implicit-check-not=braid_rt_matmul_f32
// RUN: braid-opt %t.mlir --braid-codegen-pipeline="train=true" | FileCheck %s --check-prefix=STEP32 --implicit-check-not=braid_rt_matmul_bf16in_f32

// Tests that a matmul of bf16 operands (marked braid.bf16_operands by
// braid-legalize-bf16) calls the bf16-input GEMM, checking its status, and
// a matmul of f32 operands the f32 one; in a bf16-mixed training step every
// matmul, forward and backward (dX and the batched dW), calls the bf16 one,
// in an f32 step none does.

// CHECK-LABEL: emitc.func @braid_forward(
// CHECK-SAME: %[[X:[^:]*]]: !emitc.ptr<f32>, %[[W:[^:]*]]: !emitc.ptr<f32>,
// CHECK: call_opaque "braid_rt_round_bf16_f32"(%{{[^,]*}}, %[[X]], %{{[^,]*}}, %[[X16:[^)]*]])
// CHECK: call_opaque "braid_rt_round_bf16_f32"(%{{[^,]*}}, %[[W]], %{{[^,]*}}, %[[W16:[^)]*]])
// CHECK: %[[ST:.*]] = call_opaque "braid_rt_matmul_bf16in_f32"(%{{[^,]*}}, %[[X16]], %[[W16]], {{.*}}) : {{.*}} -> !emitc.opaque<"braid_rt_status_t">
// CHECK: call_opaque "braid_rt_program_check"(%[[ST]],
// CHECK: call_opaque "braid_rt_matmul_f32"(%{{[^,]*}}, %[[X]], %[[W]],
func.func @forward(%x: tensor<2x4xf32>, %w: tensor<4x3xf32>) -> tensor<2x3xf32> {
  %x16 = braid.convert %x : tensor<2x4xf32> to tensor<2x4xbf16>
  %w16 = braid.convert %w : tensor<4x3xf32> to tensor<4x3xbf16>
  %y16 = braid.matmul %x16, %w16 : (tensor<2x4xbf16>, tensor<4x3xbf16>) -> tensor<2x3xbf16>
  %y = braid.convert %y16 : tensor<2x3xbf16> to tensor<2x3xf32>
  %z = braid.matmul %x, %w : (tensor<2x4xf32>, tensor<4x3xf32>) -> tensor<2x3xf32>
  %s = braid.add %y, %z : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  return %s : tensor<2x3xf32>
}

// STEP16: call_opaque "braid_rt_matmul_bf16in_f32"
// STEP32: call_opaque "braid_rt_matmul_f32"
