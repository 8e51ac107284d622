/*===- all_reduce.c - all_reduce over MPI --------------------------------===*/
/* The entry points and their checks: common/backend/collectives.c. */

#include "internal.h"

braid_rt_status_t braid_rt_backend_all_reduce_sum(
    braid_rt_comm_t *comm, void *buf, size_t count, braid_rt_dtype_t type,
    braid_rt_stream_t *stream, braid_rt_request_t **out_request) {
  (void)stream;
  braid_rt_request_t stack, *req;
  braid_rt_status_t status = braid_rt_request_begin(
      comm, out_request, &stack, "all_reduce", type.name, count, -1, 0, &req);
  if (status != BRAID_RT_OK)
    return status;
  req->bytes = count * type.bytes;
  req->wire_bytes =
      type.bytes * braid_rt_ring_sent(BRAID_RT_RING_ALL_REDUCE, count,
                                      comm->rank, comm->size, 0);
  int code = MPI_Iallreduce(MPI_IN_PLACE, buf, (int)count, type.mpi, MPI_SUM,
                            comm->mpi, &req->mpi);
  return braid_rt_request_finish(req, out_request, code, "MPI_Iallreduce");
}
