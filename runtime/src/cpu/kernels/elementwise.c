/*===- elementwise.c - Elementwise kernels (braid.add ... gelu_grad) -----===*/
/*
 * Binary ops broadcast as NumPy does; unary ops and activation gradients
 * map `count` elements. 1 + erf(x) and 1 + tanh(x) cancel for negative x,
 * which f32 would turn into large relative errors: exact GELU is evaluated
 * in double, and the tanh GELU and SiLU through a logistic function written
 * so that nothing cancels (1 + tanh(u) = 2 sigmoid(2u)), in f32, which is
 * several times faster than double tanh (they were a third of a GPT step).
 * The per-element formulas are those of braid/rt/elementwise_math.h, which
 * the fused loops of generated programs call too.
 */
#include "internal.h"

#include "braid/rt/elementwise_math.h"

#include <math.h>
#include <string.h>

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

/* The offsets in `a` and `b` of the start of row `row` of their broadcast
   result, whose last dimension is the row. */
static inline void binary_row_offsets(int64_t row, int64_t a_rank,
                                      const int64_t *a_shape, int64_t b_rank,
                                      const int64_t *b_shape, int64_t rank,
                                      int64_t *a_off, int64_t *b_off) {
  int64_t oa = 0, ob = 0;
  int64_t sa = braid_rt_dim_at(a_shape, a_rank, rank, rank - 1);
  int64_t sb = braid_rt_dim_at(b_shape, b_rank, rank, rank - 1);
  for (int64_t d = rank - 2; d >= 0 && row; --d) {
    int64_t ad = braid_rt_dim_at(a_shape, a_rank, rank, d);
    int64_t bd = braid_rt_dim_at(b_shape, b_rank, rank, d);
    int64_t od = ad == 1 ? bd : ad;
    int64_t idx = row % od;
    row /= od;
    if (ad != 1)
      oa += idx * sa;
    if (bd != 1)
      ob += idx * sb;
    sa *= ad;
    sb *= bd;
  }
  *a_off = oa;
  *b_off = ob;
}

static int same_shape(int64_t a_rank, const int64_t *a_shape, int64_t b_rank,
                      const int64_t *b_shape) {
  if (a_rank != b_rank)
    return 0;
  for (int64_t d = 0; d < a_rank; ++d)
    if (a_shape[d] != b_shape[d])
      return 0;
  return 1;
}

#define DEFINE_BINARY(NAME, EXPR)                                              \
  void braid_rt_##NAME##_f32(braid_rt_stream_t *stream, const float *a,        \
                             const float *b, int64_t a_rank,                   \
                             const int64_t *a_shape, int64_t b_rank,           \
                             const int64_t *b_shape, float *out) {             \
    if (same_shape(a_rank, a_shape, b_rank, b_shape)) {                        \
      int64_t n = braid_rt_num_elements(a_shape, a_rank);                      \
      BRAID_RT_PARALLEL_FOR_SIMD(n)                                            \
      for (int64_t i = 0; i < n; ++i) {                                        \
        float x = a[i], y = b[i];                                              \
        out[i] = (EXPR);                                                       \
      }                                                                        \
      return;                                                                  \
    }                                                                          \
    int64_t rank = a_rank > b_rank ? a_rank : b_rank;                          \
    int64_t total = 1;                                                         \
    for (int64_t d = 0; d < rank; ++d) {                                       \
      int64_t ad = braid_rt_dim_at(a_shape, a_rank, rank, d);                  \
      total *= ad == 1 ? braid_rt_dim_at(b_shape, b_rank, rank, d) : ad;       \
    }                                                                          \
    int64_t ad = braid_rt_dim_at(a_shape, a_rank, rank, rank - 1);             \
    int64_t bd = braid_rt_dim_at(b_shape, b_rank, rank, rank - 1);             \
    int64_t cols = ad == 1 ? bd : ad;                                          \
    if (total == 0 || cols == 0)                                               \
      return;                                                                  \
    int64_t rows = total / cols, sa = ad == 1 ? 0 : 1, sb = bd == 1 ? 0 : 1;   \
    BRAID_RT_PARALLEL_FOR(total)                                               \
    for (int64_t r = 0; r < rows; ++r) {                                       \
      int64_t oa, ob;                                                          \
      binary_row_offsets(r, a_rank, a_shape, b_rank, b_shape, rank, &oa, &ob); \
      const float *pa = a + oa, *pb = b + ob;                                  \
      float *po = out + r * cols;                                              \
      BRAID_RT_SIMD                                                            \
      for (int64_t j = 0; j < cols; ++j) {                                     \
        float x = pa[j * sa], y = pb[j * sb];                                  \
        po[j] = (EXPR);                                                        \
      }                                                                        \
    }                                                                          \
  }

DEFINE_BINARY(add, x + y)
DEFINE_BINARY(sub, x - y)
DEFINE_BINARY(mul, x * y)
DEFINE_BINARY(div, x / y)

#define DEFINE_UNARY(NAME, EXPR)                                               \
  void braid_rt_##NAME##_f32(braid_rt_stream_t *stream, const float *in,       \
                             int64_t count, float *y) {                        \
    BRAID_RT_PARALLEL_FOR_SIMD(count)                                          \
    for (int64_t i = 0; i < count; ++i) {                                      \
      float x = in[i];                                                         \
      y[i] = (EXPR);                                                           \
    }                                                                          \
  }

DEFINE_UNARY(neg, braid_rt_neg_of(x))
DEFINE_UNARY(exp, braid_rt_exp_of(x))
DEFINE_UNARY(sqrt, braid_rt_sqrt_of(x))
DEFINE_UNARY(rsqrt, braid_rt_rsqrt_of(x))
DEFINE_UNARY(relu, braid_rt_relu_of(x))
DEFINE_UNARY(silu, braid_rt_silu_of(x))
DEFINE_UNARY(round_bf16, braid_rt_round_bf16_of(x))

void braid_rt_pack_bf16_f32(braid_rt_stream_t *stream, const float *x,
                            int64_t count, uint16_t *y) {
  (void)stream;
  BRAID_RT_PARALLEL_FOR_SIMD(count)
  for (int64_t i = 0; i < count; ++i)
    y[i] = braid_rt_bf16_bits_of(x[i]);
}

void braid_rt_unpack_bf16_f32(braid_rt_stream_t *stream, const uint16_t *x,
                              int64_t count, float *y) {
  (void)stream;
  BRAID_RT_PARALLEL_FOR_SIMD(count)
  for (int64_t i = 0; i < count; ++i)
    y[i] = braid_rt_float_of_bf16(x[i]);
}

static inline double gelu_exact(double x) {
  return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
}

void braid_rt_gelu_f32(braid_rt_stream_t *stream, const float *x, int64_t count,
                       braid_rt_gelu_approximation_t approximate, float *y) {
  if (approximate == BRAID_RT_GELU_TANH) {
    BRAID_RT_PARALLEL_FOR_SIMD(count)
    for (int64_t i = 0; i < count; ++i)
      y[i] = braid_rt_gelu_tanh_of(x[i]);
  } else {
    BRAID_RT_PARALLEL_FOR(count)
    for (int64_t i = 0; i < count; ++i)
      y[i] = (float)gelu_exact(x[i]);
  }
}

void braid_rt_relu_grad_f32(braid_rt_stream_t *stream, const float *x,
                            const float *dy, int64_t count, float *dx) {
  BRAID_RT_PARALLEL_FOR_SIMD(count)
  for (int64_t i = 0; i < count; ++i)
    dx[i] = braid_rt_relu_grad_of(x[i], dy[i]);
}

void braid_rt_silu_grad_f32(braid_rt_stream_t *stream, const float *x,
                            const float *dy, int64_t count, float *dx) {
  BRAID_RT_PARALLEL_FOR_SIMD(count)
  for (int64_t i = 0; i < count; ++i)
    dx[i] = braid_rt_silu_grad_of(x[i], dy[i]);
}

void braid_rt_gelu_grad_f32(braid_rt_stream_t *stream, const float *x,
                            const float *dy, int64_t count,
                            braid_rt_gelu_approximation_t approximate,
                            float *dx) {
  if (approximate == BRAID_RT_GELU_TANH) {
    BRAID_RT_PARALLEL_FOR_SIMD(count)
    for (int64_t i = 0; i < count; ++i)
      dx[i] = braid_rt_gelu_tanh_grad_of(x[i], dy[i]);
  } else {
    const double inv_sqrt2pi = 1.0 / sqrt(2.0 * M_PI);
    BRAID_RT_PARALLEL_FOR(count)
    for (int64_t i = 0; i < count; ++i) {
      double xi = x[i];
      double cdf = 0.5 * (1.0 + erf(xi / sqrt(2.0)));
      double pdf = exp(-0.5 * xi * xi) * inv_sqrt2pi;
      dx[i] = (float)(dy[i] * (cdf + xi * pdf));
    }
  }
}
