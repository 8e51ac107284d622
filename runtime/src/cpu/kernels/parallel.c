/*===- parallel.c - Loops of generated code on the kernels' threads ------===*/
#include "braid/rt/parallel.h"

#include "internal.h"

void braid_rt_parallel_for(int64_t n, int64_t work,
                           void (*fn)(void *ctx, int64_t begin, int64_t end),
                           void *ctx) {
  if (n <= 0)
    return;
#ifdef _OPENMP
  if (work >= BRAID_RT_PARALLEL_MIN_WORK) {
    /* The ranges of schedule(static): one contiguous block per thread. */
#pragma omp parallel
    {
      int64_t begin, end;
      braid_rt_split_range(n, omp_get_num_threads(), omp_get_thread_num(), 1,
                           &begin, &end);
      if (begin < end)
        fn(ctx, begin, end);
    }
    return;
  }
#endif
  fn(ctx, 0, n);
}
