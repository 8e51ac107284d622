/*===- all_gather.c - all_gather over NCCL -------------------------------===*/
/* The entry points and their checks: common/backend/collectives.c. */

#include "internal.h"

braid_rt_status_t
braid_rt_backend_all_gather(braid_rt_comm_t *comm, const void *send, void *recv,
                            size_t send_count, braid_rt_dtype_t type,
                            braid_rt_stream_t *stream,
                            braid_rt_request_t **out_request) {
  braid_rt_request_t *req;
  braid_rt_status_t status =
      braid_rt_op_begin(comm, stream, "all_gather", type, send_count, &req);
  if (status != BRAID_RT_OK)
    return status;
  ncclResult_t result = ncclAllGather(send, recv, send_count, type.nccl,
                                      comm->nccl, comm->ctx->comm_stream);
  return braid_rt_op_finish(req, out_request, result, "ncclAllGather");
}
