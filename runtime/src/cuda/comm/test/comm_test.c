/*===- comm_test.c - The CUDA backend's collectives on 1 or more GPUs ----===*/
/*
 * Run on 1 rank or under mpirun with one rank per GPU:
 *
 *   braid-rt-cuda-comm_test            every collective, send/recv, barrier
 *   braid-rt-cuda-comm_test timeout    a wait that cannot complete (1 rank:
 *                                      an all_reduce behind a host function
 *                                      that holds the compute stream; more:
 *                                      rank 0 skips an all_reduce) times out
 *                                      after 2 s, and the rank aborts with 42:
 *     rank 0: TIMEOUT: all_reduce of 16 f32 over world (rank 0 of 1, world
 *     rank 0): no completion within 2 s; the communicator was aborted
 *   braid-rt-cuda-comm_test tag-order  one rank: two messages to itself,
 *                                      waited for in the other order than
 *                                      sent: the tag check fails (exit 44)
 *   braid-rt-cuda-comm_test timeout-destroy
 *                                      the same, then braid_rt_context_destroy
 *                                      instead of the abort, and exit 43
 *   braid-rt-cuda-comm_test compressed the bf16 / fp16 all_reduce and
 *                                      reduce_scatter, bit for bit against the
 *                                      CPU target's ring (ring_reference.h),
 *                                      PowerSGD within 1e-4 of the CPU
 *                                      target's arithmetic, and their
 *                                      argument checks
 *   braid-rt-cuda-comm_test trace      a blocking and a started all_reduce
 *                                      traced: each has its wait and its
 *                                      flight; the started one, tested until
 *                                      done, then waited for 2 ms later, was
 *                                      in flight from its start call, 2 ms
 *                                      before its wait, and complete before
 *                                      it ("trace: ok")
 *
 * Every collective and transfer, f32 and f64, blocking and started, counts
 * 0, 1, 1000 and 70001, over the world and each axis group of a 2 x n/2
 * mesh (n even). Inputs are multiples of 1/8 from a hash of (world rank,
 * index), so every sum is exact and results are compared with ==. Buffers
 * are filled and read back with copies on the compute stream, so a result
 * is right only if the communication stream was ordered after the fill and
 * the compute stream after the operation.
 *
 * Without a usable device (none, or fewer than the ranks on a node) it
 * prints "SKIP: " and the context's message and exits 0: ctest runs it on
 * machines without a GPU to check that message (on 1 and 2 ranks).
 */

#include "braid/rt/collectives.h"
#include "braid/rt/cuda.h"
#include "braid/rt/trace.h"

#include <cuda_runtime_api.h>

#include "powersgd.h"
#include "ring_reference.h"

#include <math.h>
#include <sched.h>
#include <stdatomic.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static braid_rt_context_t *ctx;
static long checks;

static void fail(const char *what, braid_rt_status_t status) {
  fprintf(stderr, "rank %d: FAIL: %s: %s: %s\n", braid_rt_context_rank(ctx),
          what, braid_rt_status_string(status),
          braid_rt_context_last_error(ctx));
  braid_rt_context_abort(ctx, 1);
}

#define CHECK_OK(call)                                                         \
  do {                                                                         \
    braid_rt_status_t s_ = (call);                                             \
    if (s_ != BRAID_RT_OK)                                                     \
      fail(#call, s_);                                                         \
  } while (0)

#define CHECK_CUDA(call)                                                       \
  do {                                                                         \
    cudaError_t e_ = (call);                                                   \
    if (e_ != cudaSuccess) {                                                   \
      fprintf(stderr, "FAIL: %s: %s\n", #call, cudaGetErrorString(e_));        \
      braid_rt_context_abort(ctx, 1);                                          \
    }                                                                          \
  } while (0)

/* A multiple of 1/8 in [-64, 64) from (rank, index). */
static double value(int64_t rank, int64_t index) {
  uint64_t h = (uint64_t)rank * 0x9E3779B97F4A7C15ull ^
               (uint64_t)index * 0xC2B2AE3D27D4EB4Full;
  h ^= h >> 29;
  h *= 0xBF58476D1CE4E5B9ull;
  h ^= h >> 32;
  return (double)(int64_t)(h % 1024) / 8.0 - 64.0;
}

typedef struct {
  int f64;
  size_t bytes;
  const char *name;
} type_t;

static const type_t types[] = {{0, sizeof(float), "f32"},
                               {1, sizeof(double), "f64"}};

/* Host buffers in the element type. */
static void *host_alloc(const type_t *t, size_t n) {
  void *p = calloc(n ? n : 1, t->bytes);
  if (!p) {
    fprintf(stderr, "FAIL: out of memory\n");
    braid_rt_context_abort(ctx, 1);
  }
  return p;
}

static void host_set(const type_t *t, void *p, size_t i, double v) {
  if (t->f64)
    ((double *)p)[i] = v;
  else
    ((float *)p)[i] = (float)v;
}

static double host_get(const type_t *t, const void *p, size_t i) {
  return t->f64 ? ((const double *)p)[i] : (double)((const float *)p)[i];
}

static void *device_alloc(const type_t *t, size_t n) {
  void *p = NULL;
  CHECK_CUDA(cudaMalloc(&p, (n ? n : 1) * t->bytes));
  /* Poison, so that an element the operation should write but does not is
     caught. */
  CHECK_CUDA(cudaMemsetAsync(p, 0xff, (n ? n : 1) * t->bytes,
                             braid_rt_cuda_stream(NULL)));
  return p;
}

static void upload(const type_t *t, void *dst, const void *src, size_t n) {
  CHECK_CUDA(cudaMemcpyAsync(dst, src, n * t->bytes, cudaMemcpyHostToDevice,
                             braid_rt_cuda_stream(NULL)));
}

/* Reads back on the compute stream after the operation. */
static void download(const type_t *t, void *dst, const void *src, size_t n) {
  CHECK_CUDA(cudaMemcpyAsync(dst, src, n * t->bytes, cudaMemcpyDeviceToHost,
                             braid_rt_cuda_stream(NULL)));
  CHECK_OK(braid_rt_stream_synchronize(NULL));
}

static void expect(const char *what, const type_t *t, const void *got, size_t i,
                   double expected) {
  ++checks;
  double v = host_get(t, got, i);
  if (v != expected) {
    fprintf(stderr,
            "rank %d: FAIL: %s %s: element %zu is %.17g, expected %.17g\n",
            braid_rt_context_rank(ctx), what, t->name, i, v, expected);
    braid_rt_context_abort(ctx, 1);
  }
}

/* A group: its communicator and the world ranks of its members in order. */
typedef struct {
  braid_rt_comm_t *comm;
  int members[64];
  int size, rank;
} group_t;

typedef braid_rt_status_t (*start_fn)(void);

/* Waits for `req` when started, else nothing: the blocking form returned
   with the result ordered before the download. */
static void finish(braid_rt_request_t *req, int started, const char *what) {
  if (!started)
    return;
  /* Half of the requests are tested until done, half waited at once. */
  if (checks % 2) {
    int done = 0;
    while (!done)
      CHECK_OK(braid_rt_request_test(req, &done));
  }
  braid_rt_status_t s = braid_rt_request_wait(req);
  if (s != BRAID_RT_OK)
    fail(what, s);
}

static void test_all_reduce(const group_t *g, const type_t *t, size_t n,
                            int started) {
  void *h = host_alloc(t, n);
  void *d = device_alloc(t, n);
  int me = braid_rt_context_rank(ctx);
  for (size_t i = 0; i < n; ++i)
    host_set(t, h, i, value(me, (int64_t)i));
  upload(t, d, h, n);
  braid_rt_request_t *req = NULL;
  if (t->f64)
    CHECK_OK(started
                 ? braid_rt_all_reduce_sum_f64_start(g->comm, d, n, NULL, &req)
                 : braid_rt_all_reduce_sum_f64(g->comm, d, n, NULL));
  else
    CHECK_OK(started
                 ? braid_rt_all_reduce_sum_f32_start(g->comm, d, n, NULL, &req)
                 : braid_rt_all_reduce_sum_f32(g->comm, d, n, NULL));
  finish(req, started, "all_reduce");
  download(t, h, d, n);
  for (size_t i = 0; i < n; ++i) {
    double sum = 0;
    for (int k = 0; k < g->size; ++k)
      sum += value(g->members[k], (int64_t)i);
    expect("all_reduce", t, h, i, sum);
  }
  cudaFree(d);
  free(h);
}

static void test_all_gather(const group_t *g, const type_t *t, size_t n,
                            int started) {
  size_t total = n * (size_t)g->size;
  void *h = host_alloc(t, total);
  void *send = device_alloc(t, n), *recv = device_alloc(t, total);
  int me = braid_rt_context_rank(ctx);
  for (size_t i = 0; i < n; ++i)
    host_set(t, h, i, value(me, (int64_t)i));
  upload(t, send, h, n);
  braid_rt_request_t *req = NULL;
  if (t->f64)
    CHECK_OK(started ? braid_rt_all_gather_f64_start(g->comm, send, recv, n,
                                                     NULL, &req)
                     : braid_rt_all_gather_f64(g->comm, send, recv, n, NULL));
  else
    CHECK_OK(started ? braid_rt_all_gather_f32_start(g->comm, send, recv, n,
                                                     NULL, &req)
                     : braid_rt_all_gather_f32(g->comm, send, recv, n, NULL));
  finish(req, started, "all_gather");
  download(t, h, recv, total);
  for (int k = 0; k < g->size; ++k)
    for (size_t i = 0; i < n; ++i)
      expect("all_gather", t, h, (size_t)k * n + i,
             value(g->members[k], (int64_t)i));
  cudaFree(send);
  cudaFree(recv);
  free(h);
}

static void test_reduce_scatter(const group_t *g, const type_t *t, size_t n,
                                int started) {
  size_t total = n * (size_t)g->size;
  void *h = host_alloc(t, total);
  void *send = device_alloc(t, total), *recv = device_alloc(t, n);
  int me = braid_rt_context_rank(ctx);
  for (size_t i = 0; i < total; ++i)
    host_set(t, h, i, value(me, (int64_t)i));
  upload(t, send, h, total);
  braid_rt_request_t *req = NULL;
  if (t->f64)
    CHECK_OK(started ? braid_rt_reduce_scatter_sum_f64_start(
                           g->comm, send, recv, n, NULL, &req)
                     : braid_rt_reduce_scatter_sum_f64(g->comm, send, recv, n,
                                                       NULL));
  else
    CHECK_OK(started ? braid_rt_reduce_scatter_sum_f32_start(
                           g->comm, send, recv, n, NULL, &req)
                     : braid_rt_reduce_scatter_sum_f32(g->comm, send, recv, n,
                                                       NULL));
  finish(req, started, "reduce_scatter");
  download(t, h, recv, n);
  for (size_t i = 0; i < n; ++i) {
    double sum = 0;
    for (int k = 0; k < g->size; ++k)
      sum += value(g->members[k], (int64_t)((size_t)g->rank * n + i));
    expect("reduce_scatter", t, h, i, sum);
  }
  cudaFree(send);
  cudaFree(recv);
  free(h);
}

static void test_broadcast(const group_t *g, const type_t *t, size_t n,
                           int started) {
  int root = g->size - 1;
  void *h = host_alloc(t, n);
  void *d = device_alloc(t, n);
  int me = braid_rt_context_rank(ctx);
  for (size_t i = 0; i < n; ++i)
    host_set(t, h, i, value(me, (int64_t)i));
  upload(t, d, h, n);
  braid_rt_request_t *req = NULL;
  if (t->f64)
    CHECK_OK(started
                 ? braid_rt_broadcast_f64_start(g->comm, d, n, root, NULL, &req)
                 : braid_rt_broadcast_f64(g->comm, d, n, root, NULL));
  else
    CHECK_OK(started
                 ? braid_rt_broadcast_f32_start(g->comm, d, n, root, NULL, &req)
                 : braid_rt_broadcast_f32(g->comm, d, n, root, NULL));
  finish(req, started, "broadcast");
  download(t, h, d, n);
  for (size_t i = 0; i < n; ++i)
    expect("broadcast", t, h, i, value(g->members[root], (int64_t)i));
  cudaFree(d);
  free(h);
}

static void test_all_to_all(const group_t *g, const type_t *t, size_t n,
                            int started) {
  size_t total = n * (size_t)g->size;
  void *h = host_alloc(t, total);
  void *send = device_alloc(t, total), *recv = device_alloc(t, total);
  int me = braid_rt_context_rank(ctx);
  for (size_t i = 0; i < total; ++i)
    host_set(t, h, i, value(me, (int64_t)i));
  upload(t, send, h, total);
  braid_rt_request_t *req = NULL;
  if (t->f64)
    CHECK_OK(started ? braid_rt_all_to_all_f64_start(g->comm, send, recv, n,
                                                     NULL, &req)
                     : braid_rt_all_to_all_f64(g->comm, send, recv, n, NULL));
  else
    CHECK_OK(started ? braid_rt_all_to_all_f32_start(g->comm, send, recv, n,
                                                     NULL, &req)
                     : braid_rt_all_to_all_f32(g->comm, send, recv, n, NULL));
  finish(req, started, "all_to_all");
  download(t, h, recv, total);
  /* Block k came from member k, which sent its block g->rank. */
  for (int k = 0; k < g->size; ++k)
    for (size_t i = 0; i < n; ++i)
      expect("all_to_all", t, h, (size_t)k * n + i,
             value(g->members[k], (int64_t)((size_t)g->rank * n + i)));
  cudaFree(send);
  cudaFree(recv);
  free(h);
}

/* A pipeline's pattern: two receives from the previous rank started first,
   then two sends to the next, waited in order; on one rank the ring is a
   rank sending to itself. */
static void test_ring(const group_t *g, const type_t *t, size_t n) {
  int next = (g->rank + 1) % g->size, prev = (g->rank + g->size - 1) % g->size;
  void *h = host_alloc(t, n);
  void *send[2], *recv[2];
  braid_rt_request_t *sends[2], *recvs[2];
  for (int m = 0; m < 2; ++m) {
    send[m] = device_alloc(t, n);
    recv[m] = device_alloc(t, n);
    if (t->f64)
      CHECK_OK(braid_rt_recv_f64_start(g->comm, recv[m], n, prev, m, NULL,
                                       &recvs[m]));
    else
      CHECK_OK(braid_rt_recv_f32_start(g->comm, recv[m], n, prev, m, NULL,
                                       &recvs[m]));
  }
  int me = braid_rt_context_rank(ctx);
  for (int m = 0; m < 2; ++m) {
    for (size_t i = 0; i < n; ++i)
      host_set(t, h, i, value(me, (int64_t)(i + (size_t)m * n)));
    upload(t, send[m], h, n);
    if (t->f64)
      CHECK_OK(braid_rt_send_f64_start(g->comm, send[m], n, next, m, NULL,
                                       &sends[m]));
    else
      CHECK_OK(braid_rt_send_f32_start(g->comm, send[m], n, next, m, NULL,
                                       &sends[m]));
  }
  for (int m = 0; m < 2; ++m) {
    finish(recvs[m], 1, "recv");
    download(t, h, recv[m], n);
    for (size_t i = 0; i < n; ++i)
      expect("ring recv", t, h, i,
             value(g->members[prev], (int64_t)(i + (size_t)m * n)));
  }
  for (int m = 0; m < 2; ++m) {
    finish(sends[m], 1, "send");
    cudaFree(send[m]);
    cudaFree(recv[m]);
  }
  free(h);
}

/* Blocking send and receive between pairs (0,1), (2,3), ...: the lower rank
   sends first. */
static void test_pairs(const group_t *g, const type_t *t, size_t n) {
  if (g->size % 2)
    return;
  int peer = g->rank ^ 1;
  void *h = host_alloc(t, n);
  void *out = device_alloc(t, n), *in = device_alloc(t, n);
  int me = braid_rt_context_rank(ctx);
  for (size_t i = 0; i < n; ++i)
    host_set(t, h, i, value(me, (int64_t)i));
  upload(t, out, h, n);
  for (int step = 0; step < 2; ++step) {
    if ((g->rank % 2) == step) {
      if (t->f64)
        CHECK_OK(braid_rt_send_f64(g->comm, out, n, peer, 3, NULL));
      else
        CHECK_OK(braid_rt_send_f32(g->comm, out, n, peer, 3, NULL));
    } else {
      if (t->f64)
        CHECK_OK(braid_rt_recv_f64(g->comm, in, n, peer, 3, NULL));
      else
        CHECK_OK(braid_rt_recv_f32(g->comm, in, n, peer, 3, NULL));
    }
  }
  download(t, h, in, n);
  for (size_t i = 0; i < n; ++i)
    expect("pair recv", t, h, i, value(g->members[peer], (int64_t)i));
  cudaFree(out);
  cudaFree(in);
  free(h);
}

/* Two all_reduces in flight, waited in reverse order. */
static void test_two_in_flight(const group_t *g) {
  const type_t *t = &types[0];
  size_t n = 1000;
  void *h = host_alloc(t, n);
  void *a = device_alloc(t, n), *b = device_alloc(t, n);
  int me = braid_rt_context_rank(ctx);
  for (size_t i = 0; i < n; ++i)
    host_set(t, h, i, value(me, (int64_t)i));
  upload(t, a, h, n);
  upload(t, b, h, n);
  braid_rt_request_t *ra, *rb;
  CHECK_OK(braid_rt_all_reduce_sum_f32_start(g->comm, a, n, NULL, &ra));
  CHECK_OK(braid_rt_all_reduce_sum_f32_start(g->comm, b, n, NULL, &rb));
  CHECK_OK(braid_rt_request_wait(rb));
  CHECK_OK(braid_rt_request_wait(ra));
  for (int which = 0; which < 2; ++which) {
    download(t, h, which ? b : a, n);
    for (size_t i = 0; i < n; ++i) {
      double sum = 0;
      for (int k = 0; k < g->size; ++k)
        sum += value(g->members[k], (int64_t)i);
      expect("two in flight", t, h, i, sum);
    }
  }
  cudaFree(a);
  cudaFree(b);
  free(h);
}

static void test_errors(const group_t *g) {
  float host[4] = {0};
  braid_rt_status_t s = braid_rt_all_reduce_sum_f32(g->comm, host, 4, NULL);
  const char *expected = "is host memory; the CUDA backend communicates "
                         "device memory";
  ++checks;
  if (s != BRAID_RT_INVALID_ARGUMENT ||
      !strstr(braid_rt_context_last_error(ctx), expected)) {
    fprintf(stderr, "FAIL: a host buffer gave %s: %s\n",
            braid_rt_status_string(s), braid_rt_context_last_error(ctx));
    braid_rt_context_abort(ctx, 1);
  }
}

static void run_group(const group_t *g) {
  static const size_t counts[] = {0, 1, 1000, 70001};
  for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); ++c)
    for (int ti = 0; ti < 2; ++ti)
      for (int started = 0; started < 2; ++started) {
        const type_t *t = &types[ti];
        size_t n = counts[c];
        test_all_reduce(g, t, n, started);
        test_all_gather(g, t, n, started);
        test_reduce_scatter(g, t, n, started);
        test_broadcast(g, t, n, started);
        test_all_to_all(g, t, n, started);
        if (started)
          test_ring(g, t, n);
        else
          test_pairs(g, t, n);
      }
  test_two_in_flight(g);
  test_errors(g);
  CHECK_OK(braid_rt_barrier(g->comm, NULL));
}

/* The members of `comm` over the axes in `mask` of `mesh`, by brute force:
   the world ranks that agree with this one outside the group. */
static void fill_group(braid_rt_mesh_t *mesh, unsigned mask,
                       braid_rt_comm_t *comm, group_t *g) {
  int ndims = braid_rt_mesh_ndims(mesh), world = braid_rt_context_size(ctx);
  int64_t mine[8], theirs[8];
  CHECK_OK(braid_rt_mesh_coords_of(mesh, braid_rt_context_rank(ctx), mine));
  g->comm = comm;
  g->size = 0;
  for (int r = 0; r < world; ++r) {
    CHECK_OK(braid_rt_mesh_coords_of(mesh, r, theirs));
    int same = 1;
    for (int i = 0; i < ndims; ++i)
      if (!(mask & (1u << i)) && theirs[i] != mine[i])
        same = 0;
    if (same)
      g->members[g->size++] = r;
  }
  g->rank = braid_rt_comm_rank(comm);
  if (g->size != braid_rt_comm_size(comm) ||
      g->members[g->rank] != braid_rt_context_rank(ctx)) {
    fprintf(stderr, "FAIL: %s has size %d, rank %d; expected size %d\n",
            braid_rt_comm_name(comm), braid_rt_comm_size(comm), g->rank,
            g->size);
    braid_rt_context_abort(ctx, 1);
  }
}

/* Holds up the compute stream until released (or 60 s): on one rank, the
   work a collective waits for that does not finish. */
static _Atomic int release_compute;

static void CUDART_CB hold_compute(void *arg) {
  (void)arg;
  double start = braid_rt_now_seconds();
  while (!atomic_load(&release_compute) && braid_rt_now_seconds() - start < 60)
    sched_yield();
}

/* A wait that cannot complete: on one rank an all_reduce issued behind a
   host function that holds the compute stream, on several an all_reduce
   that rank 0 skips. The waiting rank prints the TIMEOUT message and ends
   every rank with 42. */
static int timeout_mode(int destroy) {
  braid_rt_comm_t *world = braid_rt_context_world(ctx);
  float *d = NULL;
  CHECK_CUDA(cudaMalloc((void **)&d, 16 * sizeof(float)));
  CHECK_CUDA(cudaMemset(d, 0, 16 * sizeof(float)));
  int me = braid_rt_context_rank(ctx);
  braid_rt_status_t s;
  if (braid_rt_context_size(ctx) == 1) {
    CHECK_CUDA(
        cudaLaunchHostFunc(braid_rt_cuda_stream(NULL), hold_compute, NULL));
    braid_rt_request_t *req = NULL;
    s = braid_rt_all_reduce_sum_f32_start(world, d, 16, NULL, &req);
    if (s == BRAID_RT_OK)
      s = braid_rt_request_wait(req);
    atomic_store(&release_compute, 1);
  } else if (me != 0) {
    s = braid_rt_all_reduce_sum_f32(world, d, 16, NULL);
    if (s == BRAID_RT_OK)
      s = braid_rt_stream_synchronize(NULL);
  } else {
    /* Rank 0 never joins; the others' abort ends it. */
    for (;;)
      sched_yield();
  }
  fprintf(stderr, "rank %d: %s: %s\n", me, braid_rt_status_string(s),
          braid_rt_context_last_error(ctx));
  if (destroy) {
    /* The communicator was aborted: later calls fail at once. */
    braid_rt_status_t again = braid_rt_all_reduce_sum_f32(world, d, 16, NULL);
    fprintf(stderr, "rank %d: after %s: %s: %s\n", me,
            braid_rt_status_string(s), braid_rt_status_string(again),
            braid_rt_context_last_error(ctx));
    /* Releasing everything after a timeout must not touch the aborted
       communicator (no ncclCommDestroy on it) and must not hang. */
    braid_rt_status_t destroyed = braid_rt_context_destroy(ctx);
    fprintf(stderr, "rank %d: destroyed after %s: %s\n", me,
            braid_rt_status_string(s), braid_rt_status_string(destroyed));
    return s == BRAID_RT_TIMEOUT ? 43 : 1;
  }
  braid_rt_context_abort(ctx, s == BRAID_RT_TIMEOUT ? 42 : 1);
  return 1;
}

/* Two messages to oneself sent in the other order than their receives are
   waited for: the receive waited first gets the other message, and its
   tag check says so (COMM_FAILURE, exit 44). */
static int tag_order_mode(void) {
  braid_rt_comm_t *world = braid_rt_context_world(ctx);
  int me = braid_rt_context_rank(ctx);
  float *a = NULL, *b = NULL;
  CHECK_CUDA(cudaMalloc((void **)&a, 16 * sizeof(float)));
  CHECK_CUDA(cudaMalloc((void **)&b, 16 * sizeof(float)));
  braid_rt_request_t *ra, *rb, *sa, *sb;
  CHECK_OK(braid_rt_recv_f32_start(world, a, 16, me, 1, NULL, &ra));
  CHECK_OK(braid_rt_recv_f32_start(world, b, 16, me, 2, NULL, &rb));
  CHECK_OK(braid_rt_send_f32_start(world, b, 16, me, 2, NULL, &sb));
  CHECK_OK(braid_rt_send_f32_start(world, a, 16, me, 1, NULL, &sa));
  braid_rt_status_t s = braid_rt_request_wait(rb);
  fprintf(stderr, "rank %d: %s: %s\n", me, braid_rt_status_string(s),
          braid_rt_context_last_error(ctx));
  braid_rt_context_abort(ctx, s == BRAID_RT_COMM_FAILURE ? 44 : 1);
  return 1;
}

/* The timestamp and duration (0 when none) of the first event object after
   `after` containing `needle`, each on its own line; returns the end of its
   line, or NULL when there is none. */
static const char *find_event(const char *after, const char *needle, double *ts,
                              double *dur) {
  const char *hit = strstr(after, needle);
  if (!hit)
    return NULL;
  const char *line = hit;
  while (line > after && line[-1] != '\n')
    --line;
  const char *end = strchr(hit, '\n');
  if (!end)
    end = hit + strlen(hit);
  const char *t = strstr(line, "\"ts\":"), *d = strstr(line, "\"dur\":");
  *ts = t && t < end ? atof(t + 5) : -1;
  *dur = d && d < end ? atof(d + 6) : 0;
  return end;
}

static int count(const char *text, const char *needle) {
  int n = 0;
  for (const char *p = strstr(text, needle); p; p = strstr(p + 1, needle))
    ++n;
  return n;
}

#define TRACE_CHECK(cond, ...)                                                 \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "FAIL: trace: %s: ", #cond);                             \
      fprintf(stderr, __VA_ARGS__);                                            \
      fprintf(stderr, "\n");                                                   \
      braid_rt_context_abort(ctx, 1);                                          \
    }                                                                          \
  } while (0)

/* A blocking all_reduce and a started one, traced (see the top). */
static int trace_mode(void) {
  braid_rt_comm_t *world = braid_rt_context_world(ctx);
  float *d = NULL;
  CHECK_CUDA(cudaMalloc((void **)&d, 16 * sizeof(float)));
  CHECK_CUDA(cudaMemset(d, 0, 16 * sizeof(float)));
  CHECK_OK(braid_rt_all_reduce_sum_f32(world, d, 16, NULL));
  braid_rt_request_t *req = NULL;
  CHECK_OK(braid_rt_all_reduce_sum_f32_start(world, d, 16, NULL, &req));
  for (int done = 0; !done;)
    CHECK_OK(braid_rt_request_test(req, &done));
  for (double t0 = braid_rt_now_seconds(); braid_rt_now_seconds() - t0 < 2e-3;)
    sched_yield();
  CHECK_OK(braid_rt_request_wait(req));
  CHECK_OK(braid_rt_stream_synchronize(NULL));
  char path[64];
  snprintf(path, sizeof(path), "cuda_trace_test_np%d.json",
           braid_rt_context_size(ctx));
  CHECK_OK(braid_rt_trace_write(ctx, path));
  if (braid_rt_context_rank(ctx) == 0) {
    FILE *f = fopen(path, "rb");
    TRACE_CHECK(f != NULL, "cannot open '%s'", path);
    static char text[1 << 16];
    size_t n = fread(text, 1, sizeof(text) - 1, f);
    fclose(f);
    text[n] = '\0';
    int size = braid_rt_context_size(ctx);
    TRACE_CHECK(count(text, "\"name\":\"all_reduce\",\"cat\":\"comm\","
                            "\"ph\":\"X\"") == 2 * size,
                "%s", text);
    TRACE_CHECK(count(text, "\"name\":\"all_reduce start\",\"cat\":"
                            "\"comm\",\"ph\":\"X\"") == size,
                "%s", text);
    TRACE_CHECK(count(text, "\"cat\":\"comm_in_flight\",\"ph\":\"b\"") ==
                    2 * size,
                "%s", text);
    TRACE_CHECK(count(text, "\"cat\":\"comm_in_flight\",\"ph\":\"e\"") ==
                    2 * size,
                "%s", text);
    TRACE_CHECK(count(text, "\"args\":{\"over\":\"world\",\"dtype\":"
                            "\"f32\",\"count\":16}") == 2 * size,
                "%s", text);
    /* Rank 0's events first: the blocking one's wait and flight are its
       enqueue; then the started one's start call, wait and flight. */
    double wait_ts, wait_dur, begin_ts, end_ts, start_ts, start_dur, unused;
    const char *at = text;
    at = find_event(at, "\"cat\":\"comm\",\"ph\":\"X\"", &wait_ts, &wait_dur);
    at = at ? find_event(at, "\"ph\":\"b\"", &begin_ts, &unused) : NULL;
    at = at ? find_event(at, "\"ph\":\"e\"", &end_ts, &unused) : NULL;
    TRACE_CHECK(at && begin_ts == wait_ts &&
                    end_ts - (wait_ts + wait_dur) < 0.002 &&
                    end_ts - (wait_ts + wait_dur) > -0.002,
                "blocking: wait %.3f + %.3f, flight %.3f .. %.3f", wait_ts,
                wait_dur, begin_ts, end_ts);
    at = find_event(at, "\"name\":\"all_reduce start\"", &start_ts, &start_dur);
    at = at ? find_event(at, "\"cat\":\"comm\",\"ph\":\"X\"", &wait_ts,
                         &wait_dur)
            : NULL;
    at = at ? find_event(at, "\"ph\":\"b\"", &begin_ts, &unused) : NULL;
    at = at ? find_event(at, "\"ph\":\"e\"", &end_ts, &unused) : NULL;
    TRACE_CHECK(at && wait_ts - begin_ts >= 2000 && end_ts <= wait_ts &&
                    end_ts >= begin_ts && start_ts == begin_ts &&
                    start_ts + start_dur <= wait_ts - 2000,
                "started: start %.3f + %.3f, wait %.3f + %.3f, flight %.3f .. "
                "%.3f",
                start_ts, start_dur, wait_ts, wait_dur, begin_ts, end_ts);
    remove(path);
    printf("trace: ok\n");
  }
  CHECK_OK(braid_rt_context_destroy(ctx));
  return 0;
}

/*--- Compressed sums (compressed mode) -------------------------------------*/

/* A float of 24 random mantissa bits, magnitude 2^-8 .. 2^8, so that every
   16-bit hop rounds (ring_cpu_test.c's inputs). */
static float rough(int rank, size_t index, unsigned salt) {
  uint64_t h = (uint64_t)rank * 0x9E3779B97F4A7C15ull ^
               (uint64_t)index * 0xC2B2AE3D27D4EB4Full ^
               (uint64_t)salt * 0x165667B19E3779F9ull;
  h ^= h >> 29;
  h *= 0xBF58476D1CE4E5B9ull;
  h ^= h >> 32;
  float unit = (float)(h >> 40) / 16777216.0f * 2.0f - 1.0f;
  return ldexpf(unit, (int)((h >> 8) % 16) - 8);
}

static float *device_floats(size_t n) { return device_alloc(&types[0], n); }

static float **host_ranks(int size, size_t n) {
  float **a = calloc((size_t)size, sizeof(*a));
  for (int r = 0; a && r < size; ++r)
    if (!(a[r] = calloc(n ? n : 1, sizeof(float))))
      a = NULL;
  if (!a) {
    fprintf(stderr, "FAIL: out of memory\n");
    braid_rt_context_abort(ctx, 1);
  }
  return a;
}

static void free_ranks(float **a, int size) {
  for (int r = 0; r < size; ++r)
    free(a[r]);
  free(a);
}

/* got[0..n) must be want's bits (exact) or within rtol of it. */
static void expect_floats(const char *what, const float *got, const float *want,
                          size_t n, double rtol) {
  for (size_t i = 0; i < n; ++i) {
    ++checks;
    int same = rtol == 0 ? memcmp(&got[i], &want[i], sizeof(float)) == 0
                         : fabs((double)got[i] - want[i]) <=
                               rtol * (fabs((double)want[i]) + 1e-6);
    if (!same) {
      fprintf(stderr,
              "rank %d: FAIL: %s: element %zu of %zu is %.9g, the CPU "
              "target's arithmetic gives %.9g\n",
              braid_rt_context_rank(ctx), what, i, n, got[i], want[i]);
      braid_rt_context_abort(ctx, 1);
    }
  }
}

static void test_compressed_all_reduce(braid_rt_comm_t *comm, size_t count,
                                       int format) {
  int size = braid_rt_comm_size(comm), me = braid_rt_comm_rank(comm);
  float **acc = host_ranks(size, count);
  for (int r = 0; r < size; ++r)
    for (size_t i = 0; i < count; ++i)
      acc[r][i] = rough(r, i, (unsigned)count);
  float *d = device_floats(count);
  upload(&types[0], d, acc[me], count);
  if (ring_reference_all_reduce(size, count, format, acc) != 0)
    braid_rt_context_abort(ctx, 1);
  CHECK_OK(format ? braid_rt_all_reduce_sum_f32_as_f16(comm, d, count, NULL)
                  : braid_rt_all_reduce_sum_f32_as_bf16(comm, d, count, NULL));
  float *got = host_alloc(&types[0], count);
  download(&types[0], got, d, count);
  expect_floats(format ? "all_reduce (16-bit) f16" : "all_reduce (16-bit) bf16",
                got, acc[me], count, 0);
  free(got);
  cudaFree(d);
  free_ranks(acc, size);
}

static void test_compressed_reduce_scatter(braid_rt_comm_t *comm, size_t block,
                                           int format) {
  int size = braid_rt_comm_size(comm), me = braid_rt_comm_rank(comm);
  size_t count = (size_t)size * block;
  float **acc = host_ranks(size, count);
  for (int r = 0; r < size; ++r)
    for (size_t i = 0; i < count; ++i)
      acc[r][i] = rough(r, i, (unsigned)block + 7);
  float *send = device_floats(count), *recv = device_floats(block);
  upload(&types[0], send, acc[me], count);
  float *sent = host_alloc(&types[0], count);
  memcpy(sent, acc[me], count * sizeof(float));
  if (ring_reference_reduce_scatter(size, block, format, acc) != 0)
    braid_rt_context_abort(ctx, 1);
  CHECK_OK(format ? braid_rt_reduce_scatter_sum_f32_as_f16(comm, send, recv,
                                                           block, NULL)
                  : braid_rt_reduce_scatter_sum_f32_as_bf16(comm, send, recv,
                                                            block, NULL));
  float *got = host_alloc(&types[0], count);
  download(&types[0], got, recv, block);
  expect_floats("reduce_scatter (16-bit)", got, acc[me] + (size_t)me * block,
                block, 0);
  /* The send buffer is left as it was. */
  download(&types[0], got, send, count);
  expect_floats("reduce_scatter (16-bit) send", got, sent, count, 0);
  free(got);
  free(sent);
  cudaFree(send);
  cudaFree(recv);
  free_ranks(acc, size);
}

/* Within rtol of the largest |want|: results whose sums ran in another
   order, where an element near zero has no relative precision of its
   own. */
static void expect_floats_scaled(const char *what, const float *got,
                                 const float *want, size_t n, double rtol) {
  double scale = 1;
  for (size_t i = 0; i < n; ++i)
    scale = fmax(scale, fabs((double)want[i]));
  for (size_t i = 0; i < n; ++i) {
    ++checks;
    if (!(fabs((double)got[i] - want[i]) <= rtol * scale)) {
      fprintf(stderr,
              "rank %d: FAIL: %s: element %zu of %zu is %.9g, the CPU "
              "target's arithmetic gives %.9g (tolerance %g)\n",
              braid_rt_context_rank(ctx), what, i, n, got[i], want[i],
              rtol * scale);
      braid_rt_context_abort(ctx, 1);
    }
  }
}

/* PowerSGD on the device (cuBLAS SGEMMs, NCCL sums, powersgd_kernels.cu)
   against the CPU target's arithmetic (common/powersgd.h) over every
   rank's gradient, P and Q summed in rank order: within 1e-4 of the
   largest value (f32 GEMMs in cuBLAS's order instead of double loops;
   powersgd_math_test.c sees 5.6e-6 with a reference GEMM). */
static void test_powersgd(braid_rt_comm_t *comm, size_t rows, size_t cols,
                          size_t rank, int with_error) {
  int size = braid_rt_comm_size(comm), me = braid_rt_comm_rank(comm);
  size_t n = rows * cols;
  float **m = host_ranks(size, n), **part = host_ranks(size, rows * rank);
  float **qpart = host_ranks(size, cols * rank);
  float *grad = host_alloc(&types[0], n), *err = host_alloc(&types[0], n);
  float *q0 = host_alloc(&types[0], cols * rank);
  float *p = host_alloc(&types[0], rows * rank);
  float *q = host_alloc(&types[0], cols * rank);
  braid_rt_powersgd_init_q(q0, cols, rank, 5);
  for (int r = 0; r < size; ++r) {
    for (size_t i = 0; i < n; ++i) {
      grad[i] = rough(r, i, 11);
      err[i] = rough(r, i, 13) / 64;
    }
    braid_rt_powersgd_host_m(grad, with_error ? err : NULL, m[r], n);
    braid_rt_powersgd_host_p(m[r], q0, part[r], rows, cols, rank);
  }
  for (size_t i = 0; i < rows * rank; ++i)
    for (int r = 0; r < size; ++r)
      p[i] = r ? p[i] + part[r][i] : part[r][i];
  braid_rt_powersgd_host_orthonormalise(p, rows, rank);
  for (int r = 0; r < size; ++r)
    braid_rt_powersgd_host_q(m[r], p, qpart[r], rows, cols, rank);
  for (size_t i = 0; i < cols * rank; ++i)
    for (int r = 0; r < size; ++r)
      q[i] = r ? q[i] + qpart[r][i] : qpart[r][i];
  float *want = host_alloc(&types[0], n), *want_err = host_alloc(&types[0], n);
  braid_rt_powersgd_host_finish(m[me], p, q, want, want_err, rows, cols, rank,
                                size);

  /* This rank's inputs on the device. */
  for (size_t i = 0; i < n; ++i) {
    grad[i] = rough(me, i, 11);
    err[i] = rough(me, i, 13) / 64;
  }
  float *dgrad = device_floats(n), *derr = device_floats(n);
  float *dq = device_floats(cols * rank);
  upload(&types[0], dgrad, grad, n);
  upload(&types[0], derr, err, n);
  upload(&types[0], dq, q0, cols * rank);
  CHECK_OK(braid_rt_powersgd_all_reduce_f32(comm, dgrad, rows, cols, rank, dq,
                                            with_error ? derr : NULL, NULL));
  double rtol = 1e-4;
  download(&types[0], grad, dgrad, n);
  expect_floats_scaled("powersgd grad", grad, want, n, rtol);
  download(&types[0], q0, dq, cols * rank);
  expect_floats_scaled("powersgd q", q0, q, cols * rank, rtol);
  download(&types[0], err, derr, n);
  if (with_error)
    expect_floats_scaled("powersgd error", err, want_err, n, rtol);
  /* At full rank the approximation is the sum itself, up to the f32
     Gram-Schmidt's loss of orthogonality (2.7e-4 seen here). */
  if (rank == (rows < cols ? rows : cols)) {
    for (size_t i = 0; i < n; ++i) {
      double sum = 0;
      for (int r = 0; r < size; ++r)
        sum += m[r][i];
      ++checks;
      if (fabs(grad[i] - sum) > 2e-3 * (fabs(sum) + 1)) {
        fprintf(stderr,
                "rank %d: FAIL: powersgd at full rank: element %zu "
                "is %.9g, the sum is %.9g\n",
                me, i, grad[i], sum);
        braid_rt_context_abort(ctx, 1);
      }
    }
  }
  cudaFree(dgrad);
  cudaFree(derr);
  cudaFree(dq);
  free(want);
  free(want_err);
  free(grad);
  free(err);
  free(q0);
  free(p);
  free(q);
  free_ranks(m, size);
  free_ranks(part, size);
  free_ranks(qpart, size);
}

/* `status` must be `want` with a message containing `needle`. */
static void expect_error(const char *what, braid_rt_status_t status,
                         braid_rt_status_t want, const char *needle) {
  ++checks;
  const char *message = braid_rt_context_last_error(ctx);
  if (status != want || !strstr(message, needle)) {
    fprintf(stderr, "rank %d: FAIL: %s: got %s '%s', expected %s with '%s'\n",
            braid_rt_context_rank(ctx), what, braid_rt_status_string(status),
            message, braid_rt_status_string(want), needle);
    braid_rt_context_abort(ctx, 1);
  }
}

/* The argument checks: the CPU backend's, and device memory. */
static void test_compressed_errors(braid_rt_comm_t *comm) {
  float host[8] = {0};
  float *d = device_floats(64), *dq = device_floats(16);
  expect_error("host buffer",
               braid_rt_all_reduce_sum_f32_as_bf16(comm, host, 8, NULL),
               BRAID_RT_INVALID_ARGUMENT,
               "all_reduce (16-bit) over world: buf is host memory");
  expect_error("NULL buffer",
               braid_rt_all_reduce_sum_f32_as_f16(comm, NULL, 8, NULL),
               BRAID_RT_INVALID_ARGUMENT, "all_reduce (16-bit)");
  expect_error("host recv",
               braid_rt_reduce_scatter_sum_f32_as_bf16(comm, d, host, 1, NULL),
               BRAID_RT_INVALID_ARGUMENT,
               "reduce_scatter (16-bit) over world: recv is host memory");
  expect_error("overlap",
               braid_rt_reduce_scatter_sum_f32_as_f16(comm, d, d + 1, 4, NULL),
               BRAID_RT_INVALID_ARGUMENT,
               "reduce_scatter (16-bit) over world: the send and receive "
               "buffers overlap");
  expect_error(
      "powersgd rank 0",
      braid_rt_powersgd_all_reduce_f32(comm, d, 8, 8, 0, dq, NULL, NULL),
      BRAID_RT_INVALID_ARGUMENT,
      "powersgd_all_reduce over world: rank 0 must be in 1..min(8, "
      "8) and q given");
  expect_error(
      "powersgd no q",
      braid_rt_powersgd_all_reduce_f32(comm, d, 8, 8, 2, NULL, NULL, NULL),
      BRAID_RT_INVALID_ARGUMENT, "and q given");
  expect_error(
      "powersgd host q",
      braid_rt_powersgd_all_reduce_f32(comm, d, 8, 8, 2, host, NULL, NULL),
      BRAID_RT_INVALID_ARGUMENT,
      "powersgd_all_reduce over world: q is host memory");
  expect_error(
      "powersgd host error",
      braid_rt_powersgd_all_reduce_f32(comm, d, 8, 8, 2, dq, host, NULL),
      BRAID_RT_INVALID_ARGUMENT,
      "powersgd_all_reduce over world: error is host memory");
  cudaFree(d);
  cudaFree(dq);
}

/* The compressed sums over the world, against ring_reference.h (the CPU
   target's ring, ring_cpu_test.c), and PowerSGD against the CPU target's
   arithmetic. */
static int compressed_mode(void) {
  braid_rt_comm_t *world = braid_rt_context_world(ctx);
  static const size_t counts[] = {0, 1, 5, 1000, 70001};
  static const size_t blocks[] = {0, 1, 3, 1000};
  for (int format = 0; format < 2; ++format) {
    for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); ++i)
      test_compressed_all_reduce(world, counts[i], format);
    for (size_t i = 0; i < sizeof(blocks) / sizeof(blocks[0]); ++i)
      test_compressed_reduce_scatter(world, blocks[i], format);
  }
  test_powersgd(world, 6, 5, 2, 1);
  test_powersgd(world, 6, 5, 2, 0);
  test_powersgd(world, 4, 7, 4, 1);
  test_powersgd(world, 64, 48, 4, 1);
  /* More rows than the orthonormalising block has threads. */
  test_powersgd(world, 600, 40, 4, 1);
  test_compressed_errors(world);
  CHECK_OK(braid_rt_stream_synchronize(NULL));
  if (braid_rt_context_rank(ctx) == 0)
    printf("cuda compressed collectives: %ld checks passed on %d rank(s), "
           "bit for bit with the CPU target's ring\n",
           checks, braid_rt_context_size(ctx));
  CHECK_OK(braid_rt_context_destroy(ctx));
  return 0;
}

/* The context keeps the default memory pool's memory (context.c): the
   compressed ring's staging and the kernels' scratch are then not handed
   back to the driver at every synchronisation. */
static void check_pool_threshold(void) {
  cudaMemPool_t pool;
  uint64_t threshold = 0;
  if (cudaDeviceGetDefaultMemPool(&pool, braid_rt_cuda_device(ctx)) !=
          cudaSuccess ||
      cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReleaseThreshold,
                              &threshold) != cudaSuccess ||
      threshold != UINT64_MAX) {
    fprintf(stderr,
            "rank %d: FAIL: the default memory pool's release threshold is "
            "%llu, not UINT64_MAX\n",
            braid_rt_context_rank(ctx), (unsigned long long)threshold);
    braid_rt_context_abort(ctx, 1);
  }
  ++checks;
}

int main(int argc, char **argv) {
  braid_rt_context_options_t opts;
  braid_rt_context_options_init(&opts);
  int destroy = argc > 1 && strcmp(argv[1], "timeout-destroy") == 0;
  int timeout = destroy || (argc > 1 && strcmp(argv[1], "timeout") == 0);
  opts.collective_timeout_s = timeout ? 2 : 120;
  int trace = argc > 1 && strcmp(argv[1], "trace") == 0;
  opts.trace = trace;
  braid_rt_status_t s = braid_rt_context_create(&opts, &argc, &argv, &ctx);
  if (s != BRAID_RT_OK) {
    const char *message = braid_rt_context_last_error(NULL);
    /* No device here, too few on this node, or another rank's such
       failure. */
    if ((s == BRAID_RT_INVALID_ARGUMENT || s == BRAID_RT_COMM_FAILURE) &&
        (strstr(message, "finds no CUDA device") ||
         strstr(message, "needs device") ||
         strstr(message, "another rank could not set up its device"))) {
      printf("SKIP: %s\n", message);
      return 0;
    }
    fprintf(stderr, "FAIL: braid_rt_context_create: %s: %s\n",
            braid_rt_status_string(s), message);
    return 1;
  }
  check_pool_threshold();
  if (timeout)
    return timeout_mode(destroy);
  if (argc > 1 && strcmp(argv[1], "tag-order") == 0)
    return tag_order_mode();
  if (trace)
    return trace_mode();
  if (argc > 1 && strcmp(argv[1], "compressed") == 0)
    return compressed_mode();

  int world = braid_rt_context_size(ctx);
  int64_t dims[2] = {world % 2 == 0 ? 2 : 1,
                     world % 2 == 0 ? world / 2 : world};
  const char *names[2] = {"a", "b"};
  braid_rt_mesh_t *mesh;
  CHECK_OK(braid_rt_mesh_create(ctx, 2, dims, names, &mesh));
  for (unsigned mask = 0; mask < 4; ++mask) {
    int axes[2], naxes = 0;
    for (int i = 0; i < 2; ++i)
      if (mask & (1u << i))
        axes[naxes++] = i;
    braid_rt_comm_t *comm;
    CHECK_OK(braid_rt_mesh_comm(mesh, naxes, axes, &comm));
    group_t g;
    fill_group(mesh, mask, comm, &g);
    run_group(&g);
  }
  group_t wg;
  fill_group(mesh, 3, braid_rt_context_world(ctx), &wg);
  run_group(&wg);
  CHECK_OK(braid_rt_mesh_destroy(mesh));
  if (braid_rt_context_rank(ctx) == 0)
    printf("cuda collectives: %ld checks passed on %d rank(s), device %d\n",
           checks, world, braid_rt_cuda_device(ctx));
  CHECK_OK(braid_rt_context_destroy(ctx));
  return 0;
}
