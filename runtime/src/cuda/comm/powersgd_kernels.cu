//===- powersgd_kernels.cu - PowerSGD's kernels on the device -------------===//
//
// The steps of the CUDA backend's PowerSGD (compressed.c) that are not
// cuBLAS products or NCCL sums: M = grad + error, the orthonormalisation of
// P's columns, and the finish (the approximation and the error feedback).
// Their arithmetic is powersgd_math.h's, which the host test checks against
// the CPU backend's; without a GPU the fake device runs
// test/compressed_kernels_host.c instead.
//
//===----------------------------------------------------------------------===//

#include <cuda_runtime_api.h>

#include <stddef.h>
#include <stdint.h>

#include "grid.h"
#include "powersgd_math.h"

namespace {

using braid_rt_cuda_comm::blocksFor;
using braid_rt_cuda_comm::kThreads;

__global__ void mKernel(const float *grad, const float *error, float *m,
                        size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x)
    m[i] = braid_rt_psgd_m(grad, error, i);
}

// One block: the columns depend on each other, and `rank` is small. Each
// dot product is a partial sum per thread, then a tree in shared memory,
// in braid_rt_psgd_orthonormalise_as_device's order.
__global__ void orthonormaliseKernel(float *p, size_t rows, size_t rank) {
  constexpr unsigned threads = BRAID_RT_PSGD_GS_THREADS;
  __shared__ double partial[threads];
  unsigned t = threadIdx.x;
  for (size_t c = 0; c < rank; ++c)
    for (size_t k = 0; k <= c; ++k) {
      partial[t] = braid_rt_psgd_partial_dot(p, rows, rank, c, k, t, threads);
      __syncthreads();
      for (unsigned s = threads / 2; s > 0; s /= 2) {
        if (t < s)
          partial[t] = braid_rt_psgd_add(partial[t], partial[t + s]);
        __syncthreads();
      }
      double dot = partial[0];
      // Every thread has read the sum before the next dot overwrites it.
      __syncthreads();
      if (k < c) {
        for (size_t r = t; r < rows; r += threads)
          p[r * rank + c] =
              braid_rt_psgd_subtract(p[r * rank + c], dot, p[r * rank + k]);
      } else {
        double scale = braid_rt_psgd_scale_for(dot);
        for (size_t r = t; r < rows; r += threads)
          p[r * rank + c] = braid_rt_psgd_scale(p[r * rank + c], scale);
      }
      __syncthreads();
    }
}

// m may be grad or error itself: each thread reads its element before
// writing it.
__global__ void finishKernel(const float *m, const float *p, const float *q,
                             float *grad, float *error, size_t rows,
                             size_t cols, size_t rank, double share) {
  size_t n = rows * cols;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x) {
    size_t r = i / cols, k = i % cols;
    float mi = m[i];
    double approx = braid_rt_psgd_approx(p, q, r, k, rank);
    grad[i] = (float)approx;
    if (error)
      error[i] = braid_rt_psgd_error(mi, approx, share);
  }
}

} // namespace

extern "C" cudaError_t braid_rt_cuda_powersgd_m(const float *grad,
                                                const float *error, float *m,
                                                size_t n, cudaStream_t stream) {
  if (n == 0)
    return cudaSuccess;
  mKernel<<<blocksFor(n), kThreads, 0, stream>>>(grad, error, m, n);
  return cudaGetLastError();
}

extern "C" cudaError_t
braid_rt_cuda_powersgd_orthonormalise(float *p, size_t rows, size_t rank,
                                      cudaStream_t stream) {
  if (rows == 0 || rank == 0)
    return cudaSuccess;
  orthonormaliseKernel<<<1, BRAID_RT_PSGD_GS_THREADS, 0, stream>>>(p, rows,
                                                                   rank);
  return cudaGetLastError();
}

extern "C" cudaError_t braid_rt_cuda_powersgd_finish(
    const float *m, const float *p, const float *q, float *grad, float *error,
    size_t rows, size_t cols, size_t rank, int size, cudaStream_t stream) {
  size_t n = rows * cols;
  if (n == 0)
    return cudaSuccess;
  finishKernel<<<blocksFor(n), kThreads, 0, stream>>>(
      m, p, q, grad, error, rows, cols, rank, 1.0 / size);
  return cudaGetLastError();
}
