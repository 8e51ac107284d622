/*===- progress_test.c - Started collectives progress during compute -----===*/
/*
 * OpenMPI moves a started collective only inside MPI calls. This test
 * starts an all_reduce large enough to need many rounds, then only computes
 * and calls braid_rt_progress: the all_reduce must complete before its wait
 * (braid_rt_progress reports none active) and give the exact sum. It then
 * prints how long the wait still took after the same compute with and
 * without progress calls (a measurement, not a check: the machine is
 * shared). With many operations in flight, each progress call must test
 * them in one MPI_Testsome per 64 and never MPI_Test each (counted through
 * MPI's profiling interface): every MPI call that moves nothing yields the
 * core where ranks outnumber cores.
 */

#include "test_util.h"

#include "braid/rt/mesh.h"
#include "braid/rt/trace.h"

#include <mpi.h>
#include <stdlib.h>

enum { COUNT = 1 << 22 }; /* 16 MiB of f32: many rounds of the ring */

/* The runtime's tests, counted (MPI's profiling interface). */
static long test_calls, testsome_calls;

int MPI_Test(MPI_Request *request, int *flag, MPI_Status *status) {
  ++test_calls;
  return PMPI_Test(request, flag, status);
}

int MPI_Testsome(int incount, MPI_Request requests[], int *outcount,
                 int indices[], MPI_Status statuses[]) {
  ++testsome_calls;
  return PMPI_Testsome(incount, requests, outcount, indices, statuses);
}

/* 70 small all_reduces in flight, progressed to completion: one
   MPI_Testsome per 64 of those still incomplete in each call, no MPI_Test;
   then the waits, and exact sums. */
static void test_many_in_flight(braid_rt_comm_t *world, int rank, int size) {
  enum { MANY = 70, SMALL = 1000 };
  float *bufs = malloc(sizeof(float) * MANY * SMALL);
  braid_rt_request_t *reqs[MANY];
  CHECK(bufs, "out of memory");
  for (size_t i = 0; i < (size_t)MANY * SMALL; ++i)
    bufs[i] = (float)test_value(12, rank, i);
  for (int k = 0; k < MANY; ++k)
    CHECK_OK(braid_rt_all_reduce_sum_f32_start(world, bufs + k * SMALL, SMALL,
                                               NULL, &reqs[k]));
  long tests = test_calls, testsomes = testsome_calls, calls = 0;
  int active = MANY;
  double t0 = braid_rt_now_seconds();
  while (active > 0) {
    int before = active;
    long batches = testsome_calls;
    CHECK_OK(braid_rt_progress(test_ctx, &active));
    ++calls;
    CHECK(testsome_calls - batches == (before + 63) / 64,
          "a progress call over %d in flight: %ld MPI_Testsome, expected %d",
          before, testsome_calls - batches, (before + 63) / 64);
    CHECK(braid_rt_now_seconds() - t0 < 30,
          "%d of %d all_reduces incomplete after 30 s of progress calls",
          active, MANY);
  }
  CHECK(test_calls == tests,
        "%ld progress calls made %ld MPI_Test calls, expected none", calls,
        test_calls - tests);
  for (int k = 0; k < MANY; ++k)
    CHECK_OK(braid_rt_request_wait(reqs[k]));
  for (size_t i = 0; i < (size_t)MANY * SMALL; i += 7) {
    double want = 0;
    for (int r = 0; r < size; ++r)
      want += test_value(12, r, i);
    CHECK(bufs[i] == (float)want,
          "many in flight: element %zu: %g, expected %g", i, (double)bufs[i],
          want);
  }
  if (rank == 0)
    printf("%d all_reduces in flight done after %ld progress calls, %ld "
           "MPI_Testsome\n",
           MANY, calls, testsome_calls - testsomes);
  free(bufs);
}

/* About a millisecond of arithmetic that the compiler cannot drop. */
static double compute(double *scratch, int n) {
  double s = 0;
  for (int r = 0; r < 8; ++r)
    for (int i = 0; i < n; ++i) {
      scratch[i] = scratch[i] * 0.999 + 1e-3 * r;
      s += scratch[i];
    }
  return s;
}

static void fill(float *buf, int rank) {
  for (size_t i = 0; i < COUNT; ++i)
    buf[i] = (float)test_value(11, rank, i);
}

static void check_sum(const float *buf, int size) {
  for (size_t i = 0; i < COUNT; i += 4099) {
    double want = 0;
    for (int r = 0; r < size; ++r)
      want += test_value(11, r, i);
    CHECK(buf[i] == (float)want, "element %zu: %g, expected %g", i,
          (double)buf[i], want);
  }
}

/* Starts the all_reduce, computes `chunks` times (with a progress call after
   each when `progress`), and returns the seconds the wait then took. */
static double exposed_wait(braid_rt_comm_t *world, float *buf, double *scratch,
                           int chunks, int progress, double *sink) {
  braid_rt_request_t *req = NULL;
  CHECK_OK(braid_rt_all_reduce_sum_f32_start(world, buf, COUNT, NULL, &req));
  for (int c = 0; c < chunks; ++c) {
    *sink += compute(scratch, 1 << 14);
    if (progress)
      CHECK_OK(braid_rt_progress(test_ctx, NULL));
  }
  double t0 = braid_rt_now_seconds();
  CHECK_OK(braid_rt_request_wait(req));
  return braid_rt_now_seconds() - t0;
}

int main(int argc, char **argv) {
  braid_rt_context_options_t opts;
  braid_rt_context_options_init(&opts);
  opts.collective_timeout_s = 60;
  CHECK_OK(braid_rt_context_create(&opts, &argc, &argv, &test_ctx));
  braid_rt_comm_t *world = braid_rt_context_world(test_ctx);
  int rank = braid_rt_context_rank(test_ctx);
  int size = braid_rt_context_size(test_ctx);

  float *buf = malloc(sizeof(float) * COUNT);
  double *scratch = calloc(1 << 14, sizeof(double));
  CHECK(buf && scratch, "out of memory");
  double sink = 0;

  /* Nothing in flight: no error, none active. */
  int active = -1;
  CHECK_OK(braid_rt_progress(test_ctx, &active));
  CHECK(active == 0, "%d active before any start", active);
  CHECK(braid_rt_progress(NULL, &active) == BRAID_RT_INVALID_ARGUMENT,
        "a NULL context is refused");

  test_many_in_flight(world, rank, size);

  /* Only compute and progress until the all_reduce is done. */
  fill(buf, rank);
  braid_rt_request_t *req = NULL;
  CHECK_OK(braid_rt_all_reduce_sum_f32_start(world, buf, COUNT, NULL, &req));
  double t0 = braid_rt_now_seconds();
  long calls = 0;
  do {
    sink += compute(scratch, 1 << 12);
    CHECK_OK(braid_rt_progress(test_ctx, &active));
    ++calls;
    CHECK(braid_rt_now_seconds() - t0 < 30,
          "the all_reduce did not complete in 30 s of compute and %ld "
          "progress calls (%d active)",
          calls, active);
  } while (active > 0);
  CHECK_OK(braid_rt_request_wait(req));
  check_sum(buf, size);
  if (rank == 0)
    printf("all_reduce of %d f32 on %d ranks done after %ld progress calls "
           "(%.1f ms of compute)\n",
           COUNT, size, calls, 1e3 * (braid_rt_now_seconds() - t0));

  /* The wait left after the same compute, without and with progress. */
  for (int round = 0; round < 2; ++round) {
    fill(buf, rank);
    double without = exposed_wait(world, buf, scratch, 64, 0, &sink);
    check_sum(buf, size);
    fill(buf, rank);
    double with = exposed_wait(world, buf, scratch, 64, 1, &sink);
    check_sum(buf, size);
    if (rank == 0)
      printf("round %d: wait after compute: %.2f ms without progress calls, "
             "%.2f ms with\n",
             round, 1e3 * without, 1e3 * with);
  }
  if (sink == 42.0)
    printf("unlikely\n");

  free(buf);
  free(scratch);
  CHECK_OK(braid_rt_context_destroy(test_ctx));
  return 0;
}
