/*===- matmul_bias_test.c - braid_rt_matmul_bias_f32 / _bf16in_f32 -------===*/
/*
 * The matmul with a bias epilogue (braid.matmul_bias) against the kernels
 * it replaces, run one after the other: braid_rt_matmul_f32 (or
 * braid_rt_matmul_bf16in_f32), braid_rt_add_f32 of the bias [N], then
 * braid_rt_gelu_f32 (tanh) with `gelu`. The epilogue adds the same f32
 * values and applies the same GELU (elementwise_math.h), and the GEMMs are
 * split over the same blocks, so the results must be equal bit for bit:
 * every transpose variant, one GEMM, a batch folded into M, broadcast and
 * mixed batches, k = 0, and sizes above the kernels' threshold for
 * splitting a GEMM over threads (OMP_NUM_THREADS=2, set before the first
 * OpenMP call).
 */
#include "braid/rt/kernels.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures, checks;

static float value(uint32_t *state) {
  *state = *state * 1664525u + 1013904223u;
  return (float)(*state >> 8) / (float)(1u << 24) * 4.0f - 2.0f;
}

static int64_t count_of(int64_t rank, const int64_t *shape) {
  int64_t n = 1;
  for (int64_t d = 0; d < rank; ++d)
    n *= shape[d];
  return n;
}

/* a: batch dims a_batch (a_nb of them), then [m, k] (or [k, m] with ta); b
   likewise; the result's shape is given as c_shape (c_rank). */
static void check(const char *name, int64_t a_nb, const int64_t *a_batch,
                  int64_t b_nb, const int64_t *b_batch, int64_t m, int64_t k,
                  int64_t n, int ta, int tb, int bf16, int gelu) {
  int64_t a_shape[6], b_shape[6], c_shape[6];
  int64_t a_rank = a_nb + 2, b_rank = b_nb + 2;
  memcpy(a_shape, a_batch, a_nb * sizeof(int64_t));
  memcpy(b_shape, b_batch, b_nb * sizeof(int64_t));
  a_shape[a_nb] = ta ? k : m;
  a_shape[a_nb + 1] = ta ? m : k;
  b_shape[b_nb] = tb ? n : k;
  b_shape[b_nb + 1] = tb ? k : n;
  /* The broadcast batch. */
  int64_t c_nb = a_nb > b_nb ? a_nb : b_nb;
  for (int64_t d = 0; d < c_nb; ++d) {
    int64_t ad = d - (c_nb - a_nb) < 0 ? 1 : a_batch[d - (c_nb - a_nb)];
    int64_t bd = d - (c_nb - b_nb) < 0 ? 1 : b_batch[d - (c_nb - b_nb)];
    c_shape[d] = ad == 1 ? bd : ad;
  }
  c_shape[c_nb] = m;
  c_shape[c_nb + 1] = n;
  int64_t c_rank = c_nb + 2, bias_shape[1] = {n};
  int64_t na = count_of(a_rank, a_shape), nb = count_of(b_rank, b_shape);
  int64_t nc = count_of(c_rank, c_shape);
  float *a = malloc((na + 1) * sizeof(float));
  float *b = malloc((nb + 1) * sizeof(float));
  float *bias = malloc(n * sizeof(float));
  float *want = malloc((nc + 1) * sizeof(float));
  float *got = malloc((nc + 1) * sizeof(float));
  uint32_t state = 7;
  for (int64_t i = 0; i < na; ++i)
    a[i] = value(&state);
  for (int64_t i = 0; i < nb; ++i)
    b[i] = value(&state);
  for (int64_t i = 0; i < n; ++i)
    bias[i] = value(&state);
  braid_rt_status_t ws = BRAID_RT_OK, gs = BRAID_RT_OK;
  if (bf16)
    ws = braid_rt_matmul_bf16in_f32(NULL, a, b, a_rank, a_shape, b_rank,
                                    b_shape, ta, tb, want);
  else
    braid_rt_matmul_f32(NULL, a, b, a_rank, a_shape, b_rank, b_shape, ta, tb,
                        want);
  braid_rt_add_f32(NULL, want, bias, c_rank, c_shape, 1, bias_shape, want);
  if (gelu)
    braid_rt_gelu_f32(NULL, want, nc, BRAID_RT_GELU_TANH, want);
  memset(got, 0xff, nc * sizeof(float));
  if (bf16)
    gs = braid_rt_matmul_bias_bf16in_f32(NULL, a, b, bias, a_rank, a_shape,
                                         b_rank, b_shape, ta, tb, gelu, got);
  else
    braid_rt_matmul_bias_f32(NULL, a, b, bias, a_rank, a_shape, b_rank, b_shape,
                             ta, tb, gelu, got);
  int64_t differ = 0;
  for (int64_t i = 0; i < nc; ++i)
    differ += memcmp(&want[i], &got[i], sizeof(float)) != 0;
  int ok = ws == BRAID_RT_OK && gs == BRAID_RT_OK && differ == 0;
  ++checks;
  failures += !ok;
  printf("%-4s %s%s%s%s%s: %lld of %lld elements differ\n", ok ? "ok" : "FAIL",
         bf16 ? "bf16in " : "", gelu ? "gelu " : "", name, ta ? " aT" : "",
         tb ? " bT" : "", (long long)differ, (long long)nc);
  free(a);
  free(b);
  free(bias);
  free(want);
  free(got);
}

int main(void) {
  setenv("OMP_NUM_THREADS", "2", 0);
  static const int64_t b23[] = {2, 3}, b3[] = {3}, b22[] = {2, 2},
                       b21[] = {2, 1}, b13[] = {1, 3}, b2[] = {2};
  for (int bf16 = 0; bf16 < 2; ++bf16)
    for (int gelu = 0; gelu < 2; ++gelu)
      for (int ta = 0; ta < 2; ++ta)
        for (int tb = 0; tb < 2; ++tb) {
          check("no batch", 0, NULL, 0, NULL, 5, 7, 3, ta, tb, bf16, gelu);
          check("folded", 2, b23, 0, NULL, 4, 9, 5, ta, tb, bf16, gelu);
          check("strided", 1, b3, 1, b3, 6, 5, 4, ta, tb, bf16, gelu);
          check("broadcast a", 0, NULL, 2, b22, 3, 8, 6, ta, tb, bf16, gelu);
          check("mixed", 2, b21, 2, b13, 3, 4, 5, ta, tb, bf16, gelu);
          check("k = 0", 1, b2, 0, NULL, 3, 0, 4, ta, tb, bf16, gelu);
          /* Above the threshold for splitting a GEMM over threads: the
             epilogue runs on each thread's block. */
          check("threads", 1, b2, 0, NULL, 96, 80, 72, ta, tb, bf16, gelu);
          check("threads batch", 1, b3, 1, b3, 70, 64, 90, ta, tb, bf16, gelu);
        }
  printf("%d checks, %d failed\n", checks, failures);
  return failures ? 1 : 0;
}
