/*===- compressed.c - Compressed sums: not on the CUDA backend yet --------===*/
/*
 * The bf16 / fp16 reductions and PowerSGD of collectives.h run on the CPU
 * backend (runtime/src/cpu/compressed.c, powersgd.c). Here they fail with
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

braid_rt_status_t braid_rt_powersgd_all_reduce_f32(braid_rt_comm_t *comm,
                                                   float *grad, size_t rows,
                                                   size_t cols, size_t rank,
                                                   float *q, float *error,
                                                   braid_rt_stream_t *stream) {
  (void)grad, (void)rows, (void)cols, (void)rank, (void)q, (void)error,
      (void)stream;
  return braid_rt_fail(comm ? comm->ctx : NULL, BRAID_RT_UNSUPPORTED,
                       "braid_rt_powersgd_all_reduce_f32: PowerSGD is not "
                       "implemented on the CUDA backend yet");
}
