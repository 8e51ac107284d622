/*===- p2p.c - Point-to-point send and receive over MPI ------------------===*/
/* The entry points and their checks (peer, tag 0..32767):
   common/backend/collectives.c. */

#include "internal.h"

braid_rt_status_t braid_rt_backend_transfer(int is_send, braid_rt_comm_t *comm,
                                            void *buf, size_t count, int peer,
                                            int tag, braid_rt_dtype_t type,
                                            braid_rt_stream_t *stream,
                                            braid_rt_request_t **out_request) {
  (void)stream;
  const char *op = is_send ? "send" : "recv";
  braid_rt_request_t stack, *req;
  braid_rt_status_t status = braid_rt_request_begin(
      comm, out_request, &stack, op, type.name, count, peer, tag, &req);
  if (status != BRAID_RT_OK)
    return status;
  req->bytes = count * type.bytes;
  req->wire_bytes = is_send ? req->bytes : 0;
  int code = is_send ? MPI_Isend(buf, (int)count, type.mpi, peer, tag,
                                 comm->mpi, &req->mpi)
                     : MPI_Irecv(buf, (int)count, type.mpi, peer, tag,
                                 comm->mpi, &req->mpi);
  return braid_rt_request_finish(req, out_request, code,
                                 is_send ? "MPI_Isend" : "MPI_Irecv");
}
