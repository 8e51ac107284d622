//===- matmul.cu - braid.matmul through cuBLAS ----------------------------===//

#include "backend.h"
#include "ops.h"

using namespace braid_rt_cuda;

void braid_rt_matmul_f32(braid_rt_stream_t *stream, const float *a,
                         const float *b, int64_t a_rank, const int64_t *a_shape,
                         int64_t b_rank, const int64_t *b_shape,
                         int transpose_a, int transpose_b, float *c) {
  CudaBackend backend(stream);
  ops::matmul(backend, a, b, a_rank, a_shape, b_rank, b_shape, transpose_a,
              transpose_b, c);
}

// The operands hold bf16 values: bf16 copies of them in the device's pool,
// cuBLAS's bf16 GEMM with f32 sums (ops::matmulBf16In; compiled, never run
// on a GPU).
braid_rt_status_t braid_rt_matmul_bf16in_f32(
    braid_rt_stream_t *stream, const float *a, const float *b, int64_t a_rank,
    const int64_t *a_shape, int64_t b_rank, const int64_t *b_shape,
    int transpose_a, int transpose_b, float *c) {
  CudaBackend backend(stream);
  return ops::matmulBf16In(backend, a, b, a_rank, a_shape, b_rank, b_shape,
                           transpose_a, transpose_b, c);
}

// braid.matmul_bias: cublasLtMatmul with CUBLASLT_EPILOGUE_BIAS or
// GELU_BIAS (ops::matmulBias; compiled, never run on a GPU).
void braid_rt_matmul_bias_f32(braid_rt_stream_t *stream, const float *a,
                              const float *b, const float *bias,
                              int64_t a_rank, const int64_t *a_shape,
                              int64_t b_rank, const int64_t *b_shape,
                              int transpose_a, int transpose_b, int gelu,
                              float *c) {
  CudaBackend backend(stream);
  ops::matmulBias(backend, a, b, bias, a_rank, a_shape, b_rank, b_shape,
                  transpose_a, transpose_b, gelu, c);
}

// The same on bf16 copies of the operands (CUDA_R_16BF, f32 C and bias).
braid_rt_status_t braid_rt_matmul_bias_bf16in_f32(
    braid_rt_stream_t *stream, const float *a, const float *b,
    const float *bias, int64_t a_rank, const int64_t *a_shape, int64_t b_rank,
    const int64_t *b_shape, int transpose_a, int transpose_b, int gelu,
    float *c) {
  CudaBackend backend(stream);
  return ops::matmulBf16In(backend, a, b, a_rank, a_shape, b_rank, b_shape,
                           transpose_a, transpose_b, c, bias, gelu);
}
