/*===- parallel.h - Loops of generated code on the kernels' threads ------===*/
/*
 * CPU backend only. The fused loops braidc generates (braid.fused, see
 * docs/codegen.md#fusion) run on the same threads, with the same policy, as
 * the runtime's own elementwise kernels: OpenMP threads (OMP_NUM_THREADS)
 * with a static schedule when the loop has enough work, else the calling
 * thread, so that a generated program needs no OpenMP flags of its own.
 */
#ifndef BRAID_RT_PARALLEL_H
#define BRAID_RT_PARALLEL_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Calls fn(ctx, begin, end) on disjoint ranges covering [0, n), at most one
   range per thread, in parallel when `work` (the elements the whole loop
   touches) is at least the kernels' threshold; fn(ctx, 0, n) on the calling
   thread otherwise, or when the runtime was built without OpenMP. Returns
   when every range is done. `fn` must be safe to run concurrently on
   disjoint ranges. */
void braid_rt_parallel_for(int64_t n, int64_t work,
                           void (*fn)(void *ctx, int64_t begin, int64_t end),
                           void *ctx);

#ifdef __cplusplus
}
#endif

#endif /* BRAID_RT_PARALLEL_H */
