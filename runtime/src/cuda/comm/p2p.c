/*===- p2p.c - Point-to-point send and receive over NCCL -----------------===*/
/*
 * NCCL matches a receive with the next send from the same peer on the same
 * communicator; it has no tags. Tags are checked for range, as on every
 * backend (common/backend/collectives.c, with the other argument checks),
 * and name the transfer in messages, but do not reorder messages: between
 * two ranks, receives must be waited for in the order of their sends.
 * request.c defers started transfers until a wait needs them and issues
 * them grouped (ncclGroupStart/End), so that a pipeline stage's receives
 * started early do not hold up its sends.
 */

#include "internal.h"

braid_rt_status_t braid_rt_backend_transfer(int is_send, braid_rt_comm_t *comm,
                                            void *buf, size_t count, int peer,
                                            int tag, braid_rt_dtype_t type,
                                            braid_rt_stream_t *stream,
                                            braid_rt_request_t **out_request) {
  return braid_rt_p2p_enqueue(comm, stream, is_send, buf, count, peer, tag,
                              type, out_request);
}
