// RUN: braid-opt %s --braid-fuse-elementwise --braid-lower-to-emitc | FileCheck %s --check-prefix=CPU
// RUN: braid-opt %s --braid-fuse-elementwise --braid-lower-to-emitc=target=cuda | FileCheck %s --check-prefix=CUDA

// A bf16 pack computed before a row-wise op and unpacked after it crosses
// the row-wise stage in a scratch row, which is float: its bits (exact
// there, below 2^24) are read back as uint16_t, so that CUDA's BF16{...}
// is no narrowing brace-initialisation (an error for clang, a warning for
// nvcc) and both targets unpack the same bits.
// CPU: braid_rt_bf16_bits_of(v0);
// CPU-SAME: t1[j] = v1;
// CPU-SAME: braid_rt_float_of_bf16((uint16_t)t1[j]);
// CUDA: braid_rt_cuda::bf16Of(v0).bits;
// CUDA-SAME: t1[j] = v1;
// CUDA-SAME: braid_rt_cuda::floatOf(braid_rt_cuda::BF16{(uint16_t)t1[j]});
func.func @forward(%a: tensor<4x96xf32> {braid.name = "a"}, %b: tensor<4x96xf32> {braid.name = "b"}) -> tensor<4x96xf32> {
  %0 = braid.add %a, %b : (tensor<4x96xf32>, tensor<4x96xf32>) -> tensor<4x96xf32>
  %1 = braid.convert %0 : tensor<4x96xf32> to tensor<4x96xbf16>
  %n = braid.softmax %0 {axis = 1 : i64} : tensor<4x96xf32>
  %2 = braid.convert %1 : tensor<4x96xbf16> to tensor<4x96xf32>
  %3 = braid.mul %2, %n : (tensor<4x96xf32>, tensor<4x96xf32>) -> tensor<4x96xf32>
  return %3 : tensor<4x96xf32>
}
