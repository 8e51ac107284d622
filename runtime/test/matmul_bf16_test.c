/*===- matmul_bf16_test.c - braid_rt_matmul_bf16in_f32 -----------------===*/
/*
 * The bf16-input matmul (oneDNN's bf16 GEMM) against a double reference and
 * against braid_rt_matmul_f32, on operands holding bf16 values: every
 * transpose variant, one GEMM, a batch folded into M, broadcast batches,
 * sizes below and above the kernels' threshold for splitting a GEMM over
 * threads. The tolerance: an f32 sum of k exact products (bf16 times bf16
 * is exact in f32) in any order is within k 2^-24 sum_k |a b| of the exact
 * sum (Higham's gamma_k, to first order); both kernels must be within it.
 *
 * Then the threads: with OMP_NUM_THREADS=2 (set here before the first
 * OpenMP call), the GEMMs, bf16 ones first, add one thread to the process,
 * the kernels' pool's second (oneDNN's OpenMP calls go to the kernels'
 * libomp; on a libgomp of its own, LD_PRELOADed, they add more).
 */
#include "braid/rt/kernels.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;
/* Elements where the two kernels differ, over all cases: not 0 when the
   bf16 GEMM ran (AVX512-BF16 adds pairs of products, OpenBLAS one at a
   time), 0 if the kernel fell back to the f32 GEMM. */
static int64_t differing;

/* A deterministic value in [-1, 1) rounded to bf16 (ties to even). */
static float bf16_value(uint32_t *state) {
  *state = *state * 1664525u + 1013904223u;
  float x = (float)(*state >> 8) / (float)(1u << 24) * 2.0f - 1.0f;
  uint32_t u;
  memcpy(&u, &x, sizeof u);
  u = ((u + 0x7fffu + ((u >> 16) & 1u)) >> 16) << 16;
  memcpy(&x, &u, sizeof x);
  return x;
}

static int64_t count_of(int64_t rank, const int64_t *shape) {
  int64_t n = 1;
  for (int64_t d = 0; d < rank; ++d)
    n *= shape[d];
  return n;
}

/* One case: a [ab..., rows, cols] (per transpose_a), b likewise; the batch
   dimensions given as a's and b's leading dims (rank - 2 of them). */
static void check(const char *name, int64_t a_rank, const int64_t *a_shape,
                  int64_t b_rank, const int64_t *b_shape, int ta, int tb,
                  int64_t batch, const int64_t *a_of, const int64_t *b_of) {
  int64_t m = ta ? a_shape[a_rank - 1] : a_shape[a_rank - 2];
  int64_t k = ta ? a_shape[a_rank - 2] : a_shape[a_rank - 1];
  int64_t n = tb ? b_shape[b_rank - 2] : b_shape[b_rank - 1];
  int64_t lda = a_shape[a_rank - 1], ldb = b_shape[b_rank - 1];
  int64_t na = count_of(a_rank, a_shape), nb = count_of(b_rank, b_shape);
  float *a = malloc(na * sizeof(float)), *b = malloc(nb * sizeof(float));
  float *c16 = malloc(batch * m * n * sizeof(float));
  float *c32 = malloc(batch * m * n * sizeof(float));
  uint32_t state = (uint32_t)(m * 131 + n * 17 + k + ta * 2 + tb);
  for (int64_t i = 0; i < na; ++i)
    a[i] = bf16_value(&state);
  for (int64_t i = 0; i < nb; ++i)
    b[i] = bf16_value(&state);
  if (braid_rt_matmul_bf16in_f32(NULL, a, b, a_rank, a_shape, b_rank, b_shape,
                                 ta, tb, c16) != BRAID_RT_OK) {
    printf("FAIL %s: status\n", name);
    ++failures;
    return;
  }
  braid_rt_matmul_f32(NULL, a, b, a_rank, a_shape, b_rank, b_shape, ta, tb,
                      c32);
  double worst = 0; /* error / bound, over all elements */
  for (int64_t p = 0; p < batch; ++p) {
    const float *ap = a + a_of[p] * m * k, *bp = b + b_of[p] * k * n;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double sum = 0, abs_sum = 0;
        for (int64_t q = 0; q < k; ++q) {
          double x = ta ? ap[q * lda + i] : ap[i * lda + q];
          double y = tb ? bp[j * ldb + q] : bp[q * ldb + j];
          sum += x * y;
          abs_sum += fabs(x * y);
        }
        double bound = (double)k * ldexp(1.0, -24) * abs_sum + 1e-30;
        int64_t at = (p * m + i) * n + j;
        double e16 = fabs(c16[at] - sum) / bound;
        double e32 = fabs(c32[at] - sum) / bound;
        worst = fmax(worst, fmax(e16, e32));
        differing += c16[at] != c32[at];
      }
  }
  if (!(worst <= 1.0)) {
    printf("FAIL %s ta=%d tb=%d: error %.3g of the bound\n", name, ta, tb,
           worst);
    ++failures;
  } else {
    printf("ok %s ta=%d tb=%d (m %lld n %lld k %lld batch %lld): worst "
           "error %.3g of the bound\n",
           name, ta, tb, (long long)m, (long long)n, (long long)k,
           (long long)batch, worst);
  }
  free(a);
  free(b);
  free(c16);
  free(c32);
}

/* The threads of this process. */
static int thread_count(void) {
  DIR *dir = opendir("/proc/self/task");
  int n = 0;
  if (!dir)
    return -1;
  for (struct dirent *e; (e = readdir(dir));)
    n += e->d_name[0] != '.';
  closedir(dir);
  return n;
}

int main(void) {
  setenv("OMP_NUM_THREADS", "2", 1);
  int start = thread_count();
  static const int64_t zero[6] = {0}, seq[6] = {0, 1, 2, 3, 4, 5};
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb) {
      /* One GEMM, odd sizes (partial register tiles). */
      int64_t m = 37, n = 29, k = 53;
      int64_t as[2] = {ta ? k : m, ta ? m : k},
              bs[2] = {tb ? n : k, tb ? k : n};
      check("gemm", 2, as, 2, bs, ta, tb, 1, zero, zero);
      /* Above the threshold for splitting over threads: by rows (m >= n)
         and by columns. */
      m = 160, n = 96, k = 200;
      int64_t as2[2] = {ta ? k : m, ta ? m : k},
              bs2[2] = {tb ? n : k, tb ? k : n};
      check("split-rows", 2, as2, 2, bs2, ta, tb, 1, zero, zero);
      int64_t as3[2] = {ta ? k : n, ta ? n : k},
              bs3[2] = {tb ? m : k, tb ? k : m};
      check("split-cols", 2, as3, 2, bs3, ta, tb, 1, zero, zero);
      /* [3, M, K] x [K, N] (folded into M unless ta) and broadcast
         batches [2, 1, M, K] x [3, K, N] -> [2, 3, M, N]. */
      m = 19, n = 23, k = 31;
      int64_t as4[3] = {3, ta ? k : m, ta ? m : k};
      int64_t bs4[2] = {tb ? n : k, tb ? k : n};
      check("batch-folded", 3, as4, 2, bs4, ta, tb, 3, seq, zero);
      int64_t as5[4] = {2, 1, ta ? k : m, ta ? m : k};
      int64_t bs5[3] = {3, tb ? n : k, tb ? k : n};
      static const int64_t a_of[6] = {0, 0, 0, 1, 1, 1};
      static const int64_t b_of[6] = {0, 1, 2, 0, 1, 2};
      check("batch-broadcast", 4, as5, 3, bs5, ta, tb, 6, a_of, b_of);
      /* Many GEMMs of a batch, shared by the threads. */
      m = 64, n = 64, k = 64;
      int64_t as7[3] = {4, ta ? k : m, ta ? m : k};
      int64_t bs7[3] = {4, tb ? n : k, tb ? k : n};
      check("batch-threads", 3, as7, 3, bs7, ta, tb, 4, seq, seq);
    }

  if (differing == 0) {
    printf("FAIL: the bf16 kernel computed what the f32 one does everywhere "
           "(did it fall back to the f32 GEMM?)\n");
    ++failures;
  } else {
    printf("ok: the kernels differ (summation order) in %lld elements\n",
           (long long)differing);
  }

  /* Threads: the process had `start` before any GEMM; with the kernels'
     pool of 2 threads it has one more after them, bf16 GEMMs (whole,
     per batch element, small) and f32 ones alike. */
  int64_t big = 256, shape[2] = {big, big}, shape3[3] = {8, big, big};
  int64_t small[2] = {64, 64};
  float *x = calloc(8 * big * big, sizeof(float));
  float *y = calloc(8 * big * big, sizeof(float));
  float *z = calloc(8 * big * big, sizeof(float));
  braid_rt_matmul_bf16in_f32(NULL, x, y, 2, shape, 2, shape, 0, 0, z);
  braid_rt_matmul_bf16in_f32(NULL, x, y, 3, shape3, 3, shape3, 0, 0, z);
  braid_rt_matmul_bf16in_f32(NULL, x, y, 2, small, 2, small, 0, 0, z);
  int after_bf16 = thread_count();
  braid_rt_matmul_f32(NULL, x, y, 2, shape, 2, shape, 0, 0, z);
  braid_rt_matmul_f32(NULL, x, y, 3, shape3, 3, shape3, 0, 0, z);
  int after_f32 = thread_count();
  if (after_bf16 != start + 1 || after_f32 != start + 1) {
    printf("FAIL threads: %d before the GEMMs, %d after the bf16 ones, %d "
           "after the f32 ones (expected %d)\n",
           start, after_bf16, after_f32, start + 1);
    ++failures;
  } else {
    printf("ok threads: %d before the GEMMs, %d after\n", start, after_f32);
  }
  free(x);
  free(y);
  free(z);
  return failures != 0;
}
