/*===- broadcast.c - broadcast over NCCL ---------------------------------===*/

#include "internal.h"

/* The body of both forms: blocking when out_request is NULL. */
static braid_rt_status_t broadcast(braid_rt_comm_t *comm, void *buf,
                                   size_t count, int root,
                                   braid_rt_dtype_t type,
                                   braid_rt_stream_t *stream,
                                   braid_rt_request_t **out_request) {
  braid_rt_status_t status =
      braid_rt_check_op(comm, stream, "broadcast", count, buf, "buf");
  if (status != BRAID_RT_OK)
    return status;
  if (root < 0 || root >= comm->size)
    return braid_rt_fail(comm->ctx, BRAID_RT_INVALID_ARGUMENT,
                         "broadcast over %s: root %d is not in 0..%d",
                         comm->name, root, comm->size - 1);
  braid_rt_request_t *req;
  status = braid_rt_op_begin(comm, stream, "broadcast", type, count, &req);
  if (status != BRAID_RT_OK)
    return status;
  ncclResult_t result = ncclBroadcast(buf, buf, count, type.nccl, root,
                                      comm->nccl, comm->ctx->comm_stream);
  return braid_rt_op_finish(req, out_request, result, "ncclBroadcast");
}

braid_rt_status_t braid_rt_broadcast_f32(braid_rt_comm_t *comm, float *buf,
                                         size_t count, int root,
                                         braid_rt_stream_t *stream) {
  return broadcast(comm, buf, count, root, BRAID_RT_F32, stream, NULL);
}

braid_rt_status_t braid_rt_broadcast_f64(braid_rt_comm_t *comm, double *buf,
                                         size_t count, int root,
                                         braid_rt_stream_t *stream) {
  return broadcast(comm, buf, count, root, BRAID_RT_F64, stream, NULL);
}

braid_rt_status_t
braid_rt_broadcast_f32_start(braid_rt_comm_t *comm, float *buf, size_t count,
                             int root, braid_rt_stream_t *stream,
                             braid_rt_request_t **out_request) {
  braid_rt_status_t status =
      braid_rt_check_out_request(comm, "broadcast", out_request);
  if (status != BRAID_RT_OK)
    return status;
  return broadcast(comm, buf, count, root, BRAID_RT_F32, stream, out_request);
}

braid_rt_status_t
braid_rt_broadcast_f64_start(braid_rt_comm_t *comm, double *buf, size_t count,
                             int root, braid_rt_stream_t *stream,
                             braid_rt_request_t **out_request) {
  braid_rt_status_t status =
      braid_rt_check_out_request(comm, "broadcast", out_request);
  if (status != BRAID_RT_OK)
    return status;
  return broadcast(comm, buf, count, root, BRAID_RT_F64, stream, out_request);
}
