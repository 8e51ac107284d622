/*===- reduce_scatter.c - reduce_scatter over MPI ------------------------===*/
/* The entry points and their checks: common/backend/collectives.c. */

#include "internal.h"

braid_rt_status_t braid_rt_backend_reduce_scatter_sum(
    braid_rt_comm_t *comm, const void *send, void *recv, size_t recv_count,
    braid_rt_dtype_t type, braid_rt_stream_t *stream,
    braid_rt_request_t **out_request) {
  (void)stream;
  braid_rt_request_t stack, *req;
  braid_rt_status_t status =
      braid_rt_request_begin(comm, out_request, &stack, "reduce_scatter",
                             type.name, recv_count, -1, 0, &req);
  if (status != BRAID_RT_OK)
    return status;
  req->bytes = (size_t)comm->size * recv_count * type.bytes;
  req->wire_bytes =
      type.bytes * braid_rt_ring_sent(BRAID_RT_RING_REDUCE_SCATTER, recv_count,
                                      comm->rank, comm->size, 0);
  int code = MPI_Ireduce_scatter_block(send, recv, (int)recv_count, type.mpi,
                                       MPI_SUM, comm->mpi, &req->mpi);
  return braid_rt_request_finish(req, out_request, code,
                                 "MPI_Ireduce_scatter_block");
}
