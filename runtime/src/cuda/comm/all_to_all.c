/*===- all_to_all.c - all_to_all over NCCL -------------------------------===*/

#include "internal.h"

/* The body of both forms: blocking when out_request is NULL. */
static braid_rt_status_t all_to_all(braid_rt_comm_t *comm, const void *send,
                                    void *recv, size_t block_count,
                                    braid_rt_dtype_t type,
                                    braid_rt_stream_t *stream,
                                    braid_rt_request_t **out_request) {
  braid_rt_status_t status =
      braid_rt_check_op(comm, stream, "all_to_all", block_count, send, "send");
  if (status == BRAID_RT_OK)
    status = braid_rt_check_op(comm, stream, "all_to_all", block_count, recv,
                               "recv");
  if (status == BRAID_RT_OK) {
    size_t bytes = (size_t)comm->size * block_count * type.bytes;
    status =
        braid_rt_check_disjoint(comm, "all_to_all", send, bytes, recv, bytes);
  }
  if (status != BRAID_RT_OK)
    return status;
  braid_rt_request_t *req;
  status =
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

braid_rt_status_t braid_rt_all_to_all_f32(braid_rt_comm_t *comm,
                                          const float *send, float *recv,
                                          size_t block_count,
                                          braid_rt_stream_t *stream) {
  return all_to_all(comm, send, recv, block_count, BRAID_RT_F32, stream, NULL);
}

braid_rt_status_t braid_rt_all_to_all_f64(braid_rt_comm_t *comm,
                                          const double *send, double *recv,
                                          size_t block_count,
                                          braid_rt_stream_t *stream) {
  return all_to_all(comm, send, recv, block_count, BRAID_RT_F64, stream, NULL);
}

braid_rt_status_t braid_rt_all_to_all_f32_start(
    braid_rt_comm_t *comm, const float *send, float *recv, size_t block_count,
    braid_rt_stream_t *stream, braid_rt_request_t **out_request) {
  braid_rt_status_t status =
      braid_rt_check_out_request(comm, "all_to_all", out_request);
  if (status != BRAID_RT_OK)
    return status;
  return all_to_all(comm, send, recv, block_count, BRAID_RT_F32, stream,
                    out_request);
}

braid_rt_status_t braid_rt_all_to_all_f64_start(
    braid_rt_comm_t *comm, const double *send, double *recv, size_t block_count,
    braid_rt_stream_t *stream, braid_rt_request_t **out_request) {
  braid_rt_status_t status =
      braid_rt_check_out_request(comm, "all_to_all", out_request);
  if (status != BRAID_RT_OK)
    return status;
  return all_to_all(comm, send, recv, block_count, BRAID_RT_F64, stream,
                    out_request);
}
