/*===- vocab_parallel.c - Vocabulary-parallel embedding and cross-entropy ===*/
/*
 * As BraidOpsEval.cpp: this rank holds ids [position * v, (position + 1) *
 * v) of the group's vocabulary; per-row statistics are gathered from every
 * member and combined in group order in double precision, so every rank
 * gets the same bits.
 */

#define BRAID_RT_PROGRAM_SPMD
#include "internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Gathers `rows` doubles from every member of the group into `all`
   ([size][rows]). */
static void gather_f64(int64_t mask, const double *mine, int64_t rows,
                       double *all, const char *where) {
  braid_rt_program_spmd_check(
      braid_rt_all_gather_f64(braid_rt_program_comm(mask), mine, all,
                              (size_t)rows, NULL),
      where);
}

void braid_rt_program_embedding_vp_f32(const float *table, const void *ids,
                                       int ids_i64, int64_t v, int64_t h,
                                       int64_t n, int64_t mask, float *out,
                                       const char *where) {
  int64_t first = braid_rt_program_group_position(mask) * v;
  int64_t total = v * braid_rt_program_group_size(mask);
  for (int64_t p = 0; p < n; ++p) {
    int64_t id = braid_rt_program_id(ids, ids_i64, p);
    if (id < 0 || id >= total)
      braid_rt_program_bad_id("id", id, p, n, total, where);
    if (id < first || id >= first + v)
      memset(out + p * h, 0, (size_t)h * sizeof(float));
    else
      memcpy(out + p * h, table + (id - first) * h, (size_t)h * sizeof(float));
  }
}

void braid_rt_program_embedding_grad_vp_f32(const void *ids, int ids_i64,
                                            const float *dy, int64_t n,
                                            int64_t v, int64_t h, int64_t mask,
                                            float *out, const char *where) {
  int64_t first = braid_rt_program_group_position(mask) * v;
  int64_t total = v * braid_rt_program_group_size(mask);
  double *acc = (double *)calloc((size_t)(v * h > 0 ? v * h : 1),
                                 sizeof(double));
  for (int64_t p = 0; p < n; ++p) {
    int64_t id = braid_rt_program_id(ids, ids_i64, p);
    if (id < 0 || id >= total)
      braid_rt_program_bad_id("id", id, p, n, total, where);
    if (id < first || id >= first + v)
      continue;
    for (int64_t i = 0; i < h; ++i)
      acc[(id - first) * h + i] += dy[p * h + i];
  }
  for (int64_t i = 0; i < v * h; ++i)
    out[i] = (float)acc[i];
  free(acc);
}

/* Per row: the maximum and the sum of exponentials over the whole
   vocabulary (mx, sum: `rows` each). */
static void softmax_stats(const float *logits, int64_t rows, int64_t v,
                          int64_t mask, double *mx, double *sum,
                          const char *where) {
  int64_t size = braid_rt_program_group_size(mask);
  double *all = (double *)malloc((size_t)(size * rows + 1) * sizeof(double));
  for (int64_t r = 0; r < rows; ++r) {
    mx[r] = -INFINITY;
    for (int64_t i = 0; i < v; ++i)
      mx[r] = fmax(mx[r], (double)logits[r * v + i]);
  }
  gather_f64(mask, mx, rows, all, where);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t k = 0; k < size; ++k)
      mx[r] = fmax(mx[r], all[k * rows + r]);
  for (int64_t r = 0; r < rows; ++r) {
    sum[r] = 0.0;
    for (int64_t i = 0; i < v; ++i)
      sum[r] += exp((double)logits[r * v + i] - mx[r]);
  }
  gather_f64(mask, sum, rows, all, where);
  for (int64_t r = 0; r < rows; ++r) {
    sum[r] = 0.0;
    for (int64_t k = 0; k < size; ++k)
      sum[r] += all[k * rows + r];
  }
  free(all);
}

void braid_rt_program_cross_entropy_vp_f32(const float *logits,
                                           const void *labels, int labels_i64,
                                           int64_t rows, int64_t v,
                                           int64_t mask, float *out,
                                           const char *where) {
  int64_t size = braid_rt_program_group_size(mask);
  int64_t first = braid_rt_program_group_position(mask) * v, total = v * size;
  double *mx = (double *)malloc((size_t)(3 * rows + 1) * sizeof(double));
  double *sum = mx + rows, *picked = sum + rows;
  double *all = (double *)malloc((size_t)(size * rows + 1) * sizeof(double));
  softmax_stats(logits, rows, v, mask, mx, sum, where);
  for (int64_t r = 0; r < rows; ++r) {
    int64_t label = braid_rt_program_id(labels, labels_i64, r);
    if (label < 0 || label >= total)
      braid_rt_program_bad_id("label", label, r, rows, total, where);
    int mine = label >= first && label < first + v;
    picked[r] = mine ? (double)logits[r * v + (label - first)] : 0.0;
  }
  gather_f64(mask, picked, rows, all, where);
  double loss = 0.0;
  for (int64_t r = 0; r < rows; ++r) {
    double target = 0.0;
    for (int64_t k = 0; k < size; ++k)
      target += all[k * rows + r];
    loss += mx[r] + log(sum[r]) - target;
  }
  out[0] = (float)(rows ? loss / rows : 0.0);
  free(all);
  free(mx);
}

void braid_rt_program_cross_entropy_grad_vp_f32(
    const float *logits, const void *labels, int labels_i64, const float *g,
    int64_t rows, int64_t v, int64_t mask, float *out, const char *where) {
  int64_t size = braid_rt_program_group_size(mask);
  int64_t first = braid_rt_program_group_position(mask) * v, total = v * size;
  double coeff = rows ? (double)g[0] / rows : 0.0;
  double *mx = (double *)malloc((size_t)(2 * rows + 1) * sizeof(double));
  double *sum = mx + rows;
  softmax_stats(logits, rows, v, mask, mx, sum, where);
  for (int64_t r = 0; r < rows; ++r) {
    int64_t label = braid_rt_program_id(labels, labels_i64, r);
    if (label < 0 || label >= total)
      braid_rt_program_bad_id("label", label, r, rows, total, where);
    for (int64_t i = 0; i < v; ++i)
      out[r * v + i] =
          (float)(coeff * (exp((double)logits[r * v + i] - mx[r]) / sum[r] -
                           (first + i == label ? 1.0 : 0.0)));
  }
  free(mx);
}
