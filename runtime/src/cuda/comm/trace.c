/*===- trace.c - trace_write's MPI steps (CUDA backend) ------------------===*/
/*
 * The rest of trace.h is common/backend/trace.c. trace_write's steps run
 * over MPI, which the CUDA backend keeps for its bootstrap: a few small
 * messages once per run, blocking.
 */

#include "internal.h"

static braid_rt_status_t mpi_step(braid_rt_context_t *ctx, int code,
                                  const char *call) {
  return code == MPI_SUCCESS
             ? BRAID_RT_OK
             : braid_rt_fail_mpi(ctx, code, call, "braid_rt_trace_write");
}

braid_rt_status_t braid_rt_backend_trace_gather_int(braid_rt_context_t *ctx,
                                                    const int *mine, int *all) {
  return mpi_step(ctx,
                  MPI_Gather(mine, 1, MPI_INT, all, 1, MPI_INT, 0, ctx->mpi),
                  "MPI_Gather");
}

braid_rt_status_t braid_rt_backend_trace_bcast(braid_rt_context_t *ctx,
                                               void *buf, int bytes) {
  return mpi_step(ctx, MPI_Bcast(buf, bytes, MPI_BYTE, 0, ctx->mpi),
                  "MPI_Bcast");
}

braid_rt_status_t braid_rt_backend_trace_gatherv(braid_rt_context_t *ctx,
                                                 const char *mine, int length,
                                                 char *all, const int *lengths,
                                                 const int *offsets) {
  return mpi_step(ctx,
                  MPI_Gatherv(mine, length, MPI_CHAR, all, lengths, offsets,
                              MPI_CHAR, 0, ctx->mpi),
                  "MPI_Gatherv");
}
