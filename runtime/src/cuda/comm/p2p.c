/*===- p2p.c - Point-to-point send and receive over NCCL -----------------===*/
/*
 * NCCL matches a receive with the next send from the same peer on the same
 * communicator; it has no tags. Tags are checked for range, as on every
 * backend, and name the transfer in messages, but do not reorder messages:
 * between two ranks, receives must be waited for in the order of their
 * sends. request.c defers started transfers until a wait needs them and
 * issues them grouped (ncclGroupStart/End), so that a pipeline stage's
 * receives started early do not hold up its sends.
 */

#include "internal.h"

#include <stdint.h>

/* The bound of the API, which is MPI's guaranteed minimum. */
#define MAX_TAG 32767

/* The body of all eight entry points: a send when `is_send`, blocking when
   out_request is NULL. */
static braid_rt_status_t transfer(int is_send, braid_rt_comm_t *comm, void *buf,
                                  size_t count, int peer, int tag,
                                  braid_rt_dtype_t type,
                                  braid_rt_stream_t *stream,
                                  braid_rt_request_t **out_request) {
  const char *op = is_send ? "send" : "recv";
  braid_rt_status_t status =
      braid_rt_check_op(comm, stream, op, count, buf, "buf");
  if (status != BRAID_RT_OK)
    return status;
  if (peer < 0 || peer >= comm->size)
    return braid_rt_fail(comm->ctx, BRAID_RT_INVALID_ARGUMENT,
                         "%s over %s: peer %d is not in 0..%d", op, comm->name,
                         peer, comm->size - 1);
  if (tag < 0 || tag > MAX_TAG)
    return braid_rt_fail(comm->ctx, BRAID_RT_INVALID_ARGUMENT,
                         "%s over %s: tag %d is not in 0..%d", op, comm->name,
                         tag, MAX_TAG);
  return braid_rt_p2p_enqueue(comm, stream, is_send, buf, count, peer, tag,
                              type, out_request);
}

/* transfer() serves both directions and so takes a non-const buffer; a send
   only reads it. */
#define SEND_BUF(buf) ((void *)(uintptr_t)(buf))

braid_rt_status_t braid_rt_send_f32(braid_rt_comm_t *comm, const float *buf,
                                    size_t count, int peer, int tag,
                                    braid_rt_stream_t *stream) {
  return transfer(1, comm, SEND_BUF(buf), count, peer, tag, BRAID_RT_F32,
                  stream, NULL);
}

braid_rt_status_t braid_rt_send_f64(braid_rt_comm_t *comm, const double *buf,
                                    size_t count, int peer, int tag,
                                    braid_rt_stream_t *stream) {
  return transfer(1, comm, SEND_BUF(buf), count, peer, tag, BRAID_RT_F64,
                  stream, NULL);
}

braid_rt_status_t braid_rt_recv_f32(braid_rt_comm_t *comm, float *buf,
                                    size_t count, int peer, int tag,
                                    braid_rt_stream_t *stream) {
  return transfer(0, comm, buf, count, peer, tag, BRAID_RT_F32, stream, NULL);
}

braid_rt_status_t braid_rt_recv_f64(braid_rt_comm_t *comm, double *buf,
                                    size_t count, int peer, int tag,
                                    braid_rt_stream_t *stream) {
  return transfer(0, comm, buf, count, peer, tag, BRAID_RT_F64, stream, NULL);
}

braid_rt_status_t braid_rt_send_f32_start(braid_rt_comm_t *comm,
                                          const float *buf, size_t count,
                                          int peer, int tag,
                                          braid_rt_stream_t *stream,
                                          braid_rt_request_t **out_request) {
  braid_rt_status_t status =
      braid_rt_check_out_request(comm, "send", out_request);
  if (status != BRAID_RT_OK)
    return status;
  return transfer(1, comm, SEND_BUF(buf), count, peer, tag, BRAID_RT_F32,
                  stream, out_request);
}

braid_rt_status_t braid_rt_send_f64_start(braid_rt_comm_t *comm,
                                          const double *buf, size_t count,
                                          int peer, int tag,
                                          braid_rt_stream_t *stream,
                                          braid_rt_request_t **out_request) {
  braid_rt_status_t status =
      braid_rt_check_out_request(comm, "send", out_request);
  if (status != BRAID_RT_OK)
    return status;
  return transfer(1, comm, SEND_BUF(buf), count, peer, tag, BRAID_RT_F64,
                  stream, out_request);
}

braid_rt_status_t braid_rt_recv_f32_start(braid_rt_comm_t *comm, float *buf,
                                          size_t count, int peer, int tag,
                                          braid_rt_stream_t *stream,
                                          braid_rt_request_t **out_request) {
  braid_rt_status_t status =
      braid_rt_check_out_request(comm, "recv", out_request);
  if (status != BRAID_RT_OK)
    return status;
  return transfer(0, comm, buf, count, peer, tag, BRAID_RT_F32, stream,
                  out_request);
}

braid_rt_status_t braid_rt_recv_f64_start(braid_rt_comm_t *comm, double *buf,
                                          size_t count, int peer, int tag,
                                          braid_rt_stream_t *stream,
                                          braid_rt_request_t **out_request) {
  braid_rt_status_t status =
      braid_rt_check_out_request(comm, "recv", out_request);
  if (status != BRAID_RT_OK)
    return status;
  return transfer(0, comm, buf, count, peer, tag, BRAID_RT_F64, stream,
                  out_request);
}
