/*===- collectives.c - The program's collectives on views of its tensors -===*/
/*
 * A collective along a split dimension moves blocks that are not
 * contiguous: the dimension's `size` blocks are brought to the front (a
 * transpose of [outer][size][chunk] to [size][outer][chunk]) into a staging
 * buffer before reduce_scatter and all_to_all send them, and brought back
 * after all_gather and all_to_all receive them. Both moves are kernels on
 * the program's stream, so they run where the data lives.
 */

#define BRAID_RT_PROGRAM_SPMD
#include "internal.h"

#include "braid/rt/trace.h"

#include <stdlib.h>
#include <string.h>

void braid_rt_program_pack_f32(const float *in, int64_t outer, int64_t size,
                               int64_t chunk, float *tmp) {
  const int64_t shape[3] = {outer, size, chunk}, perm[3] = {1, 0, 2};
  braid_rt_transpose_f32(braid_rt_program_stream(), in, 3, shape, perm, tmp);
}

/* `*buffer` with room for `count` floats, (re)allocated when smaller. */
static float *staging(float **buffer, int64_t *have, int64_t count) {
  if (*buffer && *have >= count)
    return *buffer;
  braid_rt_program_free(*buffer);
  *buffer = braid_rt_program_alloc_f32(count);
  *have = count;
  return *buffer;
}

/* The body of both forms: the runtime's blocking operation when `blocking`
   (so that a trace shows the rank waiting from its issue), else its _start
   form with the request in p. */
static void issue(braid_rt_program_collective_t op, int64_t mask,
                  const float *in, int64_t count, int64_t in_outer,
                  int64_t in_chunk, int64_t out_outer, int64_t out_chunk,
                  int64_t root, float *out, braid_rt_program_pending_t *p,
                  const char *where, int blocking) {
  braid_rt_comm_t *comm = braid_rt_program_comm(mask);
  int64_t size = braid_rt_comm_size(comm);
  braid_rt_status_t status = BRAID_RT_OK;
  p->out = NULL;
  p->where = where;
  p->request = NULL;
  braid_rt_request_t **request = blocking ? NULL : &p->request;
  switch (op) {
  case BRAID_RT_PROGRAM_ALL_REDUCE:
    braid_rt_copy_f32(braid_rt_program_stream(), in, count, out);
    status = blocking
                 ? braid_rt_all_reduce_sum_f32(comm, out, (size_t)count, NULL)
                 : braid_rt_all_reduce_sum_f32_start(comm, out, (size_t)count,
                                                     NULL, request);
    break;
  case BRAID_RT_PROGRAM_BROADCAST:
    braid_rt_copy_f32(braid_rt_program_stream(), in, count, out);
    status = blocking ? braid_rt_broadcast_f32(comm, out, (size_t)count,
                                               (int)root, NULL)
                      : braid_rt_broadcast_f32_start(comm, out, (size_t)count,
                                                     (int)root, NULL, request);
    break;
  case BRAID_RT_PROGRAM_ALL_GATHER: {
    float *recv = out_outer == 1
                      ? out
                      : staging(&p->recv, &p->recv_count, size * count);
    if (recv != out) {
      p->out = out;
      p->outer = out_outer;
      p->size = size;
      p->chunk = out_chunk;
    }
    status = blocking
                 ? braid_rt_all_gather_f32(comm, in, recv, (size_t)count, NULL)
                 : braid_rt_all_gather_f32_start(comm, in, recv, (size_t)count,
                                                 NULL, request);
    break;
  }
  case BRAID_RT_PROGRAM_REDUCE_SCATTER: {
    float *send = staging(&p->send, &p->send_count, count);
    braid_rt_program_pack_f32(in, in_outer, size, in_chunk, send);
    status = blocking
                 ? braid_rt_reduce_scatter_sum_f32(comm, send, out,
                                                   (size_t)(count / size), NULL)
                 : braid_rt_reduce_scatter_sum_f32_start(
                       comm, send, out, (size_t)(count / size), NULL, request);
    break;
  }
  case BRAID_RT_PROGRAM_ALL_TO_ALL: {
    float *send = staging(&p->send, &p->send_count, count);
    braid_rt_program_pack_f32(in, in_outer, size, in_chunk, send);
    float *recv = staging(&p->recv, &p->recv_count, count);
    p->out = out;
    p->outer = out_outer;
    p->size = size;
    p->chunk = out_chunk;
    status = blocking ? braid_rt_all_to_all_f32(comm, send, recv,
                                                (size_t)(count / size), NULL)
                      : braid_rt_all_to_all_f32_start(comm, send, recv,
                                                      (size_t)(count / size),
                                                      NULL, request);
    break;
  }
  }
  braid_rt_program_spmd_check(status, where);
}

void braid_rt_program_collective_start_f32(
    braid_rt_program_collective_t op, int64_t mask, const float *in,
    int64_t count, int64_t in_outer, int64_t in_chunk, int64_t out_outer,
    int64_t out_chunk, int64_t root, float *out, braid_rt_program_pending_t *p,
    const char *where) {
  issue(op, mask, in, count, in_outer, in_chunk, out_outer, out_chunk, root,
        out, p, where, 0);
}

void braid_rt_program_wait(braid_rt_program_pending_t *p) {
  braid_rt_request_t *request = p->request;
  p->request = NULL;
  braid_rt_program_spmd_check(braid_rt_request_wait(request), p->where);
  if (!p->out)
    return;
  /* out[o][i][c] = recv[i][o][c]: the received blocks back in place. */
  const int64_t shape[3] = {p->size, p->outer, p->chunk}, perm[3] = {1, 0, 2};
  braid_rt_transpose_f32(braid_rt_program_stream(), p->recv, 3, shape, perm,
                         p->out);
}

int braid_rt_program_progress_policy(const char *env) {
  /* On everywhere unless BRAID_PROGRESS=0. Also where MPI yields the core
     in a call that moves nothing (braid_rt_progress_yields): measured idle
     on 4 ranks over 2 cores, the calls cost less than the overlap they buy
     (docs/runtime.md), once they are spaced out there
     (braid_rt_program_progress_interval). */
  return !(env && strcmp(env, "0") == 0);
}

double braid_rt_program_progress_interval(int yields) {
  /* Often enough for a transfer to move between kernels, not after every
     small op. Where each call hands the core to another rank, 10x further
     apart: ZeRO-3 pipelines on 8 ranks over 2 cores ran 1.8-2.0x slower
     with calls every 20 us than without calls, and about as fast as
     without them at 200 us (docs/runtime.md). */
  return yields ? 200e-6 : 20e-6;
}

int braid_rt_program_progress_enabled(void) {
  static int enabled = -1;
  if (enabled >= 0)
    return enabled;
  if (!braid_rt_program_context())
    return 0;
  enabled = braid_rt_program_progress_policy(getenv("BRAID_PROGRESS"));
  return enabled;
}

void braid_rt_program_progress(void) {
  static double last_s, interval_s = -1;
  braid_rt_context_t *ctx = braid_rt_program_context();
  if (!ctx || !braid_rt_program_progress_enabled())
    return;
  if (interval_s < 0) {
    int yields = 0;
    braid_rt_program_spmd_check(braid_rt_progress_yields(ctx, &yields),
                                "progress of started collectives");
    interval_s = braid_rt_program_progress_interval(yields);
  }
  double now = braid_rt_now_seconds();
  if (now - last_s < interval_s)
    return;
  last_s = now;
  braid_rt_program_spmd_check(braid_rt_progress(ctx, NULL),
                              "progress of started collectives");
}

void braid_rt_program_collective_f32(
    braid_rt_program_collective_t op, int64_t mask, const float *in,
    int64_t count, int64_t in_outer, int64_t in_chunk, int64_t out_outer,
    int64_t out_chunk, int64_t root, float *out, braid_rt_program_pending_t *p,
    const char *where) {
  issue(op, mask, in, count, in_outer, in_chunk, out_outer, out_chunk, root,
        out, p, where, 1);
  braid_rt_program_wait(p);
}

void braid_rt_program_all_slice_f32(int64_t mask, const float *in,
                                    int64_t outer, int64_t chunk, float *out) {
  int64_t size = braid_rt_program_group_size(mask);
  int64_t pos = braid_rt_program_group_position(mask);
  const int64_t in_shape[3] = {outer, size, chunk}, start[3] = {0, pos, 0};
  const int64_t out_shape[3] = {outer, 1, chunk};
  braid_rt_slice_f32(braid_rt_program_stream(), in, 3, in_shape, start, NULL,
                     out_shape, out);
}
