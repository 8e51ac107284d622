/*===- mesh.c - Axis-group communicators over NCCL (CUDA) ----------------===*/
/*
 * What meshes need of NCCL; the meshes themselves and their communicator
 * cache are shared by the backends (common/backend/meshes.c).
 */

#include "internal.h"

/* Splits the world with ncclCommSplit, with the color and key an
   MPI_Comm_split would take. Collective over the world. */
braid_rt_status_t braid_rt_backend_comm_split(braid_rt_comm_t *comm, int color,
                                              int key) {
  braid_rt_context_t *ctx = comm->ctx;
  if (ctx->world.broken)
    return braid_rt_fail(ctx, BRAID_RT_COMM_FAILURE,
                         "braid_rt_mesh_comm: the world communicator was "
                         "aborted after an earlier failure");
  /* Earlier transfers go first: a split waits for every rank. */
  braid_rt_status_t status = braid_rt_flush_sends(ctx);
  if (status != BRAID_RT_OK)
    return status;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0; /* polled with the timeout, as the world is */
  ncclResult_t result =
      ncclCommSplit(ctx->world.nccl, color, key, &comm->nccl, &config);
  if (result != ncclSuccess && result != ncclInProgress)
    status = braid_rt_nccl_settle(&ctx->world, result, "ncclCommSplit",
                                  "braid_rt_mesh_comm");
  /* The new communicator's state says when the split is done. */
  if (status == BRAID_RT_OK)
    status = braid_rt_nccl_settle(comm, ncclInProgress, "ncclCommSplit",
                                  "braid_rt_mesh_comm");
  if (status == BRAID_RT_OK) {
    ncclResult_t code = ncclCommUserRank(comm->nccl, &comm->rank);
    if (code == ncclSuccess)
      code = ncclCommCount(comm->nccl, &comm->size);
    if (code != ncclSuccess)
      status = braid_rt_fail_nccl(ctx, code, comm->nccl, "ncclCommCount",
                                  "braid_rt_mesh_comm");
  }
  if (status != BRAID_RT_OK) {
    /* A failed split was aborted by the settle, or never created. */
    if (comm->nccl && !comm->broken)
      ncclCommAbort(comm->nccl);
    return status;
  }
  comm->next_live = ctx->comms;
  ctx->comms = comm;
  return BRAID_RT_OK;
}

/* Nothing may be in flight on a communicator that is destroyed. */
braid_rt_status_t braid_rt_backend_mesh_release_begin(braid_rt_context_t *ctx) {
  return braid_rt_drain(ctx, NULL);
}

/* Removes `comm` from its context's list of live communicators. */
static void unlink_comm(braid_rt_comm_t *comm) {
  for (braid_rt_comm_t **p = &comm->ctx->comms; *p; p = &(*p)->next_live)
    if (*p == comm) {
      *p = comm->next_live;
      return;
    }
}

braid_rt_status_t braid_rt_backend_comm_release(braid_rt_comm_t *comm) {
  unlink_comm(comm);
  /* An aborted communicator is gone already: ncclCommDestroy on it is
     undefined. A healthy one is finalised first, collectively. */
  if (comm->broken)
    return BRAID_RT_OK;
  braid_rt_status_t status =
      braid_rt_nccl_settle(comm, ncclCommFinalize(comm->nccl),
                           "ncclCommFinalize", "braid_rt_mesh_destroy");
  if (status == BRAID_RT_OK)
    ncclCommDestroy(comm->nccl);
  return status;
}
