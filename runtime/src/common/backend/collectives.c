/*===- collectives.c - The collectives' entry points, on every backend ---===*/
/*
 * Every public collective and transfer of collectives.h: the argument
 * checks, which are the same on every backend (and so are their messages),
 * then the backend's operation (backend.h). Compiled into each backend.
 */

#include "internal.h"

#include <stdint.h>

/* MPI guarantees at least this tag bound on every implementation; it is
   the API's bound on every backend. */
#define MAX_TAG 32767

/*--- all_reduce -----------------------------------------------------------*/

static braid_rt_status_t all_reduce_sum(braid_rt_comm_t *comm, void *buf,
                                        size_t count, braid_rt_dtype_t type,
                                        braid_rt_stream_t *stream,
                                        braid_rt_request_t **out_request) {
  braid_rt_status_t status =
      braid_rt_check_op(comm, stream, "all_reduce", count, buf, "buf");
  if (status != BRAID_RT_OK)
    return status;
  return braid_rt_backend_all_reduce_sum(comm, buf, count, type, stream,
                                         out_request);
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

/*--- all_gather -----------------------------------------------------------*/

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
  return braid_rt_backend_all_gather(comm, send, recv, send_count, type, stream,
                                     out_request);
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

/*--- reduce_scatter -------------------------------------------------------*/

/* reduce_scatter's checks, also of the 16-bit one: the size x recv_count
   elements of `send` (of `elem_bytes`) and the recv_count of `recv`. */
static braid_rt_status_t
check_reduce_scatter(braid_rt_comm_t *comm, braid_rt_stream_t *stream,
                     const char *what, const void *send, void *recv,
                     size_t recv_count, size_t elem_bytes) {
  braid_rt_status_t status =
      braid_rt_check_op(comm, stream, what, recv_count, send, "send");
  if (status == BRAID_RT_OK)
    status = braid_rt_check_op(comm, stream, what, recv_count, recv, "recv");
  if (status == BRAID_RT_OK)
    status = braid_rt_check_disjoint(
        comm, what, send, (size_t)comm->size * recv_count * elem_bytes, recv,
        recv_count * elem_bytes);
  return status;
}

static braid_rt_status_t reduce_scatter_sum(braid_rt_comm_t *comm,
                                            const void *send, void *recv,
                                            size_t recv_count,
                                            braid_rt_dtype_t type,
                                            braid_rt_stream_t *stream,
                                            braid_rt_request_t **out_request) {
  braid_rt_status_t status = check_reduce_scatter(
      comm, stream, "reduce_scatter", send, recv, recv_count, type.bytes);
  if (status != BRAID_RT_OK)
    return status;
  return braid_rt_backend_reduce_scatter_sum(comm, send, recv, recv_count, type,
                                             stream, out_request);
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

/*--- broadcast ------------------------------------------------------------*/

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
  return braid_rt_backend_broadcast(comm, buf, count, root, type, stream,
                                    out_request);
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

/*--- all_to_all -----------------------------------------------------------*/

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
  return braid_rt_backend_all_to_all(comm, send, recv, block_count, type,
                                     stream, out_request);
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

/*--- barrier --------------------------------------------------------------*/

braid_rt_status_t braid_rt_barrier(braid_rt_comm_t *comm,
                                   braid_rt_stream_t *stream) {
  braid_rt_status_t status =
      braid_rt_check_op(comm, stream, "barrier", 0, NULL, "");
  if (status != BRAID_RT_OK)
    return status;
  return braid_rt_backend_barrier(comm, stream);
}

/*--- send and recv --------------------------------------------------------*/

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
  return braid_rt_backend_transfer(is_send, comm, buf, count, peer, tag, type,
                                   stream, out_request);
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

/*--- compressed sums ------------------------------------------------------*/

static braid_rt_status_t all_reduce_16bit(braid_rt_comm_t *comm, float *buf,
                                          size_t count,
                                          braid_rt_stream_t *stream,
                                          int format) {
  braid_rt_status_t status =
      braid_rt_check_op(comm, stream, "all_reduce (16-bit)", count, buf, "buf");
  /* A group of one sends nothing and rounds nothing. */
  if (status != BRAID_RT_OK || comm->size == 1 || count == 0)
    return status;
  return braid_rt_backend_all_reduce_sum_f32_16bit(comm, buf, count, stream,
                                                   format);
}

static braid_rt_status_t
reduce_scatter_16bit(braid_rt_comm_t *comm, const float *send, float *recv,
                     size_t recv_count, braid_rt_stream_t *stream, int format) {
  braid_rt_status_t status =
      check_reduce_scatter(comm, stream, "reduce_scatter (16-bit)", send, recv,
                           recv_count, sizeof(float));
  if (status != BRAID_RT_OK || recv_count == 0)
    return status;
  return braid_rt_backend_reduce_scatter_sum_f32_16bit(
      comm, send, recv, recv_count, stream, format);
}

braid_rt_status_t
braid_rt_all_reduce_sum_f32_as_bf16(braid_rt_comm_t *comm, float *buf,
                                    size_t count, braid_rt_stream_t *stream) {
  return all_reduce_16bit(comm, buf, count, stream, 0);
}

braid_rt_status_t
braid_rt_all_reduce_sum_f32_as_f16(braid_rt_comm_t *comm, float *buf,
                                   size_t count, braid_rt_stream_t *stream) {
  return all_reduce_16bit(comm, buf, count, stream, 1);
}

braid_rt_status_t braid_rt_reduce_scatter_sum_f32_as_bf16(
    braid_rt_comm_t *comm, const float *send, float *recv, size_t recv_count,
    braid_rt_stream_t *stream) {
  return reduce_scatter_16bit(comm, send, recv, recv_count, stream, 0);
}

braid_rt_status_t
braid_rt_reduce_scatter_sum_f32_as_f16(braid_rt_comm_t *comm, const float *send,
                                       float *recv, size_t recv_count,
                                       braid_rt_stream_t *stream) {
  return reduce_scatter_16bit(comm, send, recv, recv_count, stream, 1);
}

braid_rt_status_t braid_rt_powersgd_all_reduce_f32(braid_rt_comm_t *comm,
                                                   float *grad, size_t rows,
                                                   size_t cols, size_t rank,
                                                   float *q, float *error,
                                                   braid_rt_stream_t *stream) {
  const char *op = "powersgd_all_reduce";
  braid_rt_status_t status =
      braid_rt_check_op(comm, stream, op, rows * cols, grad, "grad");
  if (status != BRAID_RT_OK)
    return status;
  if (rank == 0 || rank > rows || rank > cols || !q)
    return braid_rt_fail(comm->ctx, BRAID_RT_INVALID_ARGUMENT,
                         "%s over %s: rank %zu must be in 1..min(%zu, %zu) "
                         "and q given",
                         op, comm->name, rank, rows, cols);
  /* The state lives where the gradient does (device memory on CUDA). */
  status = braid_rt_backend_check_buffer(comm, op, q, "q");
  if (status == BRAID_RT_OK && error)
    status = braid_rt_backend_check_buffer(comm, op, error, "error");
  if (status != BRAID_RT_OK)
    return status;
  return braid_rt_backend_powersgd_all_reduce_f32(comm, grad, rows, cols, rank,
                                                  q, error, stream);
}
