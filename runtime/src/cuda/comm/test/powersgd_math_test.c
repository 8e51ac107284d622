/*===- powersgd_math_test.c - PowerSGD's device math vs the CPU backend --===*/
/*
 * The arithmetic of the CUDA backend's PowerSGD (powersgd_math.h: what
 * powersgd_kernels.cu computes, and the SGEMM arguments compressed.c hands
 * cuBLAS) on the host, against the CPU backend's (common/powersgd.h), on
 * random inputs from fixed seeds:
 *   - M and the finish (grad = P Q^T, error = m - grad / size): the same
 *     bits, on 1, 2 and 3 ranks' shares, with and without error feedback;
 *   - P = M Q and Q = M^T P through a column-major reference SGEMM with
 *     compressed.c's arguments (so the row-major to column-major mapping
 *     is checked, and the leading dimensions are ones cuBLAS accepts):
 *     within 5e-6 of the largest |value| (1.2e-6 seen);
 *   - the one-block orthonormalisation in the kernel's order (strided
 *     partial sums, a tree) against the CPU's sequential Gram-Schmidt:
 *     within 2e-6 (the same bits seen: products of two floats are exact
 *     in double, and the sums' rounding rarely reaches f32); its columns
 *     orthonormal within 1e-5; a zero column stays zero in both;
 *   - the whole step on 1, 2 and 3 simulated ranks (P and Q summed in
 *     rank order): within 5e-5 of the largest |value| (5.6e-6 seen).
 * Needs no CUDA: it runs everywhere. What it cannot check: the launches,
 * the cuBLAS and NCCL calls, stream order (comm_test.c on a GPU).
 */

#include "braid/rt/collectives.h"

#include "powersgd.h"
#include "powersgd_math.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static long checks, failures;

static uint64_t state;

static float uniform(void) {
  state = state * 6364136223846793005ull + 1442695040888963407ull;
  return (float)((double)(state >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static float *randoms(size_t n) {
  float *x = malloc((n ? n : 1) * sizeof(float));
  for (size_t i = 0; i < n; ++i)
    x[i] = uniform();
  return x;
}

static void fail(const char *what, size_t i, double got, double want) {
  ++failures;
  if (failures <= 10)
    fprintf(stderr, "FAIL: %s: element %zu is %.9g, the CPU backend's %.9g\n",
            what, i, got, want);
}

static void expect_same_bits(const char *what, const float *got,
                             const float *want, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    ++checks;
    if (memcmp(&got[i], &want[i], sizeof(float)) != 0)
      fail(what, i, got[i], want[i]);
  }
}

/* |got - want| <= tol * max |want| (at least tol). */
static void expect_close(const char *what, const float *got, const float *want,
                         size_t n, double tol) {
  double scale = 1e-30;
  for (size_t i = 0; i < n; ++i)
    scale = fmax(scale, fabs((double)want[i]));
  for (size_t i = 0; i < n; ++i) {
    ++checks;
    if (!(fabs((double)got[i] - want[i]) <= tol * fmax(scale, 1)))
      fail(what, i, got[i], want[i]);
  }
}

typedef struct {
  size_t rows, cols, rank;
} shape_t;

/* Rows beyond the block's 256 threads, fewer, one; rank up to full. */
static const shape_t shapes[] = {{6, 5, 2},    {4, 7, 4},     {64, 48, 4},
                                 {300, 17, 3}, {1000, 33, 8}, {1, 1, 1},
                                 {513, 3, 3},  {40, 1000, 4}};

static void test_m(size_t n, int with_error) {
  float *grad = randoms(n), *error = randoms(n);
  float *got = malloc(n * sizeof(float)), *want = malloc(n * sizeof(float));
  braid_rt_powersgd_host_m(grad, with_error ? error : NULL, want, n);
  for (size_t i = 0; i < n; ++i)
    got[i] = braid_rt_psgd_m(grad, with_error ? error : NULL, i);
  expect_same_bits("m", got, want, n);
  free(grad);
  free(error);
  free(got);
  free(want);
}

/* cuBLAS would refuse leading dimensions shorter than a stored column. */
static void expect_valid(const char *what, const braid_rt_psgd_gemm_t *g) {
  ++checks;
  if (!braid_rt_psgd_gemm_valid(g)) {
    ++failures;
    fprintf(stderr,
            "FAIL: %s: cuBLAS refuses m %d n %d k %d lda %d ldb %d ldc %d\n",
            what, g->m, g->n, g->k, g->lda, g->ldb, g->ldc);
  }
}

static void test_gemms(shape_t s) {
  float *m = randoms(s.rows * s.cols), *q = randoms(s.cols * s.rank);
  float *p = randoms(s.rows * s.rank);
  float *got = malloc(s.rows * s.cols * sizeof(float));
  float *want = malloc(s.rows * s.cols * sizeof(float));
  braid_rt_psgd_gemm_t g = braid_rt_psgd_gemm_p(s.rows, s.cols, s.rank);
  expect_valid("gemm_p", &g);
  braid_rt_psgd_reference_gemm(&g, q, m, got);
  braid_rt_powersgd_host_p(m, q, want, s.rows, s.cols, s.rank);
  expect_close("P = M Q", got, want, s.rows * s.rank, 5e-6);
  g = braid_rt_psgd_gemm_q(s.rows, s.cols, s.rank);
  expect_valid("gemm_q", &g);
  braid_rt_psgd_reference_gemm(&g, p, m, got);
  braid_rt_powersgd_host_q(m, p, want, s.rows, s.cols, s.rank);
  expect_close("Q = M^T P", got, want, s.cols * s.rank, 5e-6);
  free(m);
  free(q);
  free(p);
  free(got);
  free(want);
}

static void orthonormalise_as_device(float *p, size_t rows, size_t rank) {
  double partial[BRAID_RT_PSGD_GS_THREADS];
  braid_rt_psgd_orthonormalise_as_device(p, rows, rank, partial,
                                         BRAID_RT_PSGD_GS_THREADS);
}

static void test_orthonormalise(shape_t s, int zero_column) {
  size_t n = s.rows * s.rank;
  float *got = randoms(n), *want = malloc(n * sizeof(float));
  if (zero_column)
    for (size_t r = 0; r < s.rows; ++r)
      got[r * s.rank + s.rank / 2] = 0;
  memcpy(want, got, n * sizeof(float));
  orthonormalise_as_device(got, s.rows, s.rank);
  braid_rt_powersgd_host_orthonormalise(want, s.rows, s.rank);
  expect_close("orthonormalise", got, want, n, 2e-6);
  for (size_t c = 0; c < s.rank; ++c)
    for (size_t k = 0; k <= c; ++k) {
      double dot = 0;
      for (size_t r = 0; r < s.rows; ++r)
        dot += (double)got[r * s.rank + c] * got[r * s.rank + k];
      double expected = c == k && !(zero_column && c == s.rank / 2) ? 1.0 : 0.0;
      ++checks;
      if (!(fabs(dot - expected) <= 1e-5))
        fail("orthonormal columns", c * s.rank + k, dot, expected);
    }
  if (zero_column)
    for (size_t r = 0; r < s.rows; ++r) {
      ++checks;
      if (got[r * s.rank + s.rank / 2] != 0)
        fail("zero column", r, got[r * s.rank + s.rank / 2], 0);
    }
  free(got);
  free(want);
}

static void test_finish(shape_t s, int size, int with_error) {
  size_t n = s.rows * s.cols;
  float *m = randoms(n), *p = randoms(s.rows * s.rank);
  float *q = randoms(s.cols * s.rank);
  float *grad = malloc(n * sizeof(float)), *error = malloc(n * sizeof(float));
  float *want = malloc(n * sizeof(float)),
        *want_error = malloc(n * sizeof(float));
  braid_rt_powersgd_host_finish(m, p, q, want, with_error ? want_error : NULL,
                                s.rows, s.cols, s.rank, size);
  double share = 1.0 / size;
  for (size_t i = 0; i < n; ++i) {
    double approx = braid_rt_psgd_approx(p, q, i / s.cols, i % s.cols, s.rank);
    grad[i] = (float)approx;
    error[i] = braid_rt_psgd_error(m[i], approx, share);
  }
  expect_same_bits("finish grad", grad, want, n);
  if (with_error)
    expect_same_bits("finish error", error, want_error, n);
  free(m);
  free(p);
  free(q);
  free(grad);
  free(error);
  free(want);
  free(want_error);
}

/* One PowerSGD step over `size` simulated ranks: the CPU backend's
   arithmetic and the device's, P and Q summed in rank order. Rank 0's
   results are compared (every rank's grad is the same sum). */
static void test_step(shape_t s, int size) {
  size_t n = s.rows * s.cols, np = s.rows * s.rank, nq = s.cols * s.rank;
  float *q0 = malloc(nq * sizeof(float));
  braid_rt_powersgd_init_q(q0, s.cols, s.rank, 5);
  float *m[4], *dm[4];
  float *grad0 = NULL, *error0 = NULL;
  for (int r = 0; r < size; ++r) {
    float *grad = randoms(n), *error = randoms(n);
    for (size_t i = 0; i < n; ++i)
      error[i] /= 64;
    m[r] = malloc(n * sizeof(float));
    dm[r] = malloc(n * sizeof(float));
    braid_rt_powersgd_host_m(grad, error, m[r], n);
    for (size_t i = 0; i < n; ++i)
      dm[r][i] = braid_rt_psgd_m(grad, error, i);
    free(grad);
    free(error);
  }
  float *p = calloc(np, sizeof(float)), *dp = calloc(np, sizeof(float));
  float *q = calloc(nq, sizeof(float)), *dq = calloc(nq, sizeof(float));
  float *part = malloc((n > np + nq ? n : np + nq) * sizeof(float));
  braid_rt_psgd_gemm_t gp = braid_rt_psgd_gemm_p(s.rows, s.cols, s.rank);
  braid_rt_psgd_gemm_t gq = braid_rt_psgd_gemm_q(s.rows, s.cols, s.rank);
  for (int r = 0; r < size; ++r) {
    braid_rt_powersgd_host_p(m[r], q0, part, s.rows, s.cols, s.rank);
    for (size_t i = 0; i < np; ++i)
      p[i] = r ? p[i] + part[i] : part[i];
    braid_rt_psgd_reference_gemm(&gp, q0, dm[r], part);
    for (size_t i = 0; i < np; ++i)
      dp[i] = r ? dp[i] + part[i] : part[i];
  }
  braid_rt_powersgd_host_orthonormalise(p, s.rows, s.rank);
  orthonormalise_as_device(dp, s.rows, s.rank);
  for (int r = 0; r < size; ++r) {
    braid_rt_powersgd_host_q(m[r], p, part, s.rows, s.cols, s.rank);
    for (size_t i = 0; i < nq; ++i)
      q[i] = r ? q[i] + part[i] : part[i];
    braid_rt_psgd_reference_gemm(&gq, dp, dm[r], part);
    for (size_t i = 0; i < nq; ++i)
      dq[i] = r ? dq[i] + part[i] : part[i];
  }
  expect_close("step q", dq, q, nq, 5e-5);
  grad0 = malloc(n * sizeof(float));
  error0 = malloc(n * sizeof(float));
  float *want = malloc(n * sizeof(float)),
        *want_error = malloc(n * sizeof(float));
  braid_rt_powersgd_host_finish(m[0], p, q, want, want_error, s.rows, s.cols,
                                s.rank, size);
  for (size_t i = 0; i < n; ++i) {
    double approx =
        braid_rt_psgd_approx(dp, dq, i / s.cols, i % s.cols, s.rank);
    grad0[i] = (float)approx;
    error0[i] = braid_rt_psgd_error(dm[0][i], approx, 1.0 / size);
  }
  expect_close("step grad", grad0, want, n, 5e-5);
  expect_close("step error", error0, want_error, n, 5e-5);
  for (int r = 0; r < size; ++r) {
    free(m[r]);
    free(dm[r]);
  }
  free(q0);
  free(p);
  free(dp);
  free(q);
  free(dq);
  free(part);
  free(grad0);
  free(error0);
  free(want);
  free(want_error);
}

int main(void) {
  size_t num_shapes = sizeof(shapes) / sizeof(shapes[0]);
  for (size_t i = 0; i < num_shapes; ++i) {
    shape_t s = shapes[i];
    state = 1000 + i;
    test_m(s.rows * s.cols, 1);
    test_m(s.rows * s.cols, 0);
    test_gemms(s);
    test_orthonormalise(s, 0);
    if (s.rank > 1)
      test_orthonormalise(s, 1);
    for (int size = 1; size <= 3; ++size) {
      test_finish(s, size, 1);
      test_finish(s, size, 0);
      test_step(s, size);
    }
  }
  if (failures) {
    fprintf(stderr, "powersgd math: %ld of %ld checks failed\n", failures,
            checks);
    return 1;
  }
  printf("powersgd math: %ld checks passed\n", checks);
  return 0;
}
