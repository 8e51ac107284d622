//===- backend.h - The CUDA backend of ops.h: kernels and cuBLAS ----------===//
//
// CudaBackend runs the templates of ops.h on a CUDA stream: forEach is a
// grid-stride kernel, scratch is stream-ordered (cudaMallocAsync and
// cudaFreeAsync, so no kernel call synchronises), GEMMs go to cuBLAS with a
// handle per thread and device (bf16-input GEMMs through
// cublasGemmStridedBatchedEx), GEMMs with a bias epilogue to cuBLASLt. The
// stream is braid_rt_cuda_stream's (braid/rt/cuda.h; NULL: the context's
// compute stream, or CUDA's legacy default stream without a context). Only nvcc
// compiles this header.
//
//===----------------------------------------------------------------------===//
#ifndef BRAID_RT_CUDA_BACKEND_H
#define BRAID_RT_CUDA_BACKEND_H

#include "errors.h"
#include "kernel_math.h"

#include "braid/rt/cuda.h"
#include "braid/rt/status.h"

#include <cuda_runtime.h>

namespace braid_rt_cuda {

/// Where a __device__ variable's address was last looked up: per thread,
/// since each thread may have another current device.
struct DeviceSymbolCache {
  int device = -1;
  void *address = nullptr;
};

/// The address of the __device__ variable `symbol` on the current device
/// (looked up again only when the device changes), or NULL when there is
/// no usable device.
void *deviceSymbolAddress(const void *symbol, DeviceSymbolCache &cache);

/// The error flag of the current device (a __device__ int), or NULL when
/// there is no usable device.
int *deviceErrorFlag();

template <class F> __global__ void forEachKernel(int64_t n, F f) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x)
    f(i);
}

class CudaBackend {
public:
  explicit CudaBackend(braid_rt_stream_t *s) : stream(braid_rt_cuda_stream(s)) {}

  template <class F> void forEach(int64_t n, F f) {
    constexpr int64_t kThreads = 256, kMaxBlocks = 1 << 16;
    if (n <= 0)
      return;
    int64_t blocks = (n + kThreads - 1) / kThreads;
    forEachKernel<<<(unsigned)(blocks < kMaxBlocks ? blocks : kMaxBlocks),
                    (unsigned)kThreads, 0, stream>>>(n, f);
    check(cudaGetLastError());
  }

  int *errorFlag() {
    if (!flag && !(flag = deviceErrorFlag()))
      fail(kErrLaunch);
    return flag;
  }
  void fail(int code) {
    failed = true;
    recordHostError(code);
  }
  /// What a fallible kernel returns: errors found on the device come later,
  /// from braid_rt_cuda_kernels_poll.
  braid_rt_status_t status() const {
    return failed ? BRAID_RT_INTERNAL : BRAID_RT_OK;
  }

  void *alloc(size_t bytes) {
    void *p = nullptr;
    if (cudaMallocAsync(&p, bytes ? bytes : 1, stream) != cudaSuccess) {
      (void)cudaGetLastError();
      return nullptr;
    }
    return p;
  }
  void release(void *p) { check(cudaFreeAsync(p, stream)); }
  void zero(void *p, size_t bytes) {
    if (bytes)
      check(cudaMemsetAsync(p, 0, bytes, stream));
  }
  void copy(void *dst, const void *src, size_t bytes) {
    if (bytes)
      check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream));
  }

  // Column-major, as cublasSgemmStridedBatched and cublasSgemmBatched.
  void gemmStrided(bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                   float alpha, const float *a, int64_t lda, int64_t sa,
                   const float *b, int64_t ldb, int64_t sb, float beta,
                   float *c, int64_t ldc, int64_t sc, int64_t count);
  // bf16 operands, f32 result and sums (cublasGemmStridedBatchedEx,
  // CUBLAS_COMPUTE_32F).
  void gemmStrided(bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                   float alpha, const BF16 *a, int64_t lda, int64_t sa,
                   const BF16 *b, int64_t ldb, int64_t sb, float beta, float *c,
                   int64_t ldc, int64_t sc, int64_t count);
  void gemmBatched(bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                   float alpha, const float *const *a, int64_t lda,
                   const float *const *b, int64_t ldb, float beta,
                   float *const *c, int64_t ldc, int64_t count);
  // cublasLtMatmul, alpha 1 and beta 0, `count` strided batches, f32 C
  // and bias (one for every batch), epilogue CUBLASLT_EPILOGUE_BIAS or
  // GELU_BIAS: f32 operands (CUBLAS_COMPUTE_32F, or _FAST_TF32 with
  // BRAID_CUDA_ALLOW_TF32) or bf16 ones (CUDA_R_16BF, CUBLAS_COMPUTE_32F).
  // False, with nothing run or recorded, when cuBLASLt has no algorithm for
  // the call (the caller runs the plain GEMM and the epilogue instead); a
  // failure records kErrCublas and returns true.
  bool gemmLt(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float *a,
              int64_t lda, int64_t sa, const float *b, int64_t ldb, int64_t sb,
              float *c, int64_t ldc, int64_t sc, int64_t count,
              const float *bias, GemmEpilogue epilogue);
  bool gemmLt(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const BF16 *a,
              int64_t lda, int64_t sa, const BF16 *b, int64_t ldb, int64_t sb,
              float *c, int64_t ldc, int64_t sc, int64_t count,
              const float *bias, GemmEpilogue epilogue);

private:
  void check(cudaError_t e) {
    if (e != cudaSuccess)
      fail(kErrLaunch);
  }

  cudaStream_t stream;
  int *flag = nullptr;
  bool failed = false;
};

} // namespace braid_rt_cuda

#endif // BRAID_RT_CUDA_BACKEND_H
