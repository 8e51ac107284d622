/*===- internal.h - Helpers shared by the CPU kernels --------------------===*/
#ifndef BRAID_RT_CPU_KERNELS_INTERNAL_H
#define BRAID_RT_CPU_KERNELS_INTERNAL_H

#include "braid/rt/kernels.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Loops over fewer elements (or rows times columns) than this run on the
   calling thread: on a few cores, waking a thread team costs microseconds,
   more than a small loop. */
#define BRAID_RT_PARALLEL_MIN_WORK ((int64_t)1 << 15)

#ifdef _OPENMP
/* libomp's entry points (omp.h is not always on a versioned Clang's path). */
int omp_get_num_threads(void);
int omp_get_thread_num(void);
int omp_get_max_threads(void);
int omp_in_parallel(void);
#endif

#define BRAID_RT_STRINGIFY(x) #x
#define BRAID_RT_PRAGMA(x) _Pragma(BRAID_RT_STRINGIFY(x))
#ifdef _OPENMP
/* `#pragma omp parallel for` when `work` elements are worth the threads. */
#define BRAID_RT_PARALLEL_FOR(work)                                            \
  BRAID_RT_PRAGMA(omp parallel for if ((work) >= BRAID_RT_PARALLEL_MIN_WORK)   \
                      schedule(static))
#else
#define BRAID_RT_PARALLEL_FOR(work)
#endif

/* The same for a loop mapping elements whose result may be one of its
   operands (kernels.h's in-place updates): `simd` asserts that iterations
   do not depend on each other, which an exactly aliased operand and result
   do not. Without it Clang guards the vector loop with a check that the
   pointers are at least a vector apart, which an in-place call fails, and
   runs the scalar loop: about 14 times slower for the GELU gradient that
   buffer reuse hands its dy (issue 15). Vector and scalar iterations round
   alike (no libm call, no contraction), so the results do not change.
   Without OpenMP, -fopenmp-simd (CMakeLists.txt) still honours `simd`. */
#if defined(_OPENMP)
#define BRAID_RT_PARALLEL_FOR_SIMD(work)                                       \
  BRAID_RT_PRAGMA(omp parallel for simd if (parallel : (work) >=               \
                                            BRAID_RT_PARALLEL_MIN_WORK)        \
                      schedule(static))
#define BRAID_RT_SIMD BRAID_RT_PRAGMA(omp simd)
#elif defined(BRAID_RT_OPENMP_SIMD)
#define BRAID_RT_PARALLEL_FOR_SIMD(work) BRAID_RT_PRAGMA(omp simd)
#define BRAID_RT_SIMD BRAID_RT_PRAGMA(omp simd)
#else
#define BRAID_RT_PARALLEL_FOR_SIMD(work)
#define BRAID_RT_SIMD
#endif

/* The attention kernels before tiling (attention.c): per (batch, query
   head) a [seq_q, seq_kv] score matrix through OpenBLAS SGEMM. Exported, not
   in kernels.h: the baseline that bench/attention.py and the kernel tests
   compare the tiled kernels with. */
braid_rt_status_t braid_rt_cpu_attention_sgemm_f32(
    braid_rt_stream_t *stream, const float *q, const float *k, const float *v,
    int64_t batch, int64_t seq_q, int64_t seq_kv, int64_t heads_q,
    int64_t heads_kv, int64_t dim, int causal, double scale, float *y);
braid_rt_status_t braid_rt_cpu_attention_grad_all_sgemm_f32(
    braid_rt_stream_t *stream, const float *q, const float *k, const float *v,
    const float *dy, int64_t batch, int64_t seq_q, int64_t seq_kv,
    int64_t heads_q, int64_t heads_kv, int64_t dim, int causal, double scale,
    float *dq, float *dk, float *dv);

/* Part `part` of `parts` nearly equal ranges of [0, n), in whole units of
   `unit` elements (the last range ends at n). */
static inline void braid_rt_split_range(int64_t n, int64_t parts, int64_t part,
                                        int64_t unit, int64_t *begin,
                                        int64_t *end) {
  int64_t units = (n + unit - 1) / unit;
  int64_t chunk = units / parts, extra = units % parts;
  int64_t b = part * chunk + (part < extra ? part : extra);
  int64_t e = b + chunk + (part < extra ? 1 : 0);
  *begin = b * unit < n ? b * unit : n;
  *end = e * unit < n ? e * unit : n;
}

/* memcpy and memset to 0 of `bytes`, split over the kernels' threads when
   they cover at least BRAID_RT_PARALLEL_MIN_WORK floats. */
static inline void braid_rt_parallel_copy(void *dst, const void *src,
                                          size_t bytes) {
#ifdef _OPENMP
  if (bytes >= BRAID_RT_PARALLEL_MIN_WORK * sizeof(float)) {
#pragma omp parallel
    {
      int64_t begin, end;
      braid_rt_split_range((int64_t)bytes, omp_get_num_threads(),
                           omp_get_thread_num(), 64, &begin, &end);
      if (begin < end)
        memcpy((char *)dst + begin, (const char *)src + begin,
               (size_t)(end - begin));
    }
    return;
  }
#endif
  memcpy(dst, src, bytes);
}

static inline void braid_rt_parallel_zero(void *dst, size_t bytes) {
#ifdef _OPENMP
  if (bytes >= BRAID_RT_PARALLEL_MIN_WORK * sizeof(float)) {
#pragma omp parallel
    {
      int64_t begin, end;
      braid_rt_split_range((int64_t)bytes, omp_get_num_threads(),
                           omp_get_thread_num(), 64, &begin, &end);
      if (begin < end)
        memset((char *)dst + begin, 0, (size_t)(end - begin));
    }
    return;
  }
#endif
  memset(dst, 0, bytes);
}

/* Dimension d of a rank-`rank` shape right-aligned in rank `out_rank`
   (1 where the shape has no such dimension), as NumPy broadcasting sees it. */
static inline int64_t braid_rt_dim_at(const int64_t *shape, int64_t rank,
                                      int64_t out_rank, int64_t d) {
  int64_t i = d - (out_rank - rank);
  return i < 0 ? 1 : shape[i];
}

static inline int64_t braid_rt_num_elements(const int64_t *shape,
                                            int64_t rank) {
  int64_t n = 1;
  for (int64_t d = 0; d < rank; ++d)
    n *= shape[d];
  return n;
}

/* The flat offset, in a tensor of shape `in` (rank in_rank) broadcast to
   `out` (rank out_rank), of the element at flat index `row * out[last]` of
   the result, i.e. of the start of result row `row`. */
static inline int64_t braid_rt_broadcast_row_offset(int64_t row,
                                                    const int64_t *in,
                                                    int64_t in_rank,
                                                    const int64_t *out,
                                                    int64_t out_rank) {
  int64_t offset = 0;
  int64_t stride = braid_rt_dim_at(in, in_rank, out_rank, out_rank - 1);
  for (int64_t d = out_rank - 2; d >= 0 && row; --d) {
    int64_t od = out[d], id = braid_rt_dim_at(in, in_rank, out_rank, d);
    int64_t idx = row % od;
    row /= od;
    if (id != 1)
      offset += idx * stride;
    stride *= id;
  }
  return offset;
}

#endif /* BRAID_RT_CPU_KERNELS_INTERNAL_H */
