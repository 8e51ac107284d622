/*===- optim.c - Learning-rate schedule, norms, optimizer updates --------===*/
/*
 * Scalars and per-element updates are computed in double, as the reference
 * does, and rounded to f32 when stored.
 */
#include "internal.h"

#include <math.h>
#include <string.h>

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

static double lr_at(double t, braid_rt_lr_decay_t decay, double lr,
                    double min_lr, int64_t warmup, int64_t total) {
  if (t < (double)warmup)
    return lr * (t + 1) / (double)warmup;
  double span = (double)(total - warmup);
  double p = (t - (double)warmup) / (span > 1.0 ? span : 1.0);
  p = p < 1.0 ? p : 1.0;
  switch (decay) {
  case BRAID_RT_LR_LINEAR:
    return min_lr + (lr - min_lr) * (1.0 - p);
  case BRAID_RT_LR_COSINE:
    return min_lr + (lr - min_lr) * 0.5 * (1.0 + cos(M_PI * p));
  case BRAID_RT_LR_CONSTANT:
    break;
  }
  return lr;
}

void braid_rt_lr_schedule_f32(braid_rt_stream_t *stream, const int32_t *step,
                              braid_rt_lr_decay_t decay, double lr,
                              double min_lr, int64_t warmup_steps,
                              int64_t total_steps, float *out) {
  *out = (float)lr_at((double)*step, decay, lr, min_lr, warmup_steps,
                      total_steps);
}

void braid_rt_lr_schedule_f32_i64(braid_rt_stream_t *stream,
                                  const int64_t *step,
                                  braid_rt_lr_decay_t decay, double lr,
                                  double min_lr, int64_t warmup_steps,
                                  int64_t total_steps, float *out) {
  *out = (float)lr_at((double)*step, decay, lr, min_lr, warmup_steps,
                      total_steps);
}

/* The sum of squares of a chunk of at most kChunk elements, in double: 8
   running sums (element i in sum i mod 8, so that the loop vectorizes),
   added pairwise at the end. */
enum { kLanes = 8, kChunk = 1 << 14, kGroup = 64 };
static double chunk_squares(const float *x, int64_t n) {
  double lane[kLanes] = {0.0};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int l = 0; l < kLanes; ++l)
      lane[l] += (double)x[i + l] * x[i + l];
  for (int l = 0; i < n; ++i, ++l)
    lane[l] += (double)x[i] * x[i];
  return ((lane[0] + lane[1]) + (lane[2] + lane[3])) +
         ((lane[4] + lane[5]) + (lane[6] + lane[7]));
}

/* The chunks' sums are added in order, so the result does not depend on the
   thread count (an OpenMP reduction's did). */
static double sum_squares(const float *const *inputs, const int64_t *counts,
                          int64_t num_inputs) {
  double total = 0.0;
  for (int64_t t = 0; t < num_inputs; ++t) {
    const float *x = inputs[t];
    int64_t n = counts[t];
    /* kGroup chunks at a time, their sums kept for the ordered addition. */
    for (int64_t g = 0; g < n; g += (int64_t)kChunk * kGroup) {
      int64_t left = n - g, span = (int64_t)kChunk * kGroup;
      int64_t elements = left < span ? left : span;
      int64_t chunks = (elements + kChunk - 1) / kChunk;
      double sums[kGroup];
      BRAID_RT_PARALLEL_FOR(elements)
      for (int64_t c = 0; c < chunks; ++c) {
        int64_t begin = c * kChunk;
        int64_t len = elements - begin < kChunk ? elements - begin : kChunk;
        sums[c] = chunk_squares(x + g + begin, len);
      }
      for (int64_t c = 0; c < chunks; ++c)
        total += sums[c];
    }
  }
  return total;
}

void braid_rt_global_norm_f32(braid_rt_stream_t *stream,
                              const float *const *inputs, const int64_t *counts,
                              int64_t num_inputs, float *out) {
  *out = (float)sqrt(sum_squares(inputs, counts, num_inputs));
}

void braid_rt_sum_squares_f32(braid_rt_stream_t *stream,
                              const float *const *inputs, const int64_t *counts,
                              int64_t num_inputs, float *out) {
  *out = (float)sum_squares(inputs, counts, num_inputs);
}

void braid_rt_clip_coefficient_f32(braid_rt_stream_t *stream, const float *norm,
                                   double max_norm, float *out) {
  double c = max_norm / ((double)*norm + 1e-6);
  *out = (float)(c < 1.0 ? c : 1.0);
}

void braid_rt_select_f32(braid_rt_stream_t *stream, const float *condition,
                         const float *on_true, const float *on_false,
                         int64_t count, float *out) {
  const float *from = *condition != 0.0f ? on_true : on_false;
  if (from != out)
    memmove(out, from, (size_t)count * sizeof(float));
}

static void adamw(const float *param, const float *grad, const float *m,
                  const float *v, double lr, double t, double scale,
                  int64_t count, double b1, double b2, double eps, double wd,
                  float *new_param, float *new_m, float *new_v) {
  if (!isfinite(scale)) { /* a skipped step: everything stays */
    BRAID_RT_SIMD /* in place too: a vector copy onto itself */
    for (int64_t i = 0; i < count; ++i) {
      new_param[i] = param[i];
      new_m[i] = m[i];
      new_v[i] = v[i];
    }
    return;
  }
  double c1 = 1.0 - pow(b1, t), c2 = 1.0 - pow(b2, t);
  BRAID_RT_PARALLEL_FOR_SIMD(count)
  for (int64_t i = 0; i < count; ++i) {
    double g = grad[i] * scale;
    double nm = b1 * m[i] + (1.0 - b1) * g;
    double nv = b2 * v[i] + (1.0 - b2) * g * g;
    double decayed = param[i] * (1.0 - lr * wd);
    /* As in the reference, the parameter uses the unrounded new m and v. */
    new_param[i] = (float)(decayed - lr * (nm / c1) / (sqrt(nv / c2) + eps));
    new_m[i] = (float)nm;
    new_v[i] = (float)nv;
  }
}

void braid_rt_adamw_update_f32(braid_rt_stream_t *stream, const float *param,
                               const float *grad, const float *m,
                               const float *v, const float *lr,
                               const int32_t *step, const float *grad_scale,
                               int64_t count, double beta1, double beta2,
                               double epsilon, double weight_decay,
                               float *new_param, float *new_m, float *new_v) {
  adamw(param, grad, m, v, *lr, (double)*step + 1, *grad_scale, count, beta1,
        beta2, epsilon, weight_decay, new_param, new_m, new_v);
}

void braid_rt_adamw_update_f32_i64(braid_rt_stream_t *stream,
                                   const float *param, const float *grad,
                                   const float *m, const float *v,
                                   const float *lr, const int64_t *step,
                                   const float *grad_scale, int64_t count,
                                   double beta1, double beta2, double epsilon,
                                   double weight_decay, float *new_param,
                                   float *new_m, float *new_v) {
  adamw(param, grad, m, v, *lr, (double)*step + 1, *grad_scale, count, beta1,
        beta2, epsilon, weight_decay, new_param, new_m, new_v);
}

void braid_rt_sgd_update_f32(braid_rt_stream_t *stream, const float *param,
                             const float *grad, const float *momentum_buffer,
                             const float *lr, const float *grad_scale,
                             int64_t count, double momentum, int nesterov,
                             double weight_decay, float *new_param,
                             float *new_momentum_buffer) {
  double rate = *lr, scale = *grad_scale;
  if (!isfinite(scale)) { /* a skipped step: everything stays */
    BRAID_RT_SIMD
    for (int64_t i = 0; i < count; ++i) {
      new_param[i] = param[i];
      new_momentum_buffer[i] = momentum_buffer[i];
    }
    return;
  }
  BRAID_RT_PARALLEL_FOR_SIMD(count)
  for (int64_t i = 0; i < count; ++i) {
    double p = param[i];
    double g = grad[i] * scale + weight_decay * p;
    double nb = momentum * momentum_buffer[i] + g;
    double step = nesterov ? g + momentum * nb : nb;
    new_param[i] = (float)(p - rate * step);
    new_momentum_buffer[i] = (float)nb;
  }
}
