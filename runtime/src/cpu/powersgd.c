/*===- powersgd.c - Low-rank gradient sums with error feedback -----------===*/
/*
 * PowerSGD (Vogels, Karimireddy and Jaggi, NeurIPS 2019), one power
 * iteration per step with a warm-started Q, for the sum over `comm` of a
 * 2-D gradient. Host memory; the arithmetic is common/powersgd.h's, loops
 * in double where they sum (rows x cols x rank work, small beside the step
 * that produced the gradient), shared with the CUDA backend; the two
 * all_reduces are the runtime's f32 ones, so every rank computes the same
 * bits from the same reduced P and Q. A trace shows them (`within` the
 * whole) and, at the end, the whole as an operation of no duration (its
 * products are compute, not communication) on the gradient, whose wire
 * bytes are theirs.
 */

#include "powersgd.h"
#include "internal.h"

#include <stdlib.h>

braid_rt_status_t braid_rt_backend_powersgd_all_reduce_f32(
    braid_rt_comm_t *comm, float *grad, size_t rows, size_t cols, size_t rank,
    float *q, float *error, braid_rt_stream_t *stream) {
  const char *op = "powersgd_all_reduce";
  float *m = malloc(rows * cols * sizeof(float));
  float *p = malloc(rows * rank * sizeof(float));
  if (!m || !p) {
    free(m);
    free(p);
    return braid_rt_fail(comm->ctx, BRAID_RT_OUT_OF_MEMORY,
                         "%s over %s: out of memory", op, comm->name);
  }
  braid_rt_composed_t saved;
  braid_rt_composed_enter(comm->ctx, op, &saved);
  braid_rt_powersgd_host_m(grad, error, m, rows * cols);
  /* P = M Q, summed over the ranks, orthonormalised. */
  braid_rt_powersgd_host_p(m, q, p, rows, cols, rank);
  braid_rt_status_t status =
      braid_rt_all_reduce_sum_f32(comm, p, rows * rank, stream);
  if (status == BRAID_RT_OK) {
    braid_rt_powersgd_host_orthonormalise(p, rows, rank);
    /* Q = M^T P, summed over the ranks: the next step's warm start. */
    braid_rt_powersgd_host_q(m, p, q, rows, cols, rank);
    status = braid_rt_all_reduce_sum_f32(comm, q, cols * rank, stream);
  }
  if (status == BRAID_RT_OK)
    braid_rt_powersgd_host_finish(m, p, q, grad, error, rows, cols, rank,
                                  comm->size);
  free(m);
  free(p);
  /* Of no duration: its products are compute, not communication. */
  return braid_rt_composed_finish(comm, op, rows * cols, -1, &saved, status);
}
