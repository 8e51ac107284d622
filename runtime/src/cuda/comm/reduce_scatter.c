/*===- reduce_scatter.c - reduce_scatter over NCCL -----------------------===*/

#include "internal.h"

/* The body of both forms: blocking when out_request is NULL. */
static braid_rt_status_t reduce_scatter_sum(braid_rt_comm_t *comm,
                                            const void *send, void *recv,
                                            size_t recv_count,
                                            braid_rt_dtype_t type,
                                            braid_rt_stream_t *stream,
                                            braid_rt_request_t **out_request) {
  braid_rt_status_t status = braid_rt_check_op(comm, stream, "reduce_scatter",
                                               recv_count, send, "send");
  if (status == BRAID_RT_OK)
    status = braid_rt_check_op(comm, stream, "reduce_scatter", recv_count, recv,
                               "recv");
  if (status == BRAID_RT_OK)
    status =
        braid_rt_check_disjoint(comm, "reduce_scatter", send,
                                (size_t)comm->size * recv_count * type.bytes,
                                recv, recv_count * type.bytes);
  if (status != BRAID_RT_OK)
    return status;
  braid_rt_request_t *req;
  status =
      braid_rt_op_begin(comm, stream, "reduce_scatter", type, recv_count, &req);
  if (status != BRAID_RT_OK)
    return status;
  ncclResult_t result =
      ncclReduceScatter(send, recv, recv_count, type.nccl, ncclSum, comm->nccl,
                        comm->ctx->comm_stream);
  return braid_rt_op_finish(req, out_request, result, "ncclReduceScatter");
}

braid_rt_status_t braid_rt_reduce_scatter_sum_f32(braid_rt_comm_t *comm,
                                                  const float *send,
                                                  float *recv,
                                                  size_t recv_count,
                                                  braid_rt_stream_t *stream) {
  return reduce_scatter_sum(comm, send, recv, recv_count, BRAID_RT_F32, stream,
                            NULL);
}

braid_rt_status_t braid_rt_reduce_scatter_sum_f64(braid_rt_comm_t *comm,
                                                  const double *send,
                                                  double *recv,
                                                  size_t recv_count,
                                                  braid_rt_stream_t *stream) {
  return reduce_scatter_sum(comm, send, recv, recv_count, BRAID_RT_F64, stream,
                            NULL);
}

braid_rt_status_t braid_rt_reduce_scatter_sum_f32_start(
    braid_rt_comm_t *comm, const float *send, float *recv, size_t recv_count,
    braid_rt_stream_t *stream, braid_rt_request_t **out_request) {
  braid_rt_status_t status =
      braid_rt_check_out_request(comm, "reduce_scatter", out_request);
  if (status != BRAID_RT_OK)
    return status;
  return reduce_scatter_sum(comm, send, recv, recv_count, BRAID_RT_F32, stream,
                            out_request);
}

braid_rt_status_t braid_rt_reduce_scatter_sum_f64_start(
    braid_rt_comm_t *comm, const double *send, double *recv, size_t recv_count,
    braid_rt_stream_t *stream, braid_rt_request_t **out_request) {
  braid_rt_status_t status =
      braid_rt_check_out_request(comm, "reduce_scatter", out_request);
  if (status != BRAID_RT_OK)
    return status;
  return reduce_scatter_sum(comm, send, recv, recv_count, BRAID_RT_F64, stream,
                            out_request);
}
