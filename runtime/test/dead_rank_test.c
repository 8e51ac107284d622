/*===- dead_rank_test.c - A rank dies in the middle of training ----------===*/
/*
 * Every rank runs all_reduces in a loop; after step 3 the last rank kills
 * itself with SIGKILL, as the OOM killer would. The others are then stuck in
 * step 4's all_reduce. mpirun must notice the death and end the job with a
 * non-zero status; expect_exit bounds the time that takes and checks that
 * step 3 completed (so that the death, not some earlier failure, ended it).
 * The 300 s collective timeout is far longer than the bound: mpirun, not the
 * timeout, has to do this.
 */

#include "test_util.h"

#include <signal.h>
#include <unistd.h>

int main(int argc, char **argv) {
  CHECK_OK(braid_rt_context_create(NULL, &argc, &argv, &test_ctx));
  int rank = braid_rt_context_rank(test_ctx);
  int size = braid_rt_context_size(test_ctx);
  braid_rt_comm_t *world = braid_rt_context_world(test_ctx);
  float buf[1024];
  for (int step = 0; step < 1000; ++step) {
    for (int i = 0; i < 1024; ++i)
      buf[i] = 1.0f;
    CHECK_OK(braid_rt_all_reduce_sum_f32(world, buf, 1024, NULL));
    CHECK(buf[0] == (float)size, "step %d: %g", step, buf[0]);
    if (step == 3 && rank == 0) {
      printf("step 3 done on all ranks\n");
      fflush(stdout);
    }
    if (step == 3 && rank == size - 1)
      raise(SIGKILL);
  }
  fprintf(stderr, "rank %d: survived its peer's death\n", rank);
  return 0;
}
