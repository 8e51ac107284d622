//===- compressed_kernels.cu - The compressed sums' conversion kernels ----===//
//
// The elementwise steps of the 16-bit ring (compressed.c): rounding f32 to
// bf16 / fp16 before a send and widening, and adding in f32, after a
// receive. The conversions are half.h's, which the CPU backend uses too, and
// the addition is one correctly rounded f32 add (__fadd_rn, never fused), so
// every element comes out as on the CPU target, bit for bit. Without a GPU
// the fake device runs test/compressed_kernels_host.c instead.
//
//===----------------------------------------------------------------------===//

#include <cuda_runtime_api.h>

#include <stddef.h>
#include <stdint.h>

#include "grid.h"
#include "half.h"

namespace {

using braid_rt_cuda_comm::blocksFor;
using braid_rt_cuda_comm::kThreads;

__global__ void narrowKernel(const float *in, uint16_t *out, size_t n,
                             int format) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x)
    out[i] = braid_rt_half_narrow(format, in[i]);
}

__global__ void widenAddKernel(const uint16_t *in, float *acc, size_t n,
                               int format) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x)
    acc[i] = __fadd_rn(braid_rt_half_widen(format, in[i]), acc[i]);
}

__global__ void widenKernel(const uint16_t *in, float *out, size_t n,
                            int format) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x)
    out[i] = braid_rt_half_widen(format, in[i]);
}

__global__ void roundTripKernel(float *x, size_t n, int format) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x)
    x[i] = braid_rt_half_widen(format, braid_rt_half_narrow(format, x[i]));
}

} // namespace

extern "C" cudaError_t braid_rt_cuda_narrow(const float *in, uint16_t *out,
                                            size_t n, int format,
                                            cudaStream_t stream) {
  if (n == 0)
    return cudaSuccess;
  narrowKernel<<<blocksFor(n), kThreads, 0, stream>>>(in, out, n, format);
  return cudaGetLastError();
}

extern "C" cudaError_t braid_rt_cuda_widen_add(const uint16_t *in, float *acc,
                                               size_t n, int format,
                                               cudaStream_t stream) {
  if (n == 0)
    return cudaSuccess;
  widenAddKernel<<<blocksFor(n), kThreads, 0, stream>>>(in, acc, n, format);
  return cudaGetLastError();
}

extern "C" cudaError_t braid_rt_cuda_widen(const uint16_t *in, float *out,
                                           size_t n, int format,
                                           cudaStream_t stream) {
  if (n == 0)
    return cudaSuccess;
  widenKernel<<<blocksFor(n), kThreads, 0, stream>>>(in, out, n, format);
  return cudaGetLastError();
}

extern "C" cudaError_t braid_rt_cuda_round_trip(float *x, size_t n, int format,
                                                cudaStream_t stream) {
  if (n == 0)
    return cudaSuccess;
  roundTripKernel<<<blocksFor(n), kThreads, 0, stream>>>(x, n, format);
  return cudaGetLastError();
}
