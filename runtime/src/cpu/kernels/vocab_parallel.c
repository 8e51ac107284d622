/*===- vocab_parallel.c - Local statistics of vocabulary-parallel ops ----===*/
/*
 * What one rank of a vocabulary-parallel embedding or cross-entropy
 * contributes (kernels.h). Each row runs in a fixed order, and rows never
 * mix, so results do not depend on the number of threads: every rank
 * combines the same bits.
 */
#include "internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void braid_rt_vocab_parallel_max_f32(braid_rt_stream_t *stream,
                                     const float *logits, int64_t rows,
                                     int64_t cols, double *max) {
  BRAID_RT_PARALLEL_FOR(rows * cols)
  for (int64_t r = 0; r < rows; ++r) {
    double m = -INFINITY;
    for (int64_t i = 0; i < cols; ++i)
      m = fmax(m, (double)logits[r * cols + i]);
    max[r] = m;
  }
}

void braid_rt_vocab_parallel_sum_exp_f32(braid_rt_stream_t *stream,
                                         const float *logits,
                                         const double *max, int64_t rows,
                                         int64_t cols, double *sum) {
  BRAID_RT_PARALLEL_FOR(rows * cols)
  for (int64_t r = 0; r < rows; ++r) {
    double s = 0.0;
    for (int64_t i = 0; i < cols; ++i)
      s += exp((double)logits[r * cols + i] - max[r]);
    sum[r] = s;
  }
}

#define DEFINE_VOCAB_PARALLEL(SUFFIX, ID)                                      \
  void braid_rt_vocab_parallel_picked_f32##SUFFIX(                             \
      braid_rt_stream_t *stream, const float *logits, const ID *labels,        \
      int64_t rows, int64_t cols, int64_t first, double *picked) {             \
    for (int64_t r = 0; r < rows; ++r) {                                       \
      int64_t label = (int64_t)labels[r];                                      \
      picked[r] = label >= first && label < first + cols                       \
                      ? (double)logits[r * cols + (label - first)]             \
                      : 0.0;                                                   \
    }                                                                          \
  }                                                                            \
                                                                               \
  void braid_rt_vocab_parallel_cross_entropy_grad_f32##SUFFIX(                 \
      braid_rt_stream_t *stream, const float *logits, const ID *labels,        \
      const float *grad, const double *max, const double *sum, int64_t rows,   \
      int64_t cols, int64_t first, float *dlogits) {                           \
    double coeff = rows ? (double)grad[0] / rows : 0.0;                        \
    BRAID_RT_PARALLEL_FOR(rows * cols)                                         \
    for (int64_t r = 0; r < rows; ++r) {                                       \
      int64_t label = (int64_t)labels[r];                                      \
      for (int64_t i = 0; i < cols; ++i)                                       \
        dlogits[r * cols + i] = (float)(                                       \
            coeff * (exp((double)logits[r * cols + i] - max[r]) / sum[r] -     \
                     (first + i == label ? 1.0 : 0.0)));                       \
    }                                                                          \
  }                                                                            \
                                                                               \
  void braid_rt_vocab_parallel_embedding_f32##SUFFIX(                          \
      braid_rt_stream_t *stream, const float *table, const ID *ids,            \
      int64_t cols, int64_t hidden, int64_t num_ids, int64_t first,            \
      float *y) {                                                              \
    size_t row = (size_t)hidden * sizeof(float);                               \
    for (int64_t p = 0; p < num_ids; ++p) {                                    \
      int64_t id = (int64_t)ids[p];                                            \
      if (id < first || id >= first + cols)                                    \
        memset(y + p * hidden, 0, row);                                        \
      else                                                                     \
        memcpy(y + p * hidden, table + (id - first) * hidden, row);            \
    }                                                                          \
  }                                                                            \
                                                                               \
  braid_rt_status_t braid_rt_vocab_parallel_embedding_grad_f32##SUFFIX(        \
      braid_rt_stream_t *stream, const ID *ids, const float *dy,               \
      int64_t num_ids, int64_t cols, int64_t hidden, int64_t first,            \
      float *dtable) {                                                         \
    int64_t n = cols * hidden;                                                 \
    double *acc = (double *)calloc((size_t)(n > 0 ? n : 1), sizeof(double));   \
    if (!acc)                                                                  \
      return BRAID_RT_OUT_OF_MEMORY;                                           \
    for (int64_t p = 0; p < num_ids; ++p) {                                    \
      int64_t id = (int64_t)ids[p];                                            \
      if (id < first || id >= first + cols)                                    \
        continue;                                                              \
      for (int64_t i = 0; i < hidden; ++i)                                     \
        acc[(id - first) * hidden + i] += dy[p * hidden + i];                  \
    }                                                                          \
    for (int64_t i = 0; i < n; ++i)                                            \
      dtable[i] = (float)acc[i];                                               \
    free(acc);                                                                 \
    return BRAID_RT_OK;                                                        \
  }

DEFINE_VOCAB_PARALLEL(, int32_t)
DEFINE_VOCAB_PARALLEL(_i64, int64_t)

void braid_rt_vocab_parallel_combine_f64(braid_rt_stream_t *stream,
                                         const double *parts,
                                         int64_t num_parts, int64_t rows,
                                         braid_rt_reduce_kind_t kind,
                                         double *out) {
  for (int64_t r = 0; r < rows; ++r) {
    double v = kind == BRAID_RT_REDUCE_MAX ? -INFINITY : 0.0;
    for (int64_t k = 0; k < num_parts; ++k)
      v = kind == BRAID_RT_REDUCE_MAX ? fmax(v, parts[k * rows + r])
                                      : v + parts[k * rows + r];
    out[r] = v;
  }
}

void braid_rt_vocab_parallel_loss_f32(braid_rt_stream_t *stream,
                                      const double *max, const double *sum,
                                      const double *target, int64_t rows,
                                      float *loss) {
  double total = 0.0;
  for (int64_t r = 0; r < rows; ++r)
    total += max[r] + log(sum[r]) - target[r];
  loss[0] = (float)(rows ? total / rows : 0.0);
}
