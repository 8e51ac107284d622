/*===- broadcast.c - broadcast over MPI ----------------------------------===*/
/* The entry points and their checks: common/backend/collectives.c. */

#include "internal.h"

braid_rt_status_t braid_rt_backend_broadcast(braid_rt_comm_t *comm, void *buf,
                                             size_t count, int root,
                                             braid_rt_dtype_t type,
                                             braid_rt_stream_t *stream,
                                             braid_rt_request_t **out_request) {
  (void)stream;
  braid_rt_request_t stack, *req;
  braid_rt_status_t status = braid_rt_request_begin(
      comm, out_request, &stack, "broadcast", type.name, count, -1, 0, &req);
  if (status != BRAID_RT_OK)
    return status;
  req->bytes = count * type.bytes;
  req->wire_bytes =
      type.bytes * braid_rt_ring_sent(BRAID_RT_RING_BROADCAST, count,
                                      comm->rank, comm->size, root);
  int code = MPI_Ibcast(buf, (int)count, type.mpi, root, comm->mpi, &req->mpi);
  return braid_rt_request_finish(req, out_request, code, "MPI_Ibcast");
}
