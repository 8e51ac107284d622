/*===- all_gather.c - all_gather over NCCL -------------------------------===*/

#include "internal.h"

/* The body of both forms: blocking when out_request is NULL. */
static braid_rt_status_t all_gather(braid_rt_comm_t *comm, const void *send,
                                    void *recv, size_t send_count,
                                    braid_rt_dtype_t type,
                                    braid_rt_stream_t *stream,
                                    braid_rt_request_t **out_request) {
  braid_rt_status_t status =
      braid_rt_check_op(comm, stream, "all_gather", send_count, send, "send");
  if (status == BRAID_RT_OK)
    status =
        braid_rt_check_op(comm, stream, "all_gather", send_count, recv, "recv");
  if (status == BRAID_RT_OK)
    status = braid_rt_check_disjoint(
        comm, "all_gather", send, send_count * type.bytes, recv,
        (size_t)comm->size * send_count * type.bytes);
  if (status != BRAID_RT_OK)
    return status;
  braid_rt_request_t *req;
  status =
      braid_rt_op_begin(comm, stream, "all_gather", type, send_count, &req);
  if (status != BRAID_RT_OK)
    return status;
  ncclResult_t result = ncclAllGather(send, recv, send_count, type.nccl,
                                      comm->nccl, comm->ctx->comm_stream);
  return braid_rt_op_finish(req, out_request, result, "ncclAllGather");
}

braid_rt_status_t braid_rt_all_gather_f32(braid_rt_comm_t *comm,
                                          const float *send, float *recv,
                                          size_t send_count,
                                          braid_rt_stream_t *stream) {
  return all_gather(comm, send, recv, send_count, BRAID_RT_F32, stream, NULL);
}

braid_rt_status_t braid_rt_all_gather_f64(braid_rt_comm_t *comm,
                                          const double *send, double *recv,
                                          size_t send_count,
                                          braid_rt_stream_t *stream) {
  return all_gather(comm, send, recv, send_count, BRAID_RT_F64, stream, NULL);
}

braid_rt_status_t braid_rt_all_gather_f32_start(
    braid_rt_comm_t *comm, const float *send, float *recv, size_t send_count,
    braid_rt_stream_t *stream, braid_rt_request_t **out_request) {
  braid_rt_status_t status =
      braid_rt_check_out_request(comm, "all_gather", out_request);
  if (status != BRAID_RT_OK)
    return status;
  return all_gather(comm, send, recv, send_count, BRAID_RT_F32, stream,
                    out_request);
}

braid_rt_status_t braid_rt_all_gather_f64_start(
    braid_rt_comm_t *comm, const double *send, double *recv, size_t send_count,
    braid_rt_stream_t *stream, braid_rt_request_t **out_request) {
  braid_rt_status_t status =
      braid_rt_check_out_request(comm, "all_gather", out_request);
  if (status != BRAID_RT_OK)
    return status;
  return all_gather(comm, send, recv, send_count, BRAID_RT_F64, stream,
                    out_request);
}
