/*===- barrier.c - barrier over NCCL -------------------------------------===*/
/* The entry point and its checks: common/backend/collectives.c. */

#include "internal.h"

/* NCCL has no barrier: an all_reduce of one float of scratch, which no rank
   can finish before every rank has issued it, waited for on the host. */
braid_rt_status_t braid_rt_backend_barrier(braid_rt_comm_t *comm,
                                           braid_rt_stream_t *stream) {
  braid_rt_context_t *ctx = comm->ctx;
  braid_rt_request_t *req;
  braid_rt_dtype_t none = {ncclFloat32, NULL, sizeof(float)};
  braid_rt_status_t status =
      braid_rt_op_begin(comm, stream, "barrier", none, 0, &req);
  if (status != BRAID_RT_OK)
    return status;
  ncclResult_t result =
      ncclAllReduce(ctx->scratch, ctx->scratch, 1, ncclFloat32, ncclSum,
                    comm->nccl, ctx->comm_stream);
  braid_rt_request_t *started = NULL;
  status = braid_rt_op_finish(req, &started, result, "ncclAllReduce");
  if (status != BRAID_RT_OK)
    return status;
  return braid_rt_request_wait(started);
}
