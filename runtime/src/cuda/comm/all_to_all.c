/*===- all_to_all.c - all_to_all over NCCL -------------------------------===*/
/* The entry points and their checks: common/backend/collectives.c. */

#include "internal.h"

braid_rt_status_t
braid_rt_backend_all_to_all(braid_rt_comm_t *comm, const void *send, void *recv,
                            size_t block_count, braid_rt_dtype_t type,
                            braid_rt_stream_t *stream,
                            braid_rt_request_t **out_request) {
  braid_rt_request_t *req;
  braid_rt_status_t status =
      braid_rt_op_begin(comm, stream, "all_to_all", type, block_count, &req);
  if (status != BRAID_RT_OK)
    return status;
  /* NCCL has no all_to_all: one send and one receive per rank, grouped so
     that they run as one operation. */
  ncclResult_t result = ncclGroupStart();
  const char *sendb = send;
  char *recvb = recv;
  size_t block_bytes = block_count * type.bytes;
  for (int r = 0; r < comm->size && result == ncclSuccess; ++r) {
    result = ncclSend(sendb + (size_t)r * block_bytes, block_count, type.nccl,
                      r, comm->nccl, comm->ctx->comm_stream);
    if (result == ncclSuccess)
      result = ncclRecv(recvb + (size_t)r * block_bytes, block_count, type.nccl,
                        r, comm->nccl, comm->ctx->comm_stream);
  }
  ncclResult_t end = ncclGroupEnd();
  if (result == ncclSuccess)
    result = end;
  return braid_rt_op_finish(req, out_request, result, "ncclGroupEnd");
}
