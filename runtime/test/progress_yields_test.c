/*===- progress_yields_test.c - Does a progress call give the core away? -===*/
/*
 * braid_rt_progress_yields reports OpenMPI's mpi_yield_when_idle, read
 * through the MPI tool interface: under `--mca mpi_yield_when_idle 1` (what
 * braid-run and these tests' mpirun pass with more ranks than cores) every
 * rank must see 1, under `--mca mpi_yield_when_idle 0` 0. The expected value
 * is the argument. NULL arguments are refused.
 */

#include "test_util.h"

int main(int argc, char **argv) {
  braid_rt_context_options_t opts;
  braid_rt_context_options_init(&opts);
  CHECK_OK(braid_rt_context_create(&opts, &argc, &argv, &test_ctx));
  CHECK(argc == 2 && (strcmp(argv[1], "0") == 0 || strcmp(argv[1], "1") == 0),
        "usage: progress_yields_test 0|1 (the expected value)");
  int expected = argv[1][0] == '1';

  int yields = -1;
  CHECK_OK(braid_rt_progress_yields(test_ctx, &yields));
  CHECK(yields == expected, "braid_rt_progress_yields: %d, expected %d",
        yields, expected);
  CHECK_FAILS(test_ctx, braid_rt_progress_yields(test_ctx, NULL),
              BRAID_RT_INVALID_ARGUMENT, "braid_rt_progress_yields");
  CHECK_FAILS(NULL, braid_rt_progress_yields(NULL, &yields),
              BRAID_RT_INVALID_ARGUMENT, "braid_rt_progress_yields");

  CHECK_OK(braid_rt_context_destroy(test_ctx));
  return 0;
}
