/*===- broadcast.c - broadcast over NCCL ---------------------------------===*/
/* The entry points and their checks: common/backend/collectives.c. */

#include "internal.h"

braid_rt_status_t braid_rt_backend_broadcast(braid_rt_comm_t *comm, void *buf,
                                             size_t count, int root,
                                             braid_rt_dtype_t type,
                                             braid_rt_stream_t *stream,
                                             braid_rt_request_t **out_request) {
  braid_rt_request_t *req;
  braid_rt_status_t status =
      braid_rt_op_begin(comm, stream, "broadcast", type, count, &req);
  if (status != BRAID_RT_OK)
    return status;
  ncclResult_t result = ncclBroadcast(buf, buf, count, type.nccl, root,
                                      comm->nccl, comm->ctx->comm_stream);
  return braid_rt_op_finish(req, out_request, result, "ncclBroadcast");
}
