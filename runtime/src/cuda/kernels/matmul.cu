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

// The operands hold bf16 values: the f32 GEMM computes the same product
// (compiled, never run on a GPU; cublasGemmEx on bf16 copies would be the
// faster path).
braid_rt_status_t braid_rt_matmul_bf16in_f32(
    braid_rt_stream_t *stream, const float *a, const float *b, int64_t a_rank,
    const int64_t *a_shape, int64_t b_rank, const int64_t *b_shape,
    int transpose_a, int transpose_b, float *c) {
  braid_rt_matmul_f32(stream, a, b, a_rank, a_shape, b_rank, b_shape,
                      transpose_a, transpose_b, c);
  return BRAID_RT_OK;
}
