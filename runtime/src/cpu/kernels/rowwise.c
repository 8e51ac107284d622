/*===- rowwise.c - Softmax, norms, embedding, rotary, cross-entropy ------===*/
/*
 * Per-row statistics (maxima, sums, means, variances) accumulate in double,
 * as the reference evaluator does.
 */
#include "internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void braid_rt_softmax_f32(braid_rt_stream_t *stream, const float *x,
                          int64_t outer, int64_t size, int64_t inner,
                          float *y) {
  int64_t lines = outer * inner;
  BRAID_RT_PARALLEL_FOR(lines * size)
  for (int64_t l = 0; l < lines; ++l) {
    int64_t o = l / inner, in = l % inner;
    const float *px = x + o * size * inner + in;
    float *py = y + o * size * inner + in;
    float mx = -INFINITY;
    for (int64_t i = 0; i < size; ++i)
      mx = px[i * inner] > mx ? px[i * inner] : mx;
    double sum = 0.0;
    for (int64_t i = 0; i < size; ++i) {
      float e = expf(px[i * inner] - mx);
      py[i * inner] = e;
      sum += e;
    }
    float inv = (float)(1.0 / sum);
    for (int64_t i = 0; i < size; ++i)
      py[i * inner] *= inv;
  }
}

/* The mean of the row and 1 / sqrt(biased variance + eps). */
static inline void normalizer(const float *x, int64_t h, double eps,
                              double *mean_out, double *inv_out) {
  double mean = 0.0, var = 0.0;
  for (int64_t i = 0; i < h; ++i)
    mean += x[i];
  mean /= h;
  for (int64_t i = 0; i < h; ++i)
    var += (x[i] - mean) * (x[i] - mean);
  *mean_out = mean;
  *inv_out = 1.0 / sqrt(var / h + eps);
}

void braid_rt_layer_norm_f32(braid_rt_stream_t *stream, const float *x,
                             const float *scale, const float *bias,
                             int64_t rows, int64_t cols, double epsilon,
                             float *y) {
  BRAID_RT_PARALLEL_FOR(rows * cols)
  for (int64_t r = 0; r < rows; ++r) {
    const float *px = x + r * cols;
    float *py = y + r * cols;
    double mean, inv;
    normalizer(px, cols, epsilon, &mean, &inv);
    for (int64_t i = 0; i < cols; ++i)
      py[i] = (float)((px[i] - mean) * inv * scale[i] + bias[i]);
  }
}

void braid_rt_rms_norm_f32(braid_rt_stream_t *stream, const float *x,
                           const float *scale, int64_t rows, int64_t cols,
                           double epsilon, float *y) {
  BRAID_RT_PARALLEL_FOR(rows * cols)
  for (int64_t r = 0; r < rows; ++r) {
    const float *px = x + r * cols;
    float *py = y + r * cols;
    double ms = 0.0;
    for (int64_t i = 0; i < cols; ++i)
      ms += (double)px[i] * px[i];
    double inv = 1.0 / sqrt(ms / cols + epsilon);
    for (int64_t i = 0; i < cols; ++i)
      py[i] = (float)(px[i] * inv * scale[i]);
  }
}

void braid_rt_layer_norm_grad_f32(braid_rt_stream_t *stream, const float *x,
                                  const float *scale, const float *dy,
                                  int64_t rows, int64_t cols, double epsilon,
                                  float *dx) {
  BRAID_RT_PARALLEL_FOR(rows * cols)
  for (int64_t r = 0; r < rows; ++r) {
    const float *px = x + r * cols, *pdy = dy + r * cols;
    float *pdx = dx + r * cols;
    double mean, inv;
    normalizer(px, cols, epsilon, &mean, &inv);
    double mean_d = 0.0, mean_dx = 0.0;
    for (int64_t i = 0; i < cols; ++i) {
      double xhat = (px[i] - mean) * inv, dxhat = (double)pdy[i] * scale[i];
      mean_d += dxhat;
      mean_dx += dxhat * xhat;
    }
    mean_d /= cols;
    mean_dx /= cols;
    for (int64_t i = 0; i < cols; ++i) {
      double xhat = (px[i] - mean) * inv, dxhat = (double)pdy[i] * scale[i];
      pdx[i] = (float)(inv * (dxhat - mean_d - xhat * mean_dx));
    }
  }
}

void braid_rt_rms_norm_grad_f32(braid_rt_stream_t *stream, const float *x,
                                const float *scale, const float *dy,
                                int64_t rows, int64_t cols, double epsilon,
                                float *dx) {
  BRAID_RT_PARALLEL_FOR(rows * cols)
  for (int64_t r = 0; r < rows; ++r) {
    const float *px = x + r * cols, *pdy = dy + r * cols;
    float *pdx = dx + r * cols;
    double ms = 0.0, dot = 0.0;
    for (int64_t i = 0; i < cols; ++i) {
      ms += (double)px[i] * px[i];
      dot += (double)pdy[i] * scale[i] * px[i];
    }
    double inv = 1.0 / sqrt(ms / cols + epsilon);
    double c = inv * inv * inv * dot / cols;
    for (int64_t i = 0; i < cols; ++i)
      pdx[i] = (float)(inv * pdy[i] * scale[i] - px[i] * c);
  }
}

/* Ids and labels: the first out of [0, bound) makes the kernel fail. */
#define DEFINE_ID_CHECK(SUFFIX, T)                                             \
  static int ids_in_range##SUFFIX(const T *ids, int64_t n, int64_t bound) {    \
    for (int64_t p = 0; p < n; ++p)                                            \
      if (ids[p] < 0 || (int64_t)ids[p] >= bound)                              \
        return 0;                                                              \
    return 1;                                                                  \
  }
DEFINE_ID_CHECK(_i32, int32_t)
DEFINE_ID_CHECK(_i64, int64_t)

#define DEFINE_EMBEDDING(NAME, SUFFIX, T)                                      \
  braid_rt_status_t NAME(braid_rt_stream_t *stream, const float *table,        \
                         const T *ids, int64_t vocab, int64_t hidden,          \
                         int64_t num_ids, float *y) {                          \
    if (!ids_in_range##SUFFIX(ids, num_ids, vocab))                            \
      return BRAID_RT_INVALID_ARGUMENT;                                        \
    BRAID_RT_PARALLEL_FOR(num_ids *hidden)                                     \
    for (int64_t p = 0; p < num_ids; ++p)                                      \
      memcpy(y + p * hidden, table + (int64_t)ids[p] * hidden,                 \
             (size_t)hidden * sizeof(float));                                  \
    return BRAID_RT_OK;                                                        \
  }
DEFINE_EMBEDDING(braid_rt_embedding_f32, _i32, int32_t)
DEFINE_EMBEDDING(braid_rt_embedding_f32_i64, _i64, int64_t)

#define DEFINE_EMBEDDING_GRAD(NAME, SUFFIX, T)                                 \
  braid_rt_status_t NAME(braid_rt_stream_t *stream, const T *ids,              \
                         const float *dy, int64_t num_ids, int64_t vocab,      \
                         int64_t hidden, float *dtable) {                      \
    if (!ids_in_range##SUFFIX(ids, num_ids, vocab))                            \
      return BRAID_RT_INVALID_ARGUMENT;                                        \
    braid_rt_parallel_zero(dtable, (size_t)(vocab * hidden) * sizeof(float));  \
    /* Columns are independent: threads split the hidden dimension. */         \
    BRAID_RT_PARALLEL_FOR(num_ids *hidden)                                     \
    for (int64_t c0 = 0; c0 < hidden; c0 += 64) {                              \
      int64_t c1 = c0 + 64 < hidden ? c0 + 64 : hidden;                        \
      for (int64_t p = 0; p < num_ids; ++p) {                                  \
        float *row = dtable + (int64_t)ids[p] * hidden;                        \
        const float *g = dy + p * hidden;                                      \
        for (int64_t c = c0; c < c1; ++c)                                      \
          row[c] += g[c];                                                      \
      }                                                                        \
    }                                                                          \
    return BRAID_RT_OK;                                                        \
  }
DEFINE_EMBEDDING_GRAD(braid_rt_embedding_grad_f32, _i32, int32_t)
DEFINE_EMBEDDING_GRAD(braid_rt_embedding_grad_f32_i64, _i64, int64_t)

void braid_rt_rotary_f32(braid_rt_stream_t *stream, const float *x,
                         int64_t batch, int64_t seq, int64_t heads, int64_t dim,
                         double base, int inverse, float *y) {
  enum { CHUNK = 64 };
  int64_t half = dim / 2;
  double sign = inverse ? -1.0 : 1.0;
  BRAID_RT_PARALLEL_FOR(batch * seq * heads * dim)
  for (int64_t s = 0; s < seq; ++s) {
    /* The angles of position s, a chunk of frequencies at a time. */
    for (int64_t i0 = 0; i0 < half; i0 += CHUNK) {
      int64_t n = half - i0 < CHUNK ? half - i0 : CHUNK;
      double c[CHUNK], sn[CHUNK];
      for (int64_t i = 0; i < n; ++i) {
        double angle = s * pow(base, -2.0 * (double)(i0 + i) / dim);
        c[i] = cos(angle);
        sn[i] = sign * sin(angle);
      }
      for (int64_t b = 0; b < batch; ++b)
        for (int64_t a = 0; a < heads; ++a) {
          int64_t off = ((b * seq + s) * heads + a) * dim + i0;
          for (int64_t i = 0; i < n; ++i) {
            double x0 = x[off + i], x1 = x[off + i + half];
            y[off + i] = (float)(x0 * c[i] - x1 * sn[i]);
            y[off + i + half] = (float)(x1 * c[i] + x0 * sn[i]);
          }
        }
    }
  }
}

/* logsumexp of a row of logits, in double. */
static inline double log_sum_exp(const float *pl, int64_t v, float *mx_out) {
  float mx = -INFINITY;
  for (int64_t i = 0; i < v; ++i)
    mx = pl[i] > mx ? pl[i] : mx;
  double sum = 0.0;
  for (int64_t i = 0; i < v; ++i)
    sum += expf(pl[i] - mx);
  *mx_out = mx;
  return mx + log(sum);
}

static int64_t labels_of_i32(const void *labels, int64_t r) {
  return ((const int32_t *)labels)[r];
}
static int64_t labels_of_i64(const void *labels, int64_t r) {
  return ((const int64_t *)labels)[r];
}

/* The mean over rows of logsumexp(row) - row[label]. The rows' terms are
   computed in parallel and added in row order, as one thread adds them (and
   as fused regions do): the loss does not depend on the thread count. */
static float cross_entropy_loss(const float *logits, int64_t rows,
                                int64_t vocab,
                                int64_t (*label)(const void *, int64_t),
                                const void *labels) {
  if (!rows)
    return 0.0f;
  double *terms = malloc((size_t)rows * sizeof(double));
  double total = 0.0;
  if (!terms) { /* the same sum, on this thread */
    for (int64_t r = 0; r < rows; ++r) {
      const float *pl = logits + r * vocab;
      float mx;
      total += log_sum_exp(pl, vocab, &mx) - pl[label(labels, r)];
    }
    return (float)(total / rows);
  }
  BRAID_RT_PARALLEL_FOR(rows * vocab)
  for (int64_t r = 0; r < rows; ++r) {
    const float *pl = logits + r * vocab;
    float mx;
    terms[r] = log_sum_exp(pl, vocab, &mx) - pl[label(labels, r)];
  }
  for (int64_t r = 0; r < rows; ++r)
    total += terms[r];
  free(terms);
  return (float)(total / rows);
}

#define DEFINE_CROSS_ENTROPY(NAME, SUFFIX, T)                                  \
  braid_rt_status_t NAME(braid_rt_stream_t *stream, const float *logits,       \
                         const T *labels, int64_t rows, int64_t vocab,         \
                         float *loss) {                                        \
    if (!ids_in_range##SUFFIX(labels, rows, vocab))                            \
      return BRAID_RT_INVALID_ARGUMENT;                                        \
    *loss =                                                                    \
        cross_entropy_loss(logits, rows, vocab, labels_of##SUFFIX, labels);    \
    return BRAID_RT_OK;                                                        \
  }
DEFINE_CROSS_ENTROPY(braid_rt_cross_entropy_f32, _i32, int32_t)
DEFINE_CROSS_ENTROPY(braid_rt_cross_entropy_f32_i64, _i64, int64_t)

#define DEFINE_CROSS_ENTROPY_GRAD(NAME, SUFFIX, T)                             \
  braid_rt_status_t NAME(braid_rt_stream_t *stream, const float *logits,       \
                         const T *labels, const float *grad, int64_t rows,     \
                         int64_t vocab, float *dlogits) {                      \
    if (!ids_in_range##SUFFIX(labels, rows, vocab))                            \
      return BRAID_RT_INVALID_ARGUMENT;                                        \
    double coeff = rows ? (double)grad[0] / rows : 0.0;                        \
    BRAID_RT_PARALLEL_FOR(rows *vocab)                                         \
    for (int64_t r = 0; r < rows; ++r) {                                       \
      const float *pl = logits + r * vocab;                                    \
      float *pd = dlogits + r * vocab;                                         \
      float mx;                                                                \
      double lse = log_sum_exp(pl, vocab, &mx);                                \
      double inv = exp(mx - lse); /* 1 / sum of exp(logit - mx) */             \
      for (int64_t i = 0; i < vocab; ++i)                                      \
        pd[i] = (float)(coeff * (expf(pl[i] - mx) * inv));                     \
      pd[labels[r]] = (float)(coeff * (expf(pl[labels[r]] - mx) * inv - 1.0)); \
    }                                                                          \
    return BRAID_RT_OK;                                                        \
  }
DEFINE_CROSS_ENTROPY_GRAD(braid_rt_cross_entropy_grad_f32, _i32, int32_t)
DEFINE_CROSS_ENTROPY_GRAD(braid_rt_cross_entropy_grad_f32_i64, _i64, int64_t)
