/*===- collectives.h - Collective and point-to-point communication -------===*/
/*
 * Every operation comes in two forms:
 *
 *   braid_rt_<op>_<type>(comm, ..., stream)
 *       returns once the result is visible to work issued later to `stream`.
 *       On the CPU backend that is when the operation has completed; on the
 *       CUDA backend (NCCL semantics) the operation is enqueued on `stream`.
 *   braid_rt_<op>_<type>_start(comm, ..., stream, out_request)
 *       starts the operation and returns a request; the result is available,
 *       and the buffers may be touched again, after braid_rt_request_wait.
 *
 * Waits fail with BRAID_RT_TIMEOUT after the context's collective timeout,
 * with a message naming the operation, the communicator, this rank and the
 * peer where there is one. After a timeout or a COMM_FAILURE the
 * communicator is unusable: report the message and braid_rt_context_abort.
 *
 * Collectives must be called by every rank of `comm` in the same order with
 * matching counts. Counts are elements and must not exceed INT_MAX; send and
 * receive buffers must not overlap unless stated otherwise. A buffer may be
 * NULL only when its count is 0.
 *
 * Thread-compatible: one thread at a time per context. The caller keeps
 * ownership of every buffer.
 */
#ifndef BRAID_RT_COLLECTIVES_H
#define BRAID_RT_COLLECTIVES_H

#include "braid/rt/mesh.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct braid_rt_request braid_rt_request_t; /* opaque */

/* Waits for `request` to complete (or time out) and releases it, whatever
   the outcome. NULL is a no-op. */
braid_rt_status_t braid_rt_request_wait(braid_rt_request_t *request);

/* Sets *out_done to 1 if `request` has completed, 0 otherwise, without
   blocking. The request stays owned by the caller, who still waits on it. */
braid_rt_status_t braid_rt_request_test(braid_rt_request_t *request,
                                        int *out_done);

/* Gives every operation of `ctx` started by a _start call and not yet
   waited for a turn to progress, without blocking, and sets *out_active
   (may be NULL) to how many have not completed. On the CPU backend MPI
   moves a started collective or a large message only inside MPI calls, so
   a caller computing between a start and its wait calls this now and then
   (generated programs do after each op); it is a pointer test when nothing
   is in flight, else one MPI_Testsome per 64 operations in flight (a call
   that moves nothing yields the core where MPI yields when idle:
   braid_rt_progress_yields). CUDA backend: NCCL progresses on its own; only the count.
   Thread-compatible, as the operations; the requests stay the caller's. */
braid_rt_status_t braid_rt_progress(braid_rt_context_t *ctx, int *out_active);

/* Sets *out_yields to 1 when a braid_rt_progress that finds nothing to do
   gives this rank's core to another process, else 0. On the CPU backend:
   OpenMPI's mpi_yield_when_idle (on by default when a machine's ranks
   outnumber its cores; braid-run sets it then), under which every MPI call
   that moves nothing calls sched_yield; a rank that computes and calls
   braid_rt_progress between its ops then hands its core to a waiting rank
   at each call. CUDA backend: 0 (braid_rt_progress makes no call). */
braid_rt_status_t braid_rt_progress_yields(braid_rt_context_t *ctx,
                                           int *out_yields);

/* all_reduce: sums `count` elements of `buf` across the ranks of `comm`, in
   place. */
braid_rt_status_t braid_rt_all_reduce_sum_f32(braid_rt_comm_t *comm, float *buf,
                                              size_t count,
                                              braid_rt_stream_t *stream);
braid_rt_status_t braid_rt_all_reduce_sum_f64(braid_rt_comm_t *comm,
                                              double *buf, size_t count,
                                              braid_rt_stream_t *stream);
braid_rt_status_t
braid_rt_all_reduce_sum_f32_start(braid_rt_comm_t *comm, float *buf,
                                  size_t count, braid_rt_stream_t *stream,
                                  braid_rt_request_t **out_request);
braid_rt_status_t
braid_rt_all_reduce_sum_f64_start(braid_rt_comm_t *comm, double *buf,
                                  size_t count, braid_rt_stream_t *stream,
                                  braid_rt_request_t **out_request);

/* all_gather: concatenates every rank's `send_count` elements of `send`, in
   rank order, into `recv` (size * send_count elements). */
braid_rt_status_t braid_rt_all_gather_f32(braid_rt_comm_t *comm,
                                          const float *send, float *recv,
                                          size_t send_count,
                                          braid_rt_stream_t *stream);
braid_rt_status_t braid_rt_all_gather_f64(braid_rt_comm_t *comm,
                                          const double *send, double *recv,
                                          size_t send_count,
                                          braid_rt_stream_t *stream);
braid_rt_status_t
braid_rt_all_gather_f32_start(braid_rt_comm_t *comm, const float *send,
                              float *recv, size_t send_count,
                              braid_rt_stream_t *stream,
                              braid_rt_request_t **out_request);
braid_rt_status_t
braid_rt_all_gather_f64_start(braid_rt_comm_t *comm, const double *send,
                              double *recv, size_t send_count,
                              braid_rt_stream_t *stream,
                              braid_rt_request_t **out_request);

/* reduce_scatter: sums `send` (size * recv_count elements) across the ranks
   and leaves block `rank` of the sum, recv_count elements, in `recv`. */
braid_rt_status_t braid_rt_reduce_scatter_sum_f32(braid_rt_comm_t *comm,
                                                  const float *send,
                                                  float *recv,
                                                  size_t recv_count,
                                                  braid_rt_stream_t *stream);
braid_rt_status_t braid_rt_reduce_scatter_sum_f64(braid_rt_comm_t *comm,
                                                  const double *send,
                                                  double *recv,
                                                  size_t recv_count,
                                                  braid_rt_stream_t *stream);
braid_rt_status_t braid_rt_reduce_scatter_sum_f32_start(
    braid_rt_comm_t *comm, const float *send, float *recv, size_t recv_count,
    braid_rt_stream_t *stream, braid_rt_request_t **out_request);
braid_rt_status_t braid_rt_reduce_scatter_sum_f64_start(
    braid_rt_comm_t *comm, const double *send, double *recv,
    size_t recv_count, braid_rt_stream_t *stream,
    braid_rt_request_t **out_request);

/* broadcast: copies `count` elements of `buf` on rank `root` of `comm` into
   `buf` on every other rank. */
braid_rt_status_t braid_rt_broadcast_f32(braid_rt_comm_t *comm, float *buf,
                                         size_t count, int root,
                                         braid_rt_stream_t *stream);
braid_rt_status_t braid_rt_broadcast_f64(braid_rt_comm_t *comm, double *buf,
                                         size_t count, int root,
                                         braid_rt_stream_t *stream);
braid_rt_status_t braid_rt_broadcast_f32_start(braid_rt_comm_t *comm,
                                               float *buf, size_t count,
                                               int root,
                                               braid_rt_stream_t *stream,
                                               braid_rt_request_t **out_request);
braid_rt_status_t braid_rt_broadcast_f64_start(braid_rt_comm_t *comm,
                                               double *buf, size_t count,
                                               int root,
                                               braid_rt_stream_t *stream,
                                               braid_rt_request_t **out_request);

/* all_to_all: block j (block_count elements) of `send` goes to rank j, and
   block i of `recv` comes from rank i; both hold size * block_count. */
braid_rt_status_t braid_rt_all_to_all_f32(braid_rt_comm_t *comm,
                                          const float *send, float *recv,
                                          size_t block_count,
                                          braid_rt_stream_t *stream);
braid_rt_status_t braid_rt_all_to_all_f64(braid_rt_comm_t *comm,
                                          const double *send, double *recv,
                                          size_t block_count,
                                          braid_rt_stream_t *stream);
braid_rt_status_t
braid_rt_all_to_all_f32_start(braid_rt_comm_t *comm, const float *send,
                              float *recv, size_t block_count,
                              braid_rt_stream_t *stream,
                              braid_rt_request_t **out_request);
braid_rt_status_t
braid_rt_all_to_all_f64_start(braid_rt_comm_t *comm, const double *send,
                              double *recv, size_t block_count,
                              braid_rt_stream_t *stream,
                              braid_rt_request_t **out_request);

/* send / recv: `count` elements to / from rank `peer` of `comm`, matched by
   `tag` (0..32767). Messages between two ranks with the same tag arrive in
   the order they were sent. A blocking send may wait for the matching
   receive, so two ranks sending to each other need the _start forms. */
braid_rt_status_t braid_rt_send_f32(braid_rt_comm_t *comm, const float *buf,
                                    size_t count, int peer, int tag,
                                    braid_rt_stream_t *stream);
braid_rt_status_t braid_rt_send_f64(braid_rt_comm_t *comm, const double *buf,
                                    size_t count, int peer, int tag,
                                    braid_rt_stream_t *stream);
braid_rt_status_t braid_rt_recv_f32(braid_rt_comm_t *comm, float *buf,
                                    size_t count, int peer, int tag,
                                    braid_rt_stream_t *stream);
braid_rt_status_t braid_rt_recv_f64(braid_rt_comm_t *comm, double *buf,
                                    size_t count, int peer, int tag,
                                    braid_rt_stream_t *stream);
braid_rt_status_t braid_rt_send_f32_start(braid_rt_comm_t *comm,
                                          const float *buf, size_t count,
                                          int peer, int tag,
                                          braid_rt_stream_t *stream,
                                          braid_rt_request_t **out_request);
braid_rt_status_t braid_rt_send_f64_start(braid_rt_comm_t *comm,
                                          const double *buf, size_t count,
                                          int peer, int tag,
                                          braid_rt_stream_t *stream,
                                          braid_rt_request_t **out_request);
braid_rt_status_t braid_rt_recv_f32_start(braid_rt_comm_t *comm, float *buf,
                                          size_t count, int peer, int tag,
                                          braid_rt_stream_t *stream,
                                          braid_rt_request_t **out_request);
braid_rt_status_t braid_rt_recv_f64_start(braid_rt_comm_t *comm, double *buf,
                                          size_t count, int peer, int tag,
                                          braid_rt_stream_t *stream,
                                          braid_rt_request_t **out_request);

/*--- Compressed gradient reduction -----------------------------------------*/
/* Sums of f32 tensors that travel as 16-bit values (bf16 or IEEE fp16) and
   are accumulated in f32 where they are received: a ring over `comm` in
   which every hop rounds the partial sum it sends to 16 bits (to nearest,
   ties to even) and the receiver adds it to its own f32 values. The
   all_reduce then rounds each fully reduced chunk once more, on its owner
   too, and circulates it, so every rank gets the same bits. A group of one
   sends nothing and rounds nothing. fp16 overflows to infinity above 65504.
   Blocking only; half the bytes of the f32 forms on the wire. */
braid_rt_status_t braid_rt_all_reduce_sum_f32_as_bf16(braid_rt_comm_t *comm,
                                                      float *buf, size_t count,
                                                      braid_rt_stream_t *stream);
braid_rt_status_t braid_rt_all_reduce_sum_f32_as_f16(braid_rt_comm_t *comm,
                                                     float *buf, size_t count,
                                                     braid_rt_stream_t *stream);
/* As braid_rt_reduce_scatter_sum_f32; the block a rank keeps is its f32
   accumulation (not rounded again). */
braid_rt_status_t braid_rt_reduce_scatter_sum_f32_as_bf16(
    braid_rt_comm_t *comm, const float *send, float *recv, size_t recv_count,
    braid_rt_stream_t *stream);
braid_rt_status_t braid_rt_reduce_scatter_sum_f32_as_f16(
    braid_rt_comm_t *comm, const float *send, float *recv, size_t recv_count,
    braid_rt_stream_t *stream);

/* PowerSGD (Vogels et al. 2019): the sum over `comm` of the [rows][cols]
   gradient `grad`, approximated at rank `rank` (1..min(rows, cols)) with
   error feedback. M = grad + error; P = M Q, all_reduced and orthonormalised
   (Gram-Schmidt); Q = M^T P, all_reduced; grad = P Q^T; error = M - grad /
   size. `q` ([cols][rank]) carries Q from step to step (warm start; start it
   alike on every rank, e.g. braid_rt_powersgd_init_q); `error` ([rows][cols],
   zeros at first) is this rank's error feedback, NULL for none. Sends
   (rows + cols) * rank f32 values instead of rows * cols; every rank gets
   the same bits. Blocking; CPU backend. */
braid_rt_status_t braid_rt_powersgd_all_reduce_f32(
    braid_rt_comm_t *comm, float *grad, size_t rows, size_t cols, size_t rank,
    float *q, float *error, braid_rt_stream_t *stream);
/* Fills q ([cols][rank]) with values uniform in [-1, 1) from `seed`. */
void braid_rt_powersgd_init_q(float *q, size_t cols, size_t rank,
                              uint64_t seed);

/* The wire formats' conversions, rounding to nearest even (NaN stays NaN,
   overflow goes to infinity); exact back to f32. */
uint16_t braid_rt_f32_to_bf16(float x);
float braid_rt_bf16_to_f32(uint16_t h);
uint16_t braid_rt_f32_to_f16(float x);
float braid_rt_f16_to_f32(uint16_t h);

/* Blocks until every rank of `comm` has entered the barrier. */
braid_rt_status_t braid_rt_barrier(braid_rt_comm_t *comm,
                                   braid_rt_stream_t *stream);

#ifdef __cplusplus
}
#endif

#endif /* BRAID_RT_COLLECTIVES_H */
