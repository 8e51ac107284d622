/*===- parallel.c - Loops of generated code on the kernels' threads ------===*/
#include "braid/rt/parallel.h"

#include "internal.h"

#ifdef _OPENMP
/* libomp's entry points (omp.h is not always on a versioned Clang's path). */
int omp_get_num_threads(void);
int omp_get_thread_num(void);
#endif

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
      int64_t threads = omp_get_num_threads(), t = omp_get_thread_num();
      int64_t chunk = n / threads, extra = n % threads;
      int64_t begin = t * chunk + (t < extra ? t : extra);
      int64_t end = begin + chunk + (t < extra ? 1 : 0);
      if (begin < end)
        fn(ctx, begin, end);
    }
    return;
  }
#endif
  fn(ctx, 0, n);
}
