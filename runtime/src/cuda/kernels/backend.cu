//===- backend.cu - Streams, cuBLAS handles and the kernels' error flags --===//

#include "backend.h"

#include <cublasLt.h>
#include <cublas_v2.h>

#include <atomic>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

using namespace braid_rt_cuda;

//===----------------------------------------------------------------------===//
// Error flags
//===----------------------------------------------------------------------===//

// One per device (a __device__ variable exists once per device).
__device__ int braidRtCudaErrorFlag;

static std::atomic<int> hostError{kErrNone};

void *braid_rt_cuda::deviceSymbolAddress(const void *symbol,
                                         DeviceSymbolCache &cache) {
  int device;
  if (cudaGetDevice(&device) != cudaSuccess) {
    (void)cudaGetLastError();
    return nullptr;
  }
  if (device != cache.device) {
    void *p = nullptr;
    if (cudaGetSymbolAddress(&p, symbol) != cudaSuccess) {
      (void)cudaGetLastError();
      return nullptr;
    }
    cache.device = device;
    cache.address = p;
  }
  return cache.address;
}

int *braid_rt_cuda::deviceErrorFlag() {
  thread_local DeviceSymbolCache cache;
  return (int *)deviceSymbolAddress(&braidRtCudaErrorFlag, cache);
}

void braid_rt_cuda_record_host_error(int code) {
  int none = kErrNone;
  hostError.compare_exchange_strong(none, code);
}

static braid_rt_status_t describe(int code, char *message, size_t size) {
  const char *what = "";
  braid_rt_status_t status = BRAID_RT_INTERNAL;
  switch (code) {
  case kErrEmbeddingId:
    what = "embedding: an id outside [0, vocab)";
    status = BRAID_RT_INVALID_ARGUMENT;
    break;
  case kErrEmbeddingGradId:
    what = "embedding_grad: an id outside [0, vocab)";
    status = BRAID_RT_INVALID_ARGUMENT;
    break;
  case kErrCrossEntropyLabel:
    what = "cross_entropy: a label outside [0, vocab)";
    status = BRAID_RT_INVALID_ARGUMENT;
    break;
  case kErrCrossEntropyGradLabel:
    what = "cross_entropy_grad: a label outside [0, vocab)";
    status = BRAID_RT_INVALID_ARGUMENT;
    break;
  case kErrRankTooLarge:
    what = "a kernel was given a tensor of rank above 8 (the CUDA backend's "
           "limit)";
    status = BRAID_RT_UNSUPPORTED;
    break;
  case kErrCublas:
    what = "a cuBLAS call failed";
    break;
  case kErrLaunch:
    what = "a CUDA kernel launch or asynchronous copy failed";
    break;
  case kErrOutOfMemory:
    what = "a kernel could not allocate its scratch memory";
    status = BRAID_RT_OUT_OF_MEMORY;
    break;
  default:
    what = "an unknown kernel error";
    break;
  }
  if (message && size)
    snprintf(message, size, "%s (CUDA kernel error %d)", what, code);
  return status;
}

braid_rt_status_t braid_rt_cuda_kernels_poll(braid_rt_stream_t *stream,
                                             char *message, size_t size) {
  if (message && size)
    message[0] = '\0';
  cudaError_t e = cudaStreamSynchronize(braid_rt_cuda_stream(stream));
  if (e != cudaSuccess) {
    if (message && size)
      snprintf(message, size, "CUDA stream failed: %s", cudaGetErrorString(e));
    return BRAID_RT_INTERNAL;
  }
  int code = hostError.exchange(kErrNone);
  if (int *flag = deviceErrorFlag()) {
    int device = kErrNone;
    if (cudaMemcpy(&device, flag, sizeof(int), cudaMemcpyDeviceToHost) !=
            cudaSuccess ||
        cudaMemset(flag, 0, sizeof(int)) != cudaSuccess)
      return describe(kErrLaunch, message, size);
    if (code == kErrNone)
      code = device;
  }
  return code == kErrNone ? BRAID_RT_OK : describe(code, message, size);
}

//===----------------------------------------------------------------------===//
// cuBLAS
//===----------------------------------------------------------------------===//

/// TF32 tensor cores only when BRAID_CUDA_ALLOW_TF32=1: f32 results then
/// differ from the CPU backend's by ~1e-3 relative.
static bool allowTf32() {
  static const bool allow = [] {
    const char *v = getenv("BRAID_CUDA_ALLOW_TF32");
    return v && strcmp(v, "1") == 0;
  }();
  return allow;
}

/// The calling thread's handle for the current device, created on first
/// use and kept until the process ends (destroying handles at thread exit
/// could run after the CUDA runtime has shut down).
static cublasHandle_t handleFor(cudaStream_t stream) {
  thread_local std::vector<cublasHandle_t> handles;
  int device;
  if (cudaGetDevice(&device) != cudaSuccess)
    return nullptr;
  if ((size_t)device >= handles.size())
    handles.resize(device + 1, nullptr);
  cublasHandle_t &h = handles[device];
  if (!h) {
    if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) {
      h = nullptr;
      return nullptr;
    }
    cublasSetMathMode(h, allowTf32() ? CUBLAS_TF32_TENSOR_OP_MATH
                                     : CUBLAS_DEFAULT_MATH);
  }
  if (cublasSetStream(h, stream) != CUBLAS_STATUS_SUCCESS)
    return nullptr;
  return h;
}

static cublasOperation_t op(bool t) { return t ? CUBLAS_OP_T : CUBLAS_OP_N; }

void CudaBackend::gemmStrided(bool ta, bool tb, int64_t m, int64_t n,
                              int64_t k, float alpha, const float *a,
                              int64_t lda, int64_t sa, const float *b,
                              int64_t ldb, int64_t sb, float beta, float *c,
                              int64_t ldc, int64_t sc, int64_t count) {
  cublasHandle_t h = handleFor(stream);
  if (!h || cublasSgemmStridedBatched(h, op(ta), op(tb), (int)m, (int)n,
                                      (int)k, &alpha, a, (int)lda, sa, b,
                                      (int)ldb, sb, &beta, c, (int)ldc, sc,
                                      (int)count) != CUBLAS_STATUS_SUCCESS)
    fail(kErrCublas);
}

// bf16 products are exact in f32; CUBLAS_COMPUTE_32F sums them in f32
// whatever the handle's math mode (tensor cores, no TF32 involved).
void CudaBackend::gemmStrided(bool ta, bool tb, int64_t m, int64_t n,
                              int64_t k, float alpha, const BF16 *a,
                              int64_t lda, int64_t sa, const BF16 *b,
                              int64_t ldb, int64_t sb, float beta, float *c,
                              int64_t ldc, int64_t sc, int64_t count) {
  cublasHandle_t h = handleFor(stream);
  if (!h ||
      cublasGemmStridedBatchedEx(
          h, op(ta), op(tb), (int)m, (int)n, (int)k, &alpha, a, CUDA_R_16BF,
          (int)lda, sa, b, CUDA_R_16BF, (int)ldb, sb, &beta, c, CUDA_R_32F,
          (int)ldc, sc, (int)count, CUBLAS_COMPUTE_32F,
          CUBLAS_GEMM_DEFAULT) != CUBLAS_STATUS_SUCCESS)
    fail(kErrCublas);
}

void CudaBackend::gemmBatched(bool ta, bool tb, int64_t m, int64_t n,
                              int64_t k, float alpha, const float *const *a,
                              int64_t lda, const float *const *b, int64_t ldb,
                              float beta, float *const *c, int64_t ldc,
                              int64_t count) {
  cublasHandle_t h = handleFor(stream);
  if (!h || cublasSgemmBatched(h, op(ta), op(tb), (int)m, (int)n, (int)k,
                               &alpha, a, (int)lda, b, (int)ldb, &beta, c,
                               (int)ldc, (int)count) != CUBLAS_STATUS_SUCCESS)
    fail(kErrCublas);
}

//===----------------------------------------------------------------------===//
// cuBLASLt: GEMMs with a bias (and GELU) epilogue
//===----------------------------------------------------------------------===//

/// The calling thread's cuBLASLt handle (one serves every device), created
/// on first use and kept until the process ends, as the cuBLAS handles.
static cublasLtHandle_t ltHandle() {
  thread_local cublasLtHandle_t h = nullptr;
  if (!h && cublasLtCreate(&h) != CUBLAS_STATUS_SUCCESS)
    h = nullptr;
  return h;
}

/// A column-major `rows` x `cols` layout of `type` with `count` batches
/// `stride` elements apart.
static cublasLtMatrixLayout_t ltLayout(cudaDataType type, int64_t rows,
                                       int64_t cols, int64_t ld, int64_t count,
                                       int64_t stride, bool &ok) {
  cublasLtMatrixLayout_t layout = nullptr;
  if (cublasLtMatrixLayoutCreate(&layout, type, (uint64_t)rows, (uint64_t)cols,
                                 ld) != CUBLAS_STATUS_SUCCESS) {
    ok = false;
    return nullptr;
  }
  int32_t batches = (int32_t)count;
  ok = ok &&
       cublasLtMatrixLayoutSetAttribute(
           layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batches,
           sizeof batches) == CUBLAS_STATUS_SUCCESS &&
       cublasLtMatrixLayoutSetAttribute(
           layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
           sizeof stride) == CUBLAS_STATUS_SUCCESS;
  return layout;
}

/// What ltMatmul did.
enum class LtResult { kDone, kNoAlgorithm, kFailed };

/// C = epilogue(op(A) op(B) + bias) through cublasLtMatmul on `stream`: no
/// workspace (the algorithm is cuBLASLt's first heuristic pick among those
/// that need none), alpha and beta on the host, the one bias for every
/// batch (bias batch stride 0). kNoAlgorithm, with nothing run, when the
/// heuristic has no algorithm for the call or cuBLASLt says it is not
/// supported; kFailed for any other refusal.
static LtResult ltMatmul(cudaStream_t stream, bool ta, bool tb, int64_t m,
                         int64_t n, int64_t k, cudaDataType abType,
                         cublasComputeType_t compute, const void *a,
                         int64_t lda, int64_t sa, const void *b, int64_t ldb,
                         int64_t sb, float *c, int64_t ldc, int64_t sc,
                         int64_t count, const float *bias,
                         GemmEpilogue epilogue) {
  cublasLtHandle_t h = ltHandle();
  if (!h)
    return LtResult::kFailed;
  cublasLtMatmulDesc_t desc = nullptr;
  if (cublasLtMatmulDescCreate(&desc, compute, CUDA_R_32F) !=
      CUBLAS_STATUS_SUCCESS)
    return LtResult::kFailed;
  cublasOperation_t opA = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t opB = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasLtEpilogue_t ep = epilogue == kGeluBias ? CUBLASLT_EPILOGUE_GELU_BIAS
                                                : CUBLASLT_EPILOGUE_BIAS;
  cudaDataType biasType = CUDA_R_32F;
  int64_t biasStride = 0;
  bool ok =
      cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &opA,
                                     sizeof opA) == CUBLAS_STATUS_SUCCESS &&
      cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &opB,
                                     sizeof opB) == CUBLAS_STATUS_SUCCESS &&
      cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &ep,
                                     sizeof ep) == CUBLAS_STATUS_SUCCESS &&
      cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                     &bias,
                                     sizeof bias) == CUBLAS_STATUS_SUCCESS &&
      cublasLtMatmulDescSetAttribute(
          desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &biasType,
          sizeof biasType) == CUBLAS_STATUS_SUCCESS &&
      cublasLtMatmulDescSetAttribute(
          desc, CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE, &biasStride,
          sizeof biasStride) == CUBLAS_STATUS_SUCCESS;
  // Stored shapes: op(A) is m x k, op(B) k x n.
  cublasLtMatrixLayout_t la = ltLayout(abType, ta ? k : m, ta ? m : k, lda,
                                       count, sa, ok);
  cublasLtMatrixLayout_t lb = ltLayout(abType, tb ? n : k, tb ? k : n, ldb,
                                       count, sb, ok);
  cublasLtMatrixLayout_t lc = ltLayout(CUDA_R_32F, m, n, ldc, count, sc, ok);
  LtResult result = LtResult::kFailed;
  cublasLtMatmulPreference_t pref = nullptr;
  size_t workspace = 0;
  ok = ok && la && lb && lc &&
       cublasLtMatmulPreferenceCreate(&pref) == CUBLAS_STATUS_SUCCESS &&
       cublasLtMatmulPreferenceSetAttribute(
           pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace,
           sizeof workspace) == CUBLAS_STATUS_SUCCESS;
  if (ok) {
    cublasLtMatmulHeuristicResult_t pick = {};
    int picked = 0;
    cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(
        h, desc, la, lb, lc, lc, pref, 1, &pick, &picked);
    if (st == CUBLAS_STATUS_NOT_SUPPORTED ||
        (st == CUBLAS_STATUS_SUCCESS && picked == 0)) {
      result = LtResult::kNoAlgorithm;
    } else if (st == CUBLAS_STATUS_SUCCESS) {
      const float alpha = 1.0f, beta = 0.0f;
      st = cublasLtMatmul(h, desc, &alpha, a, la, b, lb, &beta, c, lc, c, lc,
                          &pick.algo, nullptr, 0, stream);
      result = st == CUBLAS_STATUS_SUCCESS          ? LtResult::kDone
               : st == CUBLAS_STATUS_NOT_SUPPORTED ? LtResult::kNoAlgorithm
                                                   : LtResult::kFailed;
    }
  }
  if (pref)
    cublasLtMatmulPreferenceDestroy(pref);
  if (lc)
    cublasLtMatrixLayoutDestroy(lc);
  if (lb)
    cublasLtMatrixLayoutDestroy(lb);
  if (la)
    cublasLtMatrixLayoutDestroy(la);
  cublasLtMatmulDescDestroy(desc);
  return result;
}

bool CudaBackend::gemmLt(bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                         const float *a, int64_t lda, int64_t sa,
                         const float *b, int64_t ldb, int64_t sb, float *c,
                         int64_t ldc, int64_t sc, int64_t count,
                         const float *bias, GemmEpilogue epilogue) {
  // f32 sums in f32 (no TF32) unless BRAID_CUDA_ALLOW_TF32, as gemmStrided.
  cublasComputeType_t compute =
      allowTf32() ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  LtResult r = ltMatmul(stream, ta, tb, m, n, k, CUDA_R_32F, compute, a, lda,
                        sa, b, ldb, sb, c, ldc, sc, count, bias, epilogue);
  if (r == LtResult::kFailed)
    fail(kErrCublas);
  return r != LtResult::kNoAlgorithm;
}

// bf16 in, f32 C and bias, the products summed in f32 (tensor cores).
bool CudaBackend::gemmLt(bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                         const BF16 *a, int64_t lda, int64_t sa,
                         const BF16 *b, int64_t ldb, int64_t sb, float *c,
                         int64_t ldc, int64_t sc, int64_t count,
                         const float *bias, GemmEpilogue epilogue) {
  LtResult r =
      ltMatmul(stream, ta, tb, m, n, k, CUDA_R_16BF, CUBLAS_COMPUTE_32F, a, lda,
               sa, b, ldb, sb, c, ldc, sc, count, bias, epilogue);
  if (r == LtResult::kFailed)
    fail(kErrCublas);
  return r != LtResult::kNoAlgorithm;
}
