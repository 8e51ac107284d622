/*===- powersgd.c - Low-rank gradient sums with error feedback -----------===*/
/*
 * PowerSGD (Vogels, Karimireddy and Jaggi, NeurIPS 2019), one power
 * iteration per step with a warm-started Q, for the sum over `comm` of a
 * 2-D gradient. Host memory, loops in double where they sum (rows x cols
 * x rank work, small beside the step that produced the gradient); the two
 * all_reduces are the runtime's f32 ones, so every rank computes the same
 * bits from the same reduced P and Q.
 */

#include "internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Orthonormalises the `rank` columns of p ([rows][rank]) in place,
   modified Gram-Schmidt; a column with nothing left becomes zero. */
static void orthonormalise(float *p, size_t rows, size_t rank) {
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

braid_rt_status_t braid_rt_powersgd_all_reduce_f32(braid_rt_comm_t *comm,
                                                   float *grad, size_t rows,
                                                   size_t cols, size_t rank,
                                                   float *q, float *error,
                                                   braid_rt_stream_t *stream) {
  const char *op = "powersgd_all_reduce";
  braid_rt_status_t status =
      braid_rt_check_op(comm, stream, op, rows * cols, grad, "grad");
  if (status != BRAID_RT_OK)
    return status;
  if (rank == 0 || rank > rows || rank > cols || !q)
    return braid_rt_fail(comm->ctx, BRAID_RT_INVALID_ARGUMENT,
                         "%s over %s: rank %zu must be in 1..min(%zu, %zu) "
                         "and q given",
                         op, comm->name, rank, rows, cols);
  float *m = malloc(rows * cols * sizeof(float));
  float *p = malloc(rows * rank * sizeof(float));
  if (!m || !p) {
    free(m);
    free(p);
    return braid_rt_fail(comm->ctx, BRAID_RT_OUT_OF_MEMORY,
                         "%s over %s: out of memory", op, comm->name);
  }
  /* M = grad + error: what this rank has not yet communicated. */
  for (size_t i = 0; i < rows * cols; ++i)
    m[i] = error ? grad[i] + error[i] : grad[i];
  /* P = M Q, summed over the ranks, orthonormalised. */
  for (size_t r = 0; r < rows; ++r)
    for (size_t c = 0; c < rank; ++c) {
      double sum = 0;
      for (size_t k = 0; k < cols; ++k)
        sum += (double)m[r * cols + k] * q[k * rank + c];
      p[r * rank + c] = (float)sum;
    }
  status = braid_rt_all_reduce_sum_f32(comm, p, rows * rank, stream);
  if (status == BRAID_RT_OK) {
    orthonormalise(p, rows, rank);
    /* Q = M^T P, summed over the ranks: the next step's warm start. */
    for (size_t k = 0; k < cols; ++k)
      for (size_t c = 0; c < rank; ++c) {
        double sum = 0;
        for (size_t r = 0; r < rows; ++r)
          sum += (double)m[r * cols + k] * p[r * rank + c];
        q[k * rank + c] = (float)sum;
      }
    status = braid_rt_all_reduce_sum_f32(comm, q, cols * rank, stream);
  }
  if (status == BRAID_RT_OK) {
    /* grad = P Q^T, the approximate sum; each rank keeps its share of what
       it missed: error = M - grad / size (the errors sum to the sum of M
       minus the approximation). */
    double share = 1.0 / comm->size;
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
  free(m);
  free(p);
  return status;
}
