/*===- compressed.c - Gradient reductions sent as 16 bits ----------------===*/
/*
 * The lowering of a collective marked `braid.compress` (braid-compress-
 * gradients): the runtime's bf16 / fp16 reductions with f32 accumulation,
 * on the views braid_rt_program_collective_f32 takes. They are blocking, so
 * a started one completes here and its wait has nothing to do.
 */

#define BRAID_RT_PROGRAM_SPMD
#include "internal.h"

#include <stdio.h>

void braid_rt_program_collective_compressed_f32(
    braid_rt_program_collective_t op, int64_t mask, const float *in,
    int64_t count, int64_t in_outer, int64_t in_chunk, int64_t format,
    float *out, braid_rt_program_pending_t *p, const char *where) {
  braid_rt_comm_t *comm = braid_rt_program_comm(mask);
  int64_t size = braid_rt_comm_size(comm);
  p->request = NULL;
  p->out = NULL;
  p->where = where;
  braid_rt_status_t status = BRAID_RT_INVALID_ARGUMENT;
  if (op == BRAID_RT_PROGRAM_ALL_REDUCE) {
    braid_rt_copy_f32(braid_rt_program_stream(), in, count, out);
    status =
        format == 1
            ? braid_rt_all_reduce_sum_f32_as_f16(comm, out, (size_t)count, NULL)
            : braid_rt_all_reduce_sum_f32_as_bf16(comm, out, (size_t)count,
                                                  NULL);
  } else if (op == BRAID_RT_PROGRAM_REDUCE_SCATTER) {
    if (!p->send || p->send_count < count) {
      braid_rt_program_free(p->send);
      p->send = braid_rt_program_alloc_f32(count);
      p->send_count = count;
    }
    braid_rt_program_pack_f32(in, in_outer, size, in_chunk, p->send);
    size_t block = (size_t)(count / size);
    status = format == 1
                 ? braid_rt_reduce_scatter_sum_f32_as_f16(comm, p->send, out,
                                                          block, NULL)
                 : braid_rt_reduce_scatter_sum_f32_as_bf16(comm, p->send, out,
                                                           block, NULL);
  } else {
    fprintf(stderr,
            "error: %s: only all_reduce and reduce_scatter are "
            "compressed\n",
            where);
  }
  braid_rt_program_spmd_check(status, where);
}

void braid_rt_program_powersgd_f32(int64_t mask, const float *in, int64_t batch,
                                   int64_t rows, int64_t cols, int64_t rank,
                                   float *q, float *error, float *out,
                                   braid_rt_program_pending_t *p,
                                   const char *where) {
  braid_rt_comm_t *comm = braid_rt_program_comm(mask);
  p->request = NULL;
  p->out = NULL;
  p->where = where;
  int64_t matrix = rows * cols;
  braid_rt_copy_f32(braid_rt_program_stream(), in, batch * matrix, out);
  for (int64_t i = 0; i < batch; ++i)
    braid_rt_program_spmd_check(
        braid_rt_powersgd_all_reduce_f32(
            comm, out + i * matrix, (size_t)rows, (size_t)cols, (size_t)rank,
            q + i * cols * rank, error + i * matrix, NULL),
        where);
}

void braid_rt_program_powersgd_reduce_scatter_f32(
    int64_t mask, const float *in, int64_t batch, int64_t rows, int64_t cols,
    int64_t rank, float *q, float *error, int64_t outer, int64_t chunk,
    float *out, braid_rt_program_pending_t *p, const char *where) {
  int64_t count = batch * rows * cols;
  if (!p->send || p->send_count < count) {
    braid_rt_program_free(p->send);
    p->send = braid_rt_program_alloc_f32(count);
    p->send_count = count;
  }
  braid_rt_program_powersgd_f32(mask, in, batch, rows, cols, rank, q, error,
                                p->send, p, where);
  braid_rt_program_all_slice_f32(mask, p->send, outer, chunk, out);
}
