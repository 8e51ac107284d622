/*===- barrier.c - barrier over MPI --------------------------------------===*/
/* The entry point and its checks: common/backend/collectives.c. */

#include "internal.h"

braid_rt_status_t braid_rt_backend_barrier(braid_rt_comm_t *comm,
                                           braid_rt_stream_t *stream) {
  (void)stream;
  braid_rt_request_t stack, *req;
  braid_rt_status_t status = braid_rt_request_begin(
      comm, NULL, &stack, "barrier", NULL, 0, -1, 0, &req);
  if (status != BRAID_RT_OK)
    return status;
  int code = MPI_Ibarrier(comm->mpi, &req->mpi);
  return braid_rt_request_finish(req, NULL, code, "MPI_Ibarrier");
}
