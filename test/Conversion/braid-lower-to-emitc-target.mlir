// RUN: braid-opt %s --braid-lower-to-emitc=reuse-buffers=false | FileCheck %s --check-prefix=CPU
// RUN: braid-opt %s --braid-lower-to-emitc="target=cpu reuse-buffers=false" | FileCheck %s --check-prefix=CPU
// RUN: braid-opt %s --braid-lower-to-emitc="target=cuda reuse-buffers=false" | FileCheck %s --check-prefix=CUDA
// RUN: not braid-opt %s --braid-lower-to-emitc=target=tpu 2>&1 | FileCheck %s --check-prefix=BAD

// Tests what the target changes: kernels run on the program's stream on
// both; a constant in the program text is copied into its buffer by the copy
// kernel on cpu, and uploaded (with its status checked) on cuda, whose
// kernels cannot read host memory; a splat is filled by a kernel on both.

func.func @forward(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %c = braid.constant dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]> : tensor<2x3xf32>
  %s = braid.constant dense<0.5> : tensor<2x3xf32>
  %y = braid.add %x, %c : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %z = braid.mul %y, %s : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  return %z : tensor<2x3xf32>
}

// CPU: emitc.global static const @[[DATA:braid_const_[0-9]+]] : !emitc.array<6xf32> = dense<[1.{{0*}}e+00, 2.{{0*}}e+00, 3.{{0*}}e+00, 4.{{0*}}e+00, 5.{{0*}}e+00, 6.{{0*}}e+00]>
// CPU: %[[SRC:.*]] = get_global @[[DATA]]
// CPU: %[[BUF:.*]] = call_opaque "braid_rt_program_buffer_f32"
// CPU: %[[STREAM:.*]] = literal "braid_rt_program_stream()"
// CPU-NEXT: call_opaque "braid_rt_copy_f32"(%[[STREAM]], %[[SRC]], %{{.*}}, %[[BUF]])
// CPU-NOT: braid_rt_memory_copy_to_device
// CPU: call_opaque "braid_rt_fill_f32"

// CUDA: emitc.global static const @[[DATA:braid_const_[0-9]+]] : !emitc.array<6xf32>
// CUDA: %[[SRC:.*]] = get_global @[[DATA]]
// CUDA: %[[BUF:.*]] = call_opaque "braid_rt_program_buffer_f32"
// CUDA: %[[BYTES:.*]] = "emitc.constant"() <{value = 24 : i64}>
// CUDA: %[[STREAM:.*]] = literal "braid_rt_program_stream()"
// CUDA-NEXT: %[[ST:.*]] = call_opaque "braid_rt_memory_copy_to_device"(%[[STREAM]], %[[BUF]], %[[SRC]], %[[BYTES]]) : ({{.*}}) -> !emitc.opaque<"braid_rt_status_t">
// CUDA: call_opaque "braid_rt_program_check"(%[[ST]]
// CUDA-NOT: braid_rt_copy_f32
// CUDA: call_opaque "braid_rt_fill_f32"

// BAD: error: braid-lower-to-emitc: unknown target 'tpu' (cpu or cuda)
