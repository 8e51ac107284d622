/*===- matmul.c - braid.matmul over OpenBLAS SGEMM -----------------------===*/
#include "internal.h"

#include <cblas.h>
#include <string.h>

void braid_rt_matmul_f32(braid_rt_stream_t *stream, const float *a,
                         const float *b, int64_t a_rank, const int64_t *a_shape,
                         int64_t b_rank, const int64_t *b_shape,
                         int transpose_a, int transpose_b, float *c) {
  int64_t lda = a_shape[a_rank - 1], ldb = b_shape[b_rank - 1];
  int64_t m = transpose_a ? a_shape[a_rank - 1] : a_shape[a_rank - 2];
  int64_t k = transpose_a ? a_shape[a_rank - 2] : a_shape[a_rank - 1];
  int64_t n = transpose_b ? b_shape[b_rank - 2] : b_shape[b_rank - 1];
  int64_t a_size = a_shape[a_rank - 2] * a_shape[a_rank - 1];
  int64_t b_size = b_shape[b_rank - 2] * b_shape[b_rank - 1];
  /* The batch dimensions: shapes without their last two dimensions. */
  int64_t ra = a_rank - 2, rb = b_rank - 2, rank = ra > rb ? ra : rb;
  int64_t batch = 1, a_batch = braid_rt_num_elements(a_shape, ra),
          b_batch = braid_rt_num_elements(b_shape, rb);
  for (int64_t d = 0; d < rank; ++d) {
    int64_t ad = braid_rt_dim_at(a_shape, ra, rank, d);
    batch *= ad == 1 ? braid_rt_dim_at(b_shape, rb, rank, d) : ad;
  }
  if (batch == 0 || m == 0 || n == 0)
    return;
  if (k == 0) {
    memset(c, 0, (size_t)(batch * m * n) * sizeof(float));
    return;
  }
  enum CBLAS_TRANSPOSE ta = transpose_a ? CblasTrans : CblasNoTrans;
  enum CBLAS_TRANSPOSE tb = transpose_b ? CblasTrans : CblasNoTrans;
  /* [..., M, K] x [K, N]: one GEMM with the batch folded into M. */
  if (!transpose_a && b_batch == 1 && a_batch == batch) {
    cblas_sgemm(CblasRowMajor, ta, tb, (int)(batch * m), (int)n, (int)k, 1.0f,
                a, (int)lda, b, (int)ldb, 0.0f, c, (int)n);
    return;
  }
  for (int64_t p = 0; p < batch; ++p) {
    /* Batch offsets in a and b of result batch p (NumPy broadcasting). */
    int64_t oa = 0, ob = 0, sa = 1, sb = 1, rest = p;
    for (int64_t d = rank - 1; d >= 0; --d) {
      int64_t ad = braid_rt_dim_at(a_shape, ra, rank, d);
      int64_t bd = braid_rt_dim_at(b_shape, rb, rank, d);
      int64_t od = ad == 1 ? bd : ad, idx = rest % od;
      rest /= od;
      if (ad != 1)
        oa += idx * sa;
      if (bd != 1)
        ob += idx * sb;
      sa *= ad;
      sb *= bd;
    }
    cblas_sgemm(CblasRowMajor, ta, tb, (int)m, (int)n, (int)k, 1.0f,
                a + oa * a_size, (int)lda, b + ob * b_size, (int)ldb, 0.0f,
                c + p * m * n, (int)n);
  }
}
