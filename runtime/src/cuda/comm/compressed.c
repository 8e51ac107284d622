/*===- compressed.c - Compressed sums: not on the CUDA backend yet --------===*/
/*
 * The bf16 / fp16 reductions of collectives.h are a ring over MPI on the
 * CPU backend (runtime/src/cpu/compressed.c). Here they fail with
 * BRAID_RT_UNSUPPORTED, so that the API links and a caller learns why.
 */

#include "internal.h"

static braid_rt_status_t unsupported(braid_rt_comm_t *comm, const char *op) {
  return braid_rt_fail(comm ? comm->ctx : NULL, BRAID_RT_UNSUPPORTED,
                       "%s: 16-bit compressed reductions are not implemented "
                       "on the CUDA backend yet",
                       op);
}

braid_rt_status_t
braid_rt_all_reduce_sum_f32_as_bf16(braid_rt_comm_t *comm, float *buf,
                                    size_t count, braid_rt_stream_t *stream) {
  (void)buf, (void)count, (void)stream;
  return unsupported(comm, "braid_rt_all_reduce_sum_f32_as_bf16");
}

braid_rt_status_t
braid_rt_all_reduce_sum_f32_as_f16(braid_rt_comm_t *comm, float *buf,
                                   size_t count, braid_rt_stream_t *stream) {
  (void)buf, (void)count, (void)stream;
  return unsupported(comm, "braid_rt_all_reduce_sum_f32_as_f16");
}

braid_rt_status_t braid_rt_reduce_scatter_sum_f32_as_bf16(
    braid_rt_comm_t *comm, const float *send, float *recv, size_t recv_count,
    braid_rt_stream_t *stream) {
  (void)send, (void)recv, (void)recv_count, (void)stream;
  return unsupported(comm, "braid_rt_reduce_scatter_sum_f32_as_bf16");
}

braid_rt_status_t
braid_rt_reduce_scatter_sum_f32_as_f16(braid_rt_comm_t *comm, const float *send,
                                       float *recv, size_t recv_count,
                                       braid_rt_stream_t *stream) {
  (void)send, (void)recv, (void)recv_count, (void)stream;
  return unsupported(comm, "braid_rt_reduce_scatter_sum_f32_as_f16");
}
