/*===- powersgd_math.h - PowerSGD's device arithmetic, host and device ---===*/
/*
 * Every value the CUDA backend's PowerSGD computes on the device
 * (powersgd_kernels.cu) comes from a function of this header, __host__
 * __device__ under nvcc and plain C elsewhere, so that the host unit test
 * (test/powersgd_math_test.c) and the fake device
 * (test/compressed_kernels_host.c) run the same arithmetic as the GPU and
 * compare it with the CPU backend's (common/powersgd.h). Row-major, as
 * there: m and grad [rows][cols], p [rows][rank], q [cols][rank].
 *
 * Products and sums in double go through __dmul_rn / __dadd_rn on the
 * device, so that nvcc never fuses them into a multiply-add: each rounds
 * as on the host, and the host copies below give the device's bits.
 *
 *  - m = grad + error: the CPU's bits.
 *  - P = M Q and Q = M^T P: cuBLAS SGEMM (f32 products and sums in
 *    cuBLAS's order, TF32 off) with the arguments of
 *    braid_rt_psgd_gemm_p / _q; the test checks them, through a
 *    column-major reference GEMM, against the CPU's double loops.
 *  - The orthonormalisation: one block of BRAID_RT_PSGD_GS_THREADS
 *    threads, modified Gram-Schmidt column by column as on the CPU, each
 *    dot product a strided partial sum per thread and then a tree in
 *    shared memory (braid_rt_psgd_orthonormalise_as_device runs the same
 *    order on the host): other sums than the CPU's sequential ones, the
 *    same steps otherwise.
 *  - The finish (grad = P Q^T, error = m - grad / size): one thread per
 *    element summing over rank in order, the CPU's bits from the same P
 *    and Q.
 */
#ifndef BRAID_RT_CUDA_COMM_POWERSGD_MATH_H
#define BRAID_RT_CUDA_COMM_POWERSGD_MATH_H

#include <math.h>
#include <stddef.h>

#ifdef __CUDACC__
#define BRAID_RT_PSGD_FN static inline __host__ __device__
#else
#define BRAID_RT_PSGD_FN static inline
#endif

/* Threads of the orthonormalising block (a power of two). */
#define BRAID_RT_PSGD_GS_THREADS 256

BRAID_RT_PSGD_FN double braid_rt_psgd_mul(double a, double b) {
#ifdef __CUDA_ARCH__
  return __dmul_rn(a, b);
#else
  return a * b;
#endif
}

BRAID_RT_PSGD_FN double braid_rt_psgd_add(double a, double b) {
#ifdef __CUDA_ARCH__
  return __dadd_rn(a, b);
#else
  return a + b;
#endif
}

/* Element i of M. */
BRAID_RT_PSGD_FN float braid_rt_psgd_m(const float *grad, const float *error,
                                       size_t i) {
  return error ? grad[i] + error[i] : grad[i];
}

/* A column-major SGEMM, as cuBLAS takes it: C (m x n, ldc) = op(A) op(B),
   op(X) = X^T where trans_X (A m x k, B k x n after op). */
typedef struct {
  int trans_a, trans_b;
  int m, n, k;
  int lda, ldb, ldc;
} braid_rt_psgd_gemm_t;

/* P = M Q on row-major buffers: column-major, P^T (rank x rows) = Q^T
   (rank x cols, q as stored) M^T (cols x rows, m as stored). A = q, B =
   m, C = p. */
BRAID_RT_PSGD_FN braid_rt_psgd_gemm_t braid_rt_psgd_gemm_p(size_t rows,
                                                           size_t cols,
                                                           size_t rank) {
  braid_rt_psgd_gemm_t g = {0,         0,         (int)rank, (int)rows,
                            (int)cols, (int)rank, (int)cols, (int)rank};
  return g;
}

/* Q = M^T P: column-major, Q^T (rank x cols) = P^T (rank x rows, p as
   stored) M (rows x cols: m as stored is M^T, transposed). A = p, B = m,
   C = q. */
BRAID_RT_PSGD_FN braid_rt_psgd_gemm_t braid_rt_psgd_gemm_q(size_t rows,
                                                           size_t cols,
                                                           size_t rank) {
  braid_rt_psgd_gemm_t g = {0,         1,         (int)rank, (int)cols,
                            (int)rows, (int)rank, (int)cols, (int)rank};
  return g;
}

/* Thread t's share (of `threads`) of the dot product of p's columns c and
   k: rows t, t + threads, ... in order. */
BRAID_RT_PSGD_FN double braid_rt_psgd_partial_dot(const float *p, size_t rows,
                                                  size_t rank, size_t c,
                                                  size_t k, unsigned t,
                                                  unsigned threads) {
  double sum = 0;
  for (size_t r = t; r < rows; r += threads)
    sum = braid_rt_psgd_add(
        sum, braid_rt_psgd_mul((double)p[r * rank + c], p[r * rank + k]));
  return sum;
}

/* Column c's element after removing its projection `dot` on column k's
   element pk. */
BRAID_RT_PSGD_FN float braid_rt_psgd_subtract(float pc, double dot, float pk) {
  return pc - (float)braid_rt_psgd_mul(dot, pk);
}

/* What a column whose squared norm is `norm2` is scaled by: zero for a
   column with nothing left. */
BRAID_RT_PSGD_FN double braid_rt_psgd_scale_for(double norm2) {
  double norm = sqrt(norm2);
  return norm > 1e-30 ? 1.0 / norm : 0.0;
}

BRAID_RT_PSGD_FN float braid_rt_psgd_scale(float pc, double scale) {
  return (float)braid_rt_psgd_mul(pc, scale);
}

/* Element (r, k) of P Q^T, the approximate sum, in double. */
BRAID_RT_PSGD_FN double braid_rt_psgd_approx(const float *p, const float *q,
                                             size_t r, size_t k, size_t rank) {
  double sum = 0;
  for (size_t c = 0; c < rank; ++c)
    sum = braid_rt_psgd_add(
        sum, braid_rt_psgd_mul((double)p[r * rank + c], q[k * rank + c]));
  return sum;
}

/* This rank's error element: m minus its share (`share` = 1 / size) of the
   approximation. */
BRAID_RT_PSGD_FN float braid_rt_psgd_error(float m, double approx,
                                           double share) {
  return (float)braid_rt_psgd_add((double)m, -braid_rt_psgd_mul(approx, share));
}

/* Whether cuBLAS accepts `g`'s leading dimensions: each at least the
   stored matrix's row count (and 1). */
static inline int braid_rt_psgd_gemm_valid(const braid_rt_psgd_gemm_t *g) {
  int a_rows = g->trans_a ? g->k : g->m, b_rows = g->trans_b ? g->n : g->k;
  return g->m >= 0 && g->n >= 0 && g->k >= 0 &&
         g->lda >= (a_rows > 1 ? a_rows : 1) &&
         g->ldb >= (b_rows > 1 ? b_rows : 1) && g->ldc >= (g->m > 1 ? g->m : 1);
}

/* What cuBLAS computes for `g` with alpha 1 and beta 0, on the host (the
   fake device and the host test): f32 products summed in f32 in k order,
   where cuBLAS may sum in another. */
static inline void braid_rt_psgd_reference_gemm(const braid_rt_psgd_gemm_t *g,
                                                const float *a, const float *b,
                                                float *c) {
  for (int j = 0; j < g->n; ++j)
    for (int i = 0; i < g->m; ++i) {
      float sum = 0;
      for (int l = 0; l < g->k; ++l) {
        float x =
            g->trans_a ? a[l + (size_t)i * g->lda] : a[i + (size_t)l * g->lda];
        float y =
            g->trans_b ? b[j + (size_t)l * g->ldb] : b[l + (size_t)j * g->ldb];
        sum += x * y;
      }
      c[i + (size_t)j * g->ldc] = sum;
    }
}

/* The orthonormalising kernel's arithmetic in its order, on the host (the
   fake device and the host test): `partial` holds `threads` doubles. */
static inline void braid_rt_psgd_orthonormalise_as_device(float *p, size_t rows,
                                                          size_t rank,
                                                          double *partial,
                                                          unsigned threads) {
  for (size_t c = 0; c < rank; ++c)
    for (size_t k = 0; k <= c; ++k) {
      for (unsigned t = 0; t < threads; ++t)
        partial[t] = braid_rt_psgd_partial_dot(p, rows, rank, c, k, t, threads);
      for (unsigned s = threads / 2; s > 0; s /= 2)
        for (unsigned t = 0; t < s; ++t)
          partial[t] = braid_rt_psgd_add(partial[t], partial[t + s]);
      double dot = partial[0];
      if (k < c) {
        for (size_t r = 0; r < rows; ++r)
          p[r * rank + c] =
              braid_rt_psgd_subtract(p[r * rank + c], dot, p[r * rank + k]);
      } else {
        double scale = braid_rt_psgd_scale_for(dot);
        for (size_t r = 0; r < rows; ++r)
          p[r * rank + c] = braid_rt_psgd_scale(p[r * rank + c], scale);
      }
    }
}

#endif /* BRAID_RT_CUDA_COMM_POWERSGD_MATH_H */
