/*===- powersgd_q.c - PowerSGD's first Q and its host arithmetic ---------===*/
/*
 * Host code shared by both backends: every rank must start Q alike, and
 * compute alike from the reduced P and Q (powersgd.h).
 */

#include "braid/rt/collectives.h"
#include "braid/rt/init.h"

#include "powersgd.h"

#include <math.h>

void braid_rt_powersgd_init_q(float *q, size_t cols, size_t rank,
                              uint64_t seed) {
  for (size_t i = 0; i < cols * rank; ++i) {
    uint64_t bits = braid_rt_splitmix64(seed ^ braid_rt_splitmix64(i + 1));
    q[i] = (float)((double)(bits >> 11) / 9007199254740992.0 * 2.0 - 1.0);
  }
}

void braid_rt_powersgd_host_m(const float *grad, const float *error, float *m,
                              size_t n) {
  for (size_t i = 0; i < n; ++i)
    m[i] = error ? grad[i] + error[i] : grad[i];
}

void braid_rt_powersgd_host_p(const float *m, const float *q, float *p,
                              size_t rows, size_t cols, size_t rank) {
  for (size_t r = 0; r < rows; ++r)
    for (size_t c = 0; c < rank; ++c) {
      double sum = 0;
      for (size_t k = 0; k < cols; ++k)
        sum += (double)m[r * cols + k] * q[k * rank + c];
      p[r * rank + c] = (float)sum;
    }
}

void braid_rt_powersgd_host_orthonormalise(float *p, size_t rows, size_t rank) {
  for (size_t c = 0; c < rank; ++c) {
    for (size_t k = 0; k < c; ++k) {
      double dot = 0;
      for (size_t r = 0; r < rows; ++r)
        dot += (double)p[r * rank + c] * p[r * rank + k];
      for (size_t r = 0; r < rows; ++r)
        p[r * rank + c] -= (float)(dot * p[r * rank + k]);
    }
    double norm = 0;
    for (size_t r = 0; r < rows; ++r)
      norm += (double)p[r * rank + c] * p[r * rank + c];
    norm = sqrt(norm);
    double scale = norm > 1e-30 ? 1.0 / norm : 0.0;
    for (size_t r = 0; r < rows; ++r)
      p[r * rank + c] = (float)(p[r * rank + c] * scale);
  }
}

void braid_rt_powersgd_host_q(const float *m, const float *p, float *q,
                              size_t rows, size_t cols, size_t rank) {
  for (size_t k = 0; k < cols; ++k)
    for (size_t c = 0; c < rank; ++c) {
      double sum = 0;
      for (size_t r = 0; r < rows; ++r)
        sum += (double)m[r * cols + k] * p[r * rank + c];
      q[k * rank + c] = (float)sum;
    }
}

void braid_rt_powersgd_host_finish(const float *m, const float *p,
                                   const float *q, float *grad, float *error,
                                   size_t rows, size_t cols, size_t rank,
                                   int size) {
  /* The errors sum to the sum of M minus the approximation. */
  double share = 1.0 / size;
  for (size_t r = 0; r < rows; ++r)
    for (size_t k = 0; k < cols; ++k) {
      double sum = 0;
      for (size_t c = 0; c < rank; ++c)
        sum += (double)p[r * rank + c] * q[k * rank + c];
      grad[r * cols + k] = (float)sum;
      if (error)
        error[r * cols + k] = (float)(m[r * cols + k] - sum * share);
    }
}
