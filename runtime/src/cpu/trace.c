/*===- trace.c - trace_write's MPI steps (CPU backend) -------------------===*/
/*
 * The rest of trace.h is common/backend/trace.c. Here each step is a
 * non-blocking MPI call waited for as a request, so that a dead rank makes
 * it time out like any collective.
 */

#include "internal.h"

/* Prepares the wait for one step. Cannot fail: the storage is the
   caller's. */
static braid_rt_request_t *trace_step(braid_rt_context_t *ctx,
                                      braid_rt_request_t *storage) {
  braid_rt_request_t *req = NULL;
  braid_rt_request_begin(&ctx->world, NULL, storage, "trace_write", NULL, 0, -1,
                         0, &req);
  return req;
}

braid_rt_status_t braid_rt_backend_trace_gather_int(braid_rt_context_t *ctx,
                                                    const int *mine, int *all) {
  braid_rt_request_t storage, *req = trace_step(ctx, &storage);
  return braid_rt_request_finish(req, NULL,
                                 MPI_Igather(mine, 1, MPI_INT, all, 1, MPI_INT,
                                             0, ctx->world.mpi, &req->mpi),
                                 "MPI_Igather");
}

braid_rt_status_t braid_rt_backend_trace_bcast(braid_rt_context_t *ctx,
                                               void *buf, int bytes) {
  braid_rt_request_t storage, *req = trace_step(ctx, &storage);
  return braid_rt_request_finish(
      req, NULL, MPI_Ibcast(buf, bytes, MPI_BYTE, 0, ctx->world.mpi, &req->mpi),
      "MPI_Ibcast");
}

braid_rt_status_t braid_rt_backend_trace_gatherv(braid_rt_context_t *ctx,
                                                 const char *mine, int length,
                                                 char *all, const int *lengths,
                                                 const int *offsets) {
  braid_rt_request_t storage, *req = trace_step(ctx, &storage);
  return braid_rt_request_finish(req, NULL,
                                 MPI_Igatherv(mine, length, MPI_CHAR, all,
                                              lengths, offsets, MPI_CHAR, 0,
                                              ctx->world.mpi, &req->mpi),
                                 "MPI_Igatherv");
}
