/*===- powersgd.h - PowerSGD's arithmetic on the host, for both backends -===*/
/*
 * The steps of braid_rt_powersgd_all_reduce_f32 (collectives.h) between its
 * two all_reduces, on host memory, loops in double where they sum. The CPU
 * backend (cpu/powersgd.c) runs them on its buffers; the CUDA backend
 * (cuda/comm/compressed.c) stages the gradient through the host and runs the
 * same functions, so that both targets compute the same bits from the same
 * reduced P and Q. Row-major: m and grad [rows][cols], p [rows][rank], q
 * [cols][rank].
 */
#ifndef BRAID_RT_COMMON_POWERSGD_H
#define BRAID_RT_COMMON_POWERSGD_H

#include <stddef.h>

/* m = grad + error (error NULL: m = grad): what this rank has not yet
   communicated. */
void braid_rt_powersgd_host_m(const float *grad, const float *error, float *m,
                              size_t n);

/* p = m q: this rank's share of P, before the all_reduce. */
void braid_rt_powersgd_host_p(const float *m, const float *q, float *p,
                              size_t rows, size_t cols, size_t rank);

/* Orthonormalises the `rank` columns of p in place, modified Gram-Schmidt;
   a column with nothing left becomes zero. */
void braid_rt_powersgd_host_orthonormalise(float *p, size_t rows, size_t rank);

/* q = m^T p: this rank's share of Q, before the all_reduce. */
void braid_rt_powersgd_host_q(const float *m, const float *p, float *q,
                              size_t rows, size_t cols, size_t rank);

/* grad = p q^T, the approximate sum; error (unless NULL) = m - grad /
   size, this rank's share of what the approximation missed. */
void braid_rt_powersgd_host_finish(const float *m, const float *p,
                                   const float *q, float *grad, float *error,
                                   size_t rows, size_t cols, size_t rank,
                                   int size);

#endif /* BRAID_RT_COMMON_POWERSGD_H */
