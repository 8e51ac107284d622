/*===- all_reduce.c - all_reduce over NCCL -------------------------------===*/

#include "internal.h"

/* The body of both forms: blocking when out_request is NULL. */
static braid_rt_status_t all_reduce_sum(braid_rt_comm_t *comm, void *buf,
                                        size_t count, braid_rt_dtype_t type,
                                        braid_rt_stream_t *stream,
                                        braid_rt_request_t **out_request) {
  braid_rt_status_t status =
      braid_rt_check_op(comm, stream, "all_reduce", count, buf, "buf");
  if (status != BRAID_RT_OK)
    return status;
  braid_rt_request_t *req;
  status = braid_rt_op_begin(comm, stream, "all_reduce", type, count, &req);
  if (status != BRAID_RT_OK)
    return status;
  ncclResult_t result = ncclAllReduce(buf, buf, count, type.nccl, ncclSum,
                                      comm->nccl, comm->ctx->comm_stream);
  return braid_rt_op_finish(req, out_request, result, "ncclAllReduce");
}

braid_rt_status_t braid_rt_all_reduce_sum_f32(braid_rt_comm_t *comm, float *buf,
                                              size_t count,
                                              braid_rt_stream_t *stream) {
  return all_reduce_sum(comm, buf, count, BRAID_RT_F32, stream, NULL);
}

braid_rt_status_t braid_rt_all_reduce_sum_f64(braid_rt_comm_t *comm,
                                              double *buf, size_t count,
                                              braid_rt_stream_t *stream) {
  return all_reduce_sum(comm, buf, count, BRAID_RT_F64, stream, NULL);
}

braid_rt_status_t
braid_rt_all_reduce_sum_f32_start(braid_rt_comm_t *comm, float *buf,
                                  size_t count, braid_rt_stream_t *stream,
                                  braid_rt_request_t **out_request) {
  braid_rt_status_t status =
      braid_rt_check_out_request(comm, "all_reduce", out_request);
  if (status != BRAID_RT_OK)
    return status;
  return all_reduce_sum(comm, buf, count, BRAID_RT_F32, stream, out_request);
}

braid_rt_status_t
braid_rt_all_reduce_sum_f64_start(braid_rt_comm_t *comm, double *buf,
                                  size_t count, braid_rt_stream_t *stream,
                                  braid_rt_request_t **out_request) {
  braid_rt_status_t status =
      braid_rt_check_out_request(comm, "all_reduce", out_request);
  if (status != BRAID_RT_OK)
    return status;
  return all_reduce_sum(comm, buf, count, BRAID_RT_F64, stream, out_request);
}
