/*===- timeout_test.c - A rank that never joins makes the others time out ===*/
/*
 * timeout_test all_reduce (4 ranks): mesh dp x tp = 2 x 2; rank 0 skips an
 * all_reduce over {dp}, so its partner, rank 2, must fail with TIMEOUT after
 * the 2 s timeout, with a message naming the operation, the axes and the
 * ranks. Ranks 1 and 3, in the other dp group, complete.
 * timeout_test recv (2 ranks): rank 1 receives from rank 0, which never
 * sends; the message names the peer and the tag.
 *
 * The rank that timed out checks its status, message and elapsed time,
 * prints the message and ends every rank with exit code 42 (1 if a check
 * failed); expect_exit checks for 42 and the message. The skipping rank
 * sleeps, and would exit 3 if nothing ended it.
 */

#include "test_util.h"

#include "braid/rt/mesh.h"
#include "braid/rt/trace.h"

#include <unistd.h>

static void expect_timeout(braid_rt_status_t status, double start_s,
                           const char *expected_message) {
  double elapsed = braid_rt_now_seconds() - start_s;
  const char *message = braid_rt_context_last_error(test_ctx);
  CHECK(status == BRAID_RT_TIMEOUT, "got %s: %s",
        braid_rt_status_string(status), message);
  CHECK(strcmp(message, expected_message) == 0, "message '%s', expected '%s'",
        message, expected_message);
  CHECK(elapsed >= 2.0 && elapsed < 10.0, "timed out after %.2f s", elapsed);
  fprintf(stderr, "rank %d: %s: %s\n", braid_rt_context_rank(test_ctx),
          braid_rt_status_string(status), message);
  fflush(stderr);
  braid_rt_context_abort(test_ctx, 42);
}

int main(int argc, char **argv) {
  braid_rt_context_options_t opts;
  braid_rt_context_options_init(&opts);
  opts.collective_timeout_s = 2;
  CHECK_OK(braid_rt_context_create(&opts, &argc, &argv, &test_ctx));
  int rank = braid_rt_context_rank(test_ctx);
  const char *mode = argc > 1 ? argv[1] : "";
  float buf[16] = {0};

  if (strcmp(mode, "all_reduce") == 0) {
    CHECK(braid_rt_context_size(test_ctx) == 4, "needs 4 ranks");
    int64_t dims[2] = {2, 2};
    const char *names[2] = {"dp", "tp"};
    braid_rt_mesh_t *mesh = NULL;
    braid_rt_comm_t *dp = NULL;
    int axis = 0;
    CHECK_OK(braid_rt_mesh_create(test_ctx, 2, dims, names, &mesh));
    CHECK_OK(braid_rt_mesh_comm(mesh, 1, &axis, &dp));
    if (rank != 0) {
      double start = braid_rt_now_seconds();
      braid_rt_status_t status =
          braid_rt_all_reduce_sum_f32(dp, buf, 16, NULL);
      if (rank == 2)
        expect_timeout(status, start,
                       "all_reduce of 16 f32 over mesh axes {dp} (rank 1 of "
                       "2, world rank 2): no completion within 2 s");
      CHECK_OK(status);
    }
  } else if (strcmp(mode, "recv") == 0) {
    CHECK(braid_rt_context_size(test_ctx) == 2, "needs 2 ranks");
    if (rank == 1) {
      double start = braid_rt_now_seconds();
      expect_timeout(braid_rt_recv_f32(braid_rt_context_world(test_ctx), buf,
                                       16, 0, 7, NULL),
                     start,
                     "recv of 16 f32 from rank 0 (tag 7) over world (rank 1 "
                     "of 2, world rank 1): no completion within 2 s");
    }
  } else {
    CHECK(0, "unknown mode '%s'", mode);
  }
  /* Wait to be ended by the rank that timed out. */
  sleep(30);
  return 3;
}
