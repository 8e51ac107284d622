/*===- pipeline.c - Transfers between pipeline stages --------------------===*/
/*
 * The step's requests in one list: its receives first (started when the
 * step begins), then its sends; braid_rt_program_pp_wait_all completes them
 * all and starts the next step's list.
 */

#define BRAID_RT_PROGRAM_SPMD
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>

typedef struct {
  braid_rt_request_t **requests; /* this step's receives, then its sends */
  int64_t count, capacity;
  int64_t receives; /* requests[0, receives) */
} pp_transfers_t;

static pp_transfers_t transfers;

int64_t braid_rt_program_pp_stage(int64_t mask) {
  return braid_rt_program_group_position(mask);
}

static braid_rt_request_t **next_slot(void) {
  pp_transfers_t *p = &transfers;
  if (p->count == p->capacity) {
    p->capacity = p->capacity ? 2 * p->capacity : 64;
    p->requests = (braid_rt_request_t **)realloc(
        p->requests, (size_t)p->capacity * sizeof(braid_rt_request_t *));
    if (!p->requests) {
      fprintf(stderr, "error: out of memory for pipeline transfers\n");
      exit(1);
    }
  }
  return &p->requests[p->count++];
}

void braid_rt_program_pp_recv_start_f32(int64_t mask, float *buf,
                                        int64_t count, int64_t peer,
                                        int64_t tag, const char *where) {
  pp_transfers_t *p = &transfers;
  if (p->count != p->receives) {
    fprintf(stderr, "error: %s: a pipeline receive starts after a send of "
                    "the same step\n", where);
    exit(1);
  }
  braid_rt_request_t **slot = next_slot();
  ++p->receives;
  braid_rt_program_spmd_check(
      braid_rt_recv_f32_start(braid_rt_program_comm(mask), buf, (size_t)count,
                              (int)peer, (int)tag, NULL, slot),
      where);
}

void braid_rt_program_pp_recv_wait(int64_t index, const char *where) {
  pp_transfers_t *p = &transfers;
  if (index < 0 || index >= p->receives) {
    fprintf(stderr, "error: %s: no pipeline receive %lld in this step\n",
            where, (long long)index);
    exit(1);
  }
  braid_rt_request_t **slot = &p->requests[index];
  braid_rt_program_spmd_check(braid_rt_request_wait(*slot), where);
  *slot = NULL; /* waited: a no-op for braid_rt_program_pp_wait_all */
}

void braid_rt_program_pp_send_f32(int64_t mask, const float *buf,
                                  int64_t count, int64_t peer, int64_t tag,
                                  const char *where) {
  braid_rt_program_spmd_check(
      braid_rt_send_f32_start(braid_rt_program_comm(mask), buf, (size_t)count,
                              (int)peer, (int)tag, NULL, next_slot()),
      where);
}

void braid_rt_program_pp_wait_all(const char *where) {
  pp_transfers_t *p = &transfers;
  for (int64_t i = 0; i < p->count; ++i)
    braid_rt_program_spmd_check(braid_rt_request_wait(p->requests[i]), where);
  p->count = 0;
  p->receives = 0;
}

int braid_rt_program_pp_holds(int64_t mask, int64_t stages) {
  return (int)((stages >> braid_rt_program_pp_stage(mask)) & 1);
}

void braid_rt_program_pp_transfer_f32(int64_t mask, const float *src,
                                      float *dst, int64_t count, int64_t from,
                                      int64_t to, const char *where) {
  /* Above every step's tags (braid-lower-to-emitc keeps them under it). */
  const int tag = 32767;
  int64_t stage = braid_rt_program_pp_stage(mask);
  braid_rt_comm_t *comm = braid_rt_program_comm(mask);
  braid_rt_request_t *request = NULL;
  if (stage == from)
    braid_rt_program_spmd_check(braid_rt_send_f32_start(comm, src,
                                                        (size_t)count, (int)to,
                                                        tag, NULL, &request),
                                where);
  else if (stage == to)
    braid_rt_program_spmd_check(
        braid_rt_recv_f32_start(comm, dst, (size_t)count, (int)from, tag, NULL,
                                &request),
        where);
  else
    return;
  braid_rt_program_spmd_check(braid_rt_request_wait(request), where);
}

void braid_rt_program_pp_broadcast_f32(int64_t mask, float *buf,
                                       int64_t count, int64_t owner,
                                       const char *where) {
  braid_rt_program_spmd_check(
      braid_rt_broadcast_f32(braid_rt_program_comm(mask), buf, (size_t)count,
                             (int)owner, NULL),
      where);
}

void braid_rt_program_pp_local_f32(int64_t mask, const float *src, float *dst,
                                   int64_t count, int64_t holder) {
  braid_rt_stream_t *stream = braid_rt_program_stream();
  if (braid_rt_program_pp_stage(mask) == holder)
    braid_rt_copy_f32(stream, src, count, dst);
  else
    braid_rt_fill_f32(stream, 0.0f, count, dst);
}

void braid_rt_program_accumulate_mean_f32(float *sum, const float *value,
                                          int64_t count, int64_t index,
                                          int64_t total) {
  braid_rt_stream_t *stream = braid_rt_program_stream();
  const int64_t shape[1] = {count};
  if (index == 0)
    braid_rt_copy_f32(stream, value, count, sum);
  else
    braid_rt_add_f32(stream, sum, value, 1, shape, 1, shape, sum);
  if (index + 1 < total)
    return;
  /* sum *= f32(1 / total): a rank-0 factor broadcast over `sum`. */
  static float *factor;
  float inv = (float)(1.0 / (double)total);
  braid_rt_fill_f32(stream, inv, 1,
                    braid_rt_program_buffer_f32(&factor, 1));
  braid_rt_mul_f32(stream, sum, factor, 1, shape, 0, NULL, sum);
}
