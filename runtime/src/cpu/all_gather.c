/*===- all_gather.c - all_gather over MPI --------------------------------===*/
/* The entry points and their checks: common/backend/collectives.c. */

#include "internal.h"

braid_rt_status_t
braid_rt_backend_all_gather(braid_rt_comm_t *comm, const void *send, void *recv,
                            size_t send_count, braid_rt_dtype_t type,
                            braid_rt_stream_t *stream,
                            braid_rt_request_t **out_request) {
  (void)stream;
  braid_rt_request_t stack, *req;
  braid_rt_status_t status =
      braid_rt_request_begin(comm, out_request, &stack, "all_gather", type.name,
                             send_count, -1, 0, &req);
  if (status != BRAID_RT_OK)
    return status;
  req->bytes = (size_t)comm->size * send_count * type.bytes;
  req->wire_bytes =
      type.bytes * braid_rt_ring_sent(BRAID_RT_RING_ALL_GATHER, send_count,
                                      comm->rank, comm->size, 0);
  int code = MPI_Iallgather(send, (int)send_count, type.mpi, recv,
                            (int)send_count, type.mpi, comm->mpi, &req->mpi);
  return braid_rt_request_finish(req, out_request, code, "MPI_Iallgather");
}
