/*===- errors_test.c - Every argument check returns a status and a message ===*/
/*
 * Invalid calls must fail with INVALID_ARGUMENT and a message saying what is
 * wrong, touch nothing, and leave the communicator usable: the test ends
 * with a collective that must still give the right answer.
 */

#include "test_util.h"

#include "braid/rt/mesh.h"
#include "braid/rt/trace.h"

#include <limits.h>

static void check_status_strings(void) {
  static const struct {
    braid_rt_status_t status;
    const char *name;
  } names[] = {
      {BRAID_RT_OK, "OK"},
      {BRAID_RT_INVALID_ARGUMENT, "INVALID_ARGUMENT"},
      {BRAID_RT_OUT_OF_MEMORY, "OUT_OF_MEMORY"},
      {BRAID_RT_COMM_FAILURE, "COMM_FAILURE"},
      {BRAID_RT_TIMEOUT, "TIMEOUT"},
      {BRAID_RT_IO_ERROR, "IO_ERROR"},
      {BRAID_RT_DATA_CORRUPT, "DATA_CORRUPT"},
      {BRAID_RT_UNSUPPORTED, "UNSUPPORTED"},
      {BRAID_RT_INTERNAL, "INTERNAL"},
      {(braid_rt_status_t)99, "UNKNOWN"},
  };
  for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); ++i)
    CHECK(strcmp(braid_rt_status_string(names[i].status), names[i].name) == 0,
          "status %d is '%s'", (int)names[i].status,
          braid_rt_status_string(names[i].status));
}

/* Before MPI starts: bad options fail without a context. */
static void check_bad_options(int *argc, char ***argv) {
  braid_rt_context_t *ctx = (braid_rt_context_t *)&ctx;
  braid_rt_context_options_t opts;
  braid_rt_context_options_init(&opts);
  opts.version = 2;
  CHECK_FAILS(NULL, braid_rt_context_create(&opts, argc, argv, &ctx),
              BRAID_RT_INVALID_ARGUMENT, "version 2; this runtime expects");
  CHECK(ctx == NULL, "out_ctx not reset on failure");
  braid_rt_context_options_init(&opts);
  opts.collective_timeout_s = -1;
  CHECK_FAILS(NULL, braid_rt_context_create(&opts, argc, argv, &ctx),
              BRAID_RT_INVALID_ARGUMENT, "collective timeout -1 s is not");
}

static void check_collective_arguments(braid_rt_comm_t *world) {
  int size = braid_rt_comm_size(world);
  float buf[64] = {0}, other[64] = {0};
  braid_rt_request_t *req = NULL;

  CHECK_FAILS(NULL, braid_rt_all_reduce_sum_f32(NULL, buf, 4, NULL),
              BRAID_RT_INVALID_ARGUMENT, "all_reduce: the communicator is NULL");
  CHECK_FAILS(test_ctx, braid_rt_all_reduce_sum_f32(world, NULL, 4, NULL),
              BRAID_RT_INVALID_ARGUMENT,
              "all_reduce over world: buf is NULL but count is 4");
  CHECK_FAILS(test_ctx,
              braid_rt_all_reduce_sum_f64((braid_rt_comm_t *)world,
                                          (double *)buf, (size_t)INT_MAX + 1,
                                          NULL),
              BRAID_RT_INVALID_ARGUMENT, "count 2147483648 exceeds INT_MAX");
  CHECK_FAILS(test_ctx, braid_rt_all_reduce_sum_f32_start(world, buf, 4, NULL,
                                                          NULL),
              BRAID_RT_INVALID_ARGUMENT, "all_reduce: out_request is NULL");
  CHECK_FAILS(test_ctx, braid_rt_all_gather_f32(world, buf, NULL, 4, NULL),
              BRAID_RT_INVALID_ARGUMENT, "all_gather over world: recv is NULL");
  /* send inside recv: MPI would read what it is overwriting. */
  CHECK_FAILS(test_ctx, braid_rt_all_gather_f32(world, buf + 4, buf, 4, NULL),
              BRAID_RT_INVALID_ARGUMENT,
              "all_gather over world: the send and receive buffers overlap");
  CHECK_FAILS(test_ctx,
              braid_rt_reduce_scatter_sum_f32(world, buf, buf + 1, 2, NULL),
              BRAID_RT_INVALID_ARGUMENT, "reduce_scatter over world: the send");
  CHECK_FAILS(test_ctx, braid_rt_all_to_all_f64_start(world, (double *)buf,
                                                      (double *)buf, 2, NULL,
                                                      &req),
              BRAID_RT_INVALID_ARGUMENT, "all_to_all over world: the send");
  CHECK(req == NULL, "out_request not reset on failure");
  CHECK_FAILS(test_ctx, braid_rt_broadcast_f32(world, buf, 4, size, NULL),
              BRAID_RT_INVALID_ARGUMENT, "broadcast over world: root");
  CHECK_FAILS(test_ctx, braid_rt_broadcast_f32(world, buf, 4, -1, NULL),
              BRAID_RT_INVALID_ARGUMENT, "root -1 is not in 0..");
  CHECK_FAILS(test_ctx, braid_rt_send_f32(world, buf, 4, size, 0, NULL),
              BRAID_RT_INVALID_ARGUMENT, "send over world: peer");
  CHECK_FAILS(test_ctx, braid_rt_recv_f32_start(world, buf, 4, 0, 40000, NULL,
                                                &req),
              BRAID_RT_INVALID_ARGUMENT, "tag 40000 is not in 0..32767");
  CHECK_FAILS(NULL, braid_rt_request_test(NULL, NULL),
              BRAID_RT_INVALID_ARGUMENT, "braid_rt_request_test: NULL");
  CHECK_OK(braid_rt_request_wait(NULL));

  /* Tracing is off: begin/end are no-ops, even unbalanced. */
  CHECK_OK(braid_rt_trace_end(test_ctx));
  CHECK(braid_rt_trace_event_count(test_ctx) == 0, "events recorded");

  /* After all that, the communicator still works, with an explicit stream. */
  braid_rt_stream_t *stream = NULL;
  CHECK_OK(braid_rt_stream_create(test_ctx, &stream));
  for (int i = 0; i < 64; ++i)
    other[i] = (float)i;
  CHECK_OK(braid_rt_all_reduce_sum_f32(world, other, 64, stream));
  CHECK_OK(braid_rt_stream_synchronize(stream));
  for (int i = 0; i < 64; ++i)
    CHECK(other[i] == (float)(i * size), "element %d is %g", i, other[i]);
  CHECK_OK(braid_rt_stream_destroy(stream));
}

int main(int argc, char **argv) {
  check_status_strings();
  check_bad_options(&argc, &argv);
  CHECK_OK(braid_rt_context_create(NULL, &argc, &argv, &test_ctx));
  CHECK(braid_rt_context_timeout(test_ctx) == 300, "default timeout %g",
        braid_rt_context_timeout(test_ctx));
  check_collective_arguments(braid_rt_context_world(test_ctx));
  CHECK_OK(braid_rt_context_destroy(test_ctx));
  return 0;
}
