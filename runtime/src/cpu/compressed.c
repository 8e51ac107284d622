/*===- compressed.c - Sums sent as bf16 / fp16, accumulated in f32 -------===*/
/*
 * A ring (Patarasuk and Yuan): the count elements are cut into `size`
 * chunks; in step s of the reduce-scatter half, rank r sends its partial
 * sum of chunk (r - s - 1) mod size to rank r + 1, rounded to 16 bits, and
 * adds the partial of chunk (r - s - 2) mod size that rank r - 1 sends to
 * its own f32 values. After size - 1 steps rank r holds the whole sum of
 * chunk r; the all_reduce rounds it (on r as well, so that every rank ends
 * with the same bits) and passes the chunks round once more.
 *
 * The messages go point to point over the communicator with the largest
 * tag MPI allows (MPI_TAG_UB), above the 0..32767 that braid_rt_send and
 * braid_rt_recv accept, so they never match a caller's messages.
 */

#include "internal.h"

#include "braid/rt/trace.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  uint16_t (*narrow)(float);
  float (*widen)(uint16_t);
  const char *name; /* as messages name the operation */
} wire_t;

static const wire_t BF16 = {braid_rt_f32_to_bf16, braid_rt_bf16_to_f32, "bf16"};
static const wire_t F16 = {braid_rt_f32_to_f16, braid_rt_f16_to_f32, "f16"};

static int ring_tag(braid_rt_comm_t *comm) {
  int *ub = NULL, found = 0;
  if (MPI_Comm_get_attr(comm->mpi, MPI_TAG_UB, &ub, &found) == MPI_SUCCESS &&
      found && ub && *ub > 32767)
    return *ub;
  return 32767;
}

static int wrap(int r, int size) { return ((r % size) + size) % size; }

/* Sends `send_count` 16-bit words to the next rank and receives
   `recv_count` from the previous one, waiting for both with the context's
   timeout. */
static braid_rt_status_t exchange(braid_rt_comm_t *comm, const char *op,
                                  const uint16_t *send, size_t send_count,
                                  uint16_t *recv, size_t recv_count, int tag) {
  int next = wrap(comm->rank + 1, comm->size);
  int prev = wrap(comm->rank - 1, comm->size);
  braid_rt_request_t *rreq = NULL, *sreq = NULL, *req;
  braid_rt_status_t status = braid_rt_request_begin(
      comm, &rreq, NULL, op, "16-bit words", recv_count, prev, tag, &req);
  if (status != BRAID_RT_OK)
    return status;
  req->bytes = recv_count * sizeof(uint16_t);
  status =
      braid_rt_request_finish(req, &rreq,
                              MPI_Irecv(recv, (int)recv_count, MPI_UINT16_T,
                                        prev, tag, comm->mpi, &req->mpi),
                              "MPI_Irecv");
  if (status != BRAID_RT_OK)
    return status;
  status = braid_rt_request_begin(comm, &sreq, NULL, op, "16-bit words",
                                  send_count, next, tag, &req);
  if (status == BRAID_RT_OK) {
    req->bytes = req->wire_bytes = send_count * sizeof(uint16_t);
    status = braid_rt_request_finish(req, &sreq,
                                     MPI_Isend((void *)(uintptr_t)send,
                                               (int)send_count, MPI_UINT16_T,
                                               next, tag, comm->mpi, &req->mpi),
                                     "MPI_Isend");
  }
  braid_rt_status_t recv_status = braid_rt_request_wait(rreq);
  braid_rt_status_t send_status = braid_rt_request_wait(sreq);
  if (status != BRAID_RT_OK)
    return status;
  return recv_status != BRAID_RT_OK ? recv_status : send_status;
}

/* The reduce-scatter half on `acc` (count elements, this rank's f32 values,
   accumulated in place): afterwards acc's chunk `rank` holds the sum.
   `words` has room for two chunks. */
static braid_rt_status_t ring_reduce(braid_rt_comm_t *comm, const char *op,
                                     const wire_t *wire, float *acc,
                                     size_t count, uint16_t *words, int tag) {
  int size = comm->size, rank = comm->rank;
  size_t most = braid_rt_ring_chunk_length(count, size, 0);
  uint16_t *send = words, *recv = words + most;
  for (int s = 0; s + 1 < size; ++s) {
    int out = wrap(rank - s - 1, size), in = wrap(rank - s - 2, size);
    float *from = acc + braid_rt_ring_chunk_begin(count, size, out);
    size_t n_out = braid_rt_ring_chunk_length(count, size, out);
    for (size_t i = 0; i < n_out; ++i)
      send[i] = wire->narrow(from[i]);
    size_t n_in = braid_rt_ring_chunk_length(count, size, in);
    braid_rt_status_t status = exchange(comm, op, send, n_out, recv, n_in, tag);
    if (status != BRAID_RT_OK)
      return status;
    float *to = acc + braid_rt_ring_chunk_begin(count, size, in);
    for (size_t i = 0; i < n_in; ++i)
      to[i] = wire->widen(recv[i]) + to[i];
  }
  return BRAID_RT_OK;
}

braid_rt_status_t braid_rt_backend_all_reduce_sum_f32_16bit(
    braid_rt_comm_t *comm, float *buf, size_t count, braid_rt_stream_t *stream,
    int format) {
  (void)stream;
  const char *op = "all_reduce (16-bit)";
  const wire_t *wire = format ? &F16 : &BF16;
  int size = comm->size, rank = comm->rank, tag = ring_tag(comm);
  uint16_t *words = malloc(
      2 * (braid_rt_ring_chunk_length(count, size, 0) + 1) * sizeof(uint16_t));
  if (!words)
    return braid_rt_fail(comm->ctx, BRAID_RT_OUT_OF_MEMORY,
                         "%s over %s: out of memory", op, comm->name);
  braid_rt_composed_t saved;
  braid_rt_composed_enter(comm->ctx, op, &saved);
  double start_s = braid_rt_now_seconds();
  braid_rt_status_t status =
      ring_reduce(comm, op, wire, buf, count, words, tag);
  if (status == BRAID_RT_OK) {
    /* The owner's chunk as every other rank will receive it. */
    float *own = buf + braid_rt_ring_chunk_begin(count, size, rank);
    for (size_t i = 0, n = braid_rt_ring_chunk_length(count, size, rank); i < n;
         ++i)
      own[i] = wire->widen(wire->narrow(own[i]));
  }
  size_t most = braid_rt_ring_chunk_length(count, size, 0);
  for (int s = 0; status == BRAID_RT_OK && s + 1 < size; ++s) {
    int out = wrap(rank - s, size), in = wrap(rank - s - 1, size);
    const float *from = buf + braid_rt_ring_chunk_begin(count, size, out);
    size_t n_out = braid_rt_ring_chunk_length(count, size, out);
    for (size_t i = 0; i < n_out; ++i)
      words[i] = wire->narrow(from[i]);
    size_t n_in = braid_rt_ring_chunk_length(count, size, in);
    status = exchange(comm, op, words, n_out, words + most, n_in, tag);
    float *to = buf + braid_rt_ring_chunk_begin(count, size, in);
    for (size_t i = 0; status == BRAID_RT_OK && i < n_in; ++i)
      to[i] = wire->widen(words[most + i]);
  }
  free(words);
  return braid_rt_composed_finish(comm, op, count, start_s, &saved, status);
}

braid_rt_status_t braid_rt_backend_reduce_scatter_sum_f32_16bit(
    braid_rt_comm_t *comm, const float *send, float *recv, size_t recv_count,
    braid_rt_stream_t *stream, int format) {
  (void)stream;
  const char *op = "reduce_scatter (16-bit)";
  const wire_t *wire = format ? &F16 : &BF16;
  braid_rt_status_t status = BRAID_RT_OK;
  int size = comm->size, rank = comm->rank;
  size_t count = (size_t)size * recv_count;
  float *acc = malloc(count * sizeof(float));
  uint16_t *words = malloc(2 * recv_count * sizeof(uint16_t));
  if (!acc || !words) {
    free(acc);
    free(words);
    return braid_rt_fail(comm->ctx, BRAID_RT_OUT_OF_MEMORY,
                         "%s over %s: out of memory", op, comm->name);
  }
  memcpy(acc, send, count * sizeof(float));
  braid_rt_composed_t saved;
  braid_rt_composed_enter(comm->ctx, op, &saved);
  double start_s = braid_rt_now_seconds();
  if (size > 1)
    status = ring_reduce(comm, op, wire, acc, count, words, ring_tag(comm));
  if (status == BRAID_RT_OK)
    memcpy(recv, acc + (size_t)rank * recv_count, recv_count * sizeof(float));
  free(acc);
  free(words);
  return braid_rt_composed_finish(comm, op, count, start_s, &saved, status);
}
