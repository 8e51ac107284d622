/*===- trace_bytes_test.c - Bytes in the trace's communication events ----===*/
/*
 * Every rank runs, traced, one of each operation on sizes that the rank
 * count does not divide: an all_reduce of 1003 f32 (blocking and started),
 * all_gather, reduce_scatter, broadcast, all_to_all, a send and a receive
 * round a ring, the bf16 all_reduce and reduce_scatter, PowerSGD on a 24 x
 * 16 gradient at rank 2, and a barrier. Rank 0 reads the written file back
 * and checks each flight's "bytes" (the payload) and "wire_bytes" (what the
 * rank sent) for every rank against figures written out here: MPI's
 * collectives a ring's share of the rank's chunks, summing over the ranks
 * to the comm report's 2(n-1) S / n or (n-1) S / n times n; the 16-bit sums
 * half the f32 ring's, their exchanges ("within" the sum) each a message
 * sent (wire = bytes) or received (wire 0), the sends adding up to the
 * sum's;
 * PowerSGD its two f32 all_reduces of P (24 x 2) and Q (16 x 2), "within"
 * it; a barrier no byte counts.
 */

#include "test_util.h"

#include "braid/rt/trace.h"

#include <stdlib.h>

/* The length of chunk c of `count` elements cut into n (the first count % n
   one longer). */
static size_t chunk(size_t count, int n, int c) {
  return count / (size_t)n + ((size_t)c < count % (size_t)n ? 1 : 0);
}

/* Elements rank r sends in a ring all_reduce of `count`: in the
   reduce-scatter half every chunk but its own, in the all-gather half
   every chunk but the next rank's. */
static size_t ring(size_t count, int n, int r) {
  if (n == 1)
    return 0;
  size_t sent = 0;
  for (int c = 0; c < n; ++c)
    sent += (c != r ? chunk(count, n, c) : 0) +
            (c != (r + 1) % n ? chunk(count, n, c) : 0);
  return sent;
}

/* What one rank's flights named `name` (and `within` it, or not) add up
   to. */
typedef struct {
  int flights, with_bytes;
  long long bytes, wire;
} sums_t;

/* The integer after "key": on `line` (up to its end), or -1. */
static long long number(const char *line, const char *end, const char *key) {
  const char *hit = strstr(line, key);
  return hit && hit < end ? atoll(hit + strlen(key)) : -1;
}

static sums_t sum(const char *text, int pid, const char *name,
                  const char *within) {
  char name_key[96], pid_key[32], within_key[96];
  snprintf(name_key, sizeof(name_key),
           "\"name\":\"%s\",\"cat\":\"comm_in_flight\",\"ph\":\"b\"", name);
  snprintf(pid_key, sizeof(pid_key), "\"pid\":%d,", pid);
  snprintf(within_key, sizeof(within_key), "\"within\":\"%s\"",
           within ? within : "");
  sums_t s = {0, 0, 0, 0};
  for (const char *line = text; *line;) {
    const char *end = strchr(line, '\n');
    if (!end)
      end = line + strlen(line);
    const char *w = strstr(line, "\"within\":");
    int in = w && w < end;
    const char *named = strstr(line, within_key);
    const char *hit = strstr(line, name_key), *p = strstr(line, pid_key);
    if (hit == line + 1 && p && p < end &&
        (within ? in && named && named < end : !in)) {
      ++s.flights;
      long long bytes = number(line, end, "\"bytes\":");
      long long wire = number(line, end, "\"wire_bytes\":");
      if (bytes >= 0 && wire >= 0) {
        ++s.with_bytes;
        s.bytes += bytes;
        s.wire += wire;
      }
    }
    line = *end ? end + 1 : end;
  }
  return s;
}

/* Checks that rank `pid`'s flights `name` (within `within`) are `flights`,
   each with byte counts, adding up to `bytes` and `wire`. */
static void expect(const char *text, int pid, const char *name,
                   const char *within, int flights, long long bytes,
                   long long wire) {
  sums_t s = sum(text, pid, name, within);
  CHECK(s.flights == flights && s.with_bytes == flights && s.bytes == bytes &&
            s.wire == wire,
        "rank %d, %s%s%s: %d flights (%d with bytes), bytes %lld, wire %lld; "
        "expected %d, bytes %lld, wire %lld",
        pid, name, within ? " within " : "", within ? within : "", s.flights,
        s.with_bytes, s.bytes, s.wire, flights, bytes, wire);
}

int main(int argc, char **argv) {
  braid_rt_context_options_t opts;
  braid_rt_context_options_init(&opts);
  opts.trace = 1;
  CHECK_OK(braid_rt_context_create(&opts, &argc, &argv, &test_ctx));
  int rank = braid_rt_context_rank(test_ctx);
  int n = braid_rt_context_size(test_ctx);
  braid_rt_comm_t *world = braid_rt_context_world(test_ctx);
  CHECK(n >= 2, "run on 2 or more ranks");

  enum { COUNT = 1003, GATHER = 5, SCATTER = 7, BCAST = 11, BLOCK = 3 };
  enum { MESSAGE = 13, ROWS = 24, COLS = 16, RANK = 2 };
  float *buf = calloc(COUNT, sizeof(float));
  float *big = calloc((size_t)n * COUNT, sizeof(float));
  float *out = calloc((size_t)n * COUNT, sizeof(float));
  float *q = calloc(COLS * RANK, sizeof(float));
  float *error = calloc(ROWS * COLS, sizeof(float));
  CHECK(buf && big && out && q && error, "out of memory");
  for (size_t i = 0; i < COUNT; ++i)
    buf[i] = (float)test_value(1, rank, i);
  for (size_t i = 0; i < (size_t)n * COUNT; ++i)
    big[i] = (float)test_value(2, rank, i);
  braid_rt_powersgd_init_q(q, COLS, RANK, 3);

  CHECK_OK(braid_rt_all_reduce_sum_f32(world, buf, COUNT, NULL));
  braid_rt_request_t *req;
  CHECK_OK(braid_rt_all_reduce_sum_f32_start(world, buf, COUNT, NULL, &req));
  CHECK_OK(braid_rt_request_wait(req));
  CHECK_OK(braid_rt_all_gather_f32(world, big, out, GATHER, NULL));
  CHECK_OK(braid_rt_reduce_scatter_sum_f32(world, big, out, SCATTER, NULL));
  CHECK_OK(braid_rt_broadcast_f32(world, buf, BCAST, 1, NULL));
  CHECK_OK(braid_rt_all_to_all_f32(world, big, out, BLOCK, NULL));
  braid_rt_request_t *sreq, *rreq;
  CHECK_OK(braid_rt_recv_f32_start(world, out, MESSAGE, (rank + n - 1) % n, 5,
                                   NULL, &rreq));
  CHECK_OK(braid_rt_send_f32_start(world, big, MESSAGE, (rank + 1) % n, 5, NULL,
                                   &sreq));
  CHECK_OK(braid_rt_request_wait(rreq));
  CHECK_OK(braid_rt_request_wait(sreq));
  CHECK_OK(braid_rt_all_reduce_sum_f32_as_bf16(world, buf, COUNT, NULL));
  CHECK_OK(
      braid_rt_reduce_scatter_sum_f32_as_bf16(world, big, out, SCATTER, NULL));
  CHECK_OK(braid_rt_powersgd_all_reduce_f32(world, big, ROWS, COLS, RANK, q,
                                            error, NULL));
  CHECK_OK(braid_rt_barrier(world, NULL));

  char path[256];
  snprintf(path, sizeof(path), "trace_bytes_test_np%d.json", n);
  CHECK_OK(braid_rt_trace_write(test_ctx, path));
  if (rank == 0) {
    char *text = read_file(path);
    long long f = sizeof(float), h = 2;
    long long sums[2] = {0, 0};
    for (int r = 0; r < n; ++r) {
      /* MPI's collectives: a ring's share. */
      long long ar = (long long)ring(COUNT, n, r);
      expect(text, r, "all_reduce", NULL, 2, 2 * COUNT * f, 2 * ar * f);
      sums[0] += ar * f;
      expect(text, r, "all_gather", NULL, 1, n * GATHER * f,
             (n - 1) * GATHER * f);
      expect(text, r, "reduce_scatter", NULL, 1, n * SCATTER * f,
             (n - 1) * SCATTER * f);
      /* A chain from rank 1: its last rank, 0, forwards nothing. */
      expect(text, r, "broadcast", NULL, 1, BCAST * f, r == 0 ? 0 : BCAST * f);
      expect(text, r, "all_to_all", NULL, 1, n * BLOCK * f,
             (n - 1) * BLOCK * f);
      expect(text, r, "send", NULL, 1, MESSAGE * f, MESSAGE * f);
      expect(text, r, "recv", NULL, 1, MESSAGE * f, 0);
      /* The 16-bit ring sends 2 bytes where MPI's sends 4; its n - 1 (the
         reduce_scatter) or 2 (n - 1) exchanges each post a receive and a
         send. */
      const char *a16 = "all_reduce (16-bit)", *r16 = "reduce_scatter (16-bit)";
      expect(text, r, a16, NULL, 1, COUNT * f, ar * h);
      long long from_prev = (long long)ring(COUNT, n, (r + n - 1) % n);
      expect(text, r, a16, a16, 4 * (n - 1), (ar + from_prev) * h, ar * h);
      sums[1] += ar * h;
      expect(text, r, r16, NULL, 1, n * SCATTER * f, (n - 1) * SCATTER * h);
      expect(text, r, r16, r16, 2 * (n - 1), 2 * (n - 1) * SCATTER * h,
             (n - 1) * SCATTER * h);
      /* PowerSGD: P (rows x rank) and Q (cols x rank) all_reduced in f32. */
      long long pq =
          (long long)(ring(ROWS * RANK, n, r) + ring(COLS * RANK, n, r));
      expect(text, r, "powersgd_all_reduce", NULL, 1, ROWS * COLS * f, pq * f);
      expect(text, r, "all_reduce", "powersgd_all_reduce", 2,
             (ROWS + COLS) * RANK * f, pq * f);
      sums_t barrier = sum(text, r, "barrier", NULL);
      CHECK(barrier.flights == 1 && barrier.with_bytes == 0,
            "rank %d: barrier: %d flights, %d with bytes", r, barrier.flights,
            barrier.with_bytes);
    }
    /* Over the ranks, the comm report's ring figures exactly. */
    CHECK(sums[0] == 2 * (n - 1) * COUNT * f, "all_reduce: %lld bytes in all",
          sums[0]);
    CHECK(sums[1] == 2 * (n - 1) * COUNT * h, "16-bit: %lld bytes in all",
          sums[1]);
    free(text);
    remove(path);
    printf("trace bytes: %d ranks ok\n", n);
  }
  free(buf);
  free(big);
  free(out);
  free(q);
  free(error);
  CHECK_OK(braid_rt_context_destroy(test_ctx));
  return 0;
}
