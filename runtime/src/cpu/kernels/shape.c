/*===- shape.c - Data movement, reductions and constants -----------------===*/
/*
 * General-rank kernels walk their result (or input) one row, the last
 * dimension, at a time: each row's offset comes from its index by division
 * over the shape, so no kernel needs scratch for index tables and rows can
 * be split among threads.
 */
#include "internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Row-major stride of dimension d of `shape`. */
static inline int64_t stride_of(const int64_t *shape, int64_t rank,
                                int64_t d) {
  int64_t s = 1;
  for (int64_t i = d + 1; i < rank; ++i)
    s *= shape[i];
  return s;
}

#define DEFINE_MOVES(SUFFIX, T)                                                \
  void braid_rt_copy_##SUFFIX(braid_rt_stream_t *stream, const T *x,           \
                              int64_t count, T *y) {                           \
    if (x != y && count > 0)                                                   \
      braid_rt_parallel_copy(y, x, (size_t)count * sizeof(T));                 \
  }                                                                            \
                                                                               \
  void braid_rt_fill_##SUFFIX(braid_rt_stream_t *stream, T value,              \
                              int64_t count, T *y) {                           \
    BRAID_RT_PARALLEL_FOR(count)                                               \
    for (int64_t i = 0; i < count; ++i)                                        \
      y[i] = value;                                                            \
  }                                                                            \
                                                                               \
  void braid_rt_transpose_##SUFFIX(braid_rt_stream_t *stream, const T *x,      \
                                   int64_t rank, const int64_t *shape,         \
                                   const int64_t *permutation, T *y) {         \
    int64_t total = braid_rt_num_elements(shape, rank);                        \
    if (total == 0)                                                            \
      return;                                                                  \
    if (rank == 0) {                                                           \
      y[0] = x[0];                                                             \
      return;                                                                  \
    }                                                                          \
    int64_t cols = shape[permutation[rank - 1]];                               \
    int64_t inner = stride_of(shape, rank, permutation[rank - 1]);             \
    int64_t rows = total / cols;                                               \
    BRAID_RT_PARALLEL_FOR(total)                                               \
    for (int64_t r = 0; r < rows; ++r) {                                       \
      int64_t off = 0, rest = r;                                               \
      for (int64_t i = rank - 2; i >= 0 && rest; --i) {                        \
        int64_t p = permutation[i];                                            \
        off += (rest % shape[p]) * stride_of(shape, rank, p);                  \
        rest /= shape[p];                                                      \
      }                                                                        \
      const T *px = x + off;                                                   \
      T *py = y + r * cols;                                                    \
      if (inner == 1)                                                          \
        memcpy(py, px, (size_t)cols * sizeof(T));                              \
      else                                                                     \
        for (int64_t j = 0; j < cols; ++j)                                     \
          py[j] = px[j * inner];                                               \
    }                                                                          \
  }                                                                            \
                                                                               \
  void braid_rt_broadcast_to_##SUFFIX(                                         \
      braid_rt_stream_t *stream, const T *x, int64_t in_rank,                  \
      const int64_t *in_shape, int64_t out_rank, const int64_t *out_shape,     \
      T *y) {                                                                  \
    int64_t total = braid_rt_num_elements(out_shape, out_rank);                \
    if (total == 0)                                                            \
      return;                                                                  \
    if (out_rank == 0) {                                                       \
      y[0] = x[0];                                                             \
      return;                                                                  \
    }                                                                          \
    int64_t cols = out_shape[out_rank - 1];                                    \
    int64_t step =                                                             \
        braid_rt_dim_at(in_shape, in_rank, out_rank, out_rank - 1) == 1 ? 0    \
                                                                        : 1;   \
    int64_t rows = total / cols;                                               \
    BRAID_RT_PARALLEL_FOR(total)                                               \
    for (int64_t r = 0; r < rows; ++r) {                                       \
      const T *px = x + braid_rt_broadcast_row_offset(r, in_shape, in_rank,    \
                                                      out_shape, out_rank);    \
      T *py = y + r * cols;                                                    \
      for (int64_t j = 0; j < cols; ++j)                                       \
        py[j] = px[j * step];                                                  \
    }                                                                          \
  }                                                                            \
                                                                               \
  void braid_rt_slice_##SUFFIX(braid_rt_stream_t *stream, const T *x,          \
                               int64_t rank, const int64_t *in_shape,          \
                               const int64_t *start, const int64_t *stride,    \
                               const int64_t *out_shape, T *y) {               \
    int64_t total = braid_rt_num_elements(out_shape, rank);                    \
    if (total == 0)                                                            \
      return;                                                                  \
    if (rank == 0) {                                                           \
      y[0] = x[0];                                                             \
      return;                                                                  \
    }                                                                          \
    int64_t cols = out_shape[rank - 1];                                        \
    int64_t step = stride ? stride[rank - 1] : 1;                              \
    int64_t rows = total / cols;                                               \
    BRAID_RT_PARALLEL_FOR(total)                                               \
    for (int64_t r = 0; r < rows; ++r) {                                       \
      int64_t off = start[rank - 1], in_stride = in_shape[rank - 1], rest = r; \
      for (int64_t d = rank - 2; d >= 0; --d) {                                \
        int64_t idx = rest % out_shape[d];                                     \
        rest /= out_shape[d];                                                  \
        off += (start[d] + idx * (stride ? stride[d] : 1)) * in_stride;        \
        in_stride *= in_shape[d];                                              \
      }                                                                        \
      const T *px = x + off;                                                   \
      T *py = y + r * cols;                                                    \
      for (int64_t j = 0; j < cols; ++j)                                       \
        py[j] = px[j * step];                                                  \
    }                                                                          \
  }                                                                            \
                                                                               \
  void braid_rt_concat_##SUFFIX(                                               \
      braid_rt_stream_t *stream, const T *const *inputs, int64_t num_inputs,   \
      int64_t rank, const int64_t *out_shape, int64_t axis,                    \
      const int64_t *input_axis_sizes, T *y) {                                 \
    int64_t outer = braid_rt_num_elements(out_shape, axis);                    \
    int64_t inner = stride_of(out_shape, rank, axis);                          \
    int64_t size = out_shape[axis];                                            \
    int64_t at = 0;                                                            \
    for (int64_t i = 0; i < num_inputs; ++i) {                                 \
      int64_t part = input_axis_sizes[i] * inner;                              \
      if (part > 0)                                                            \
        for (int64_t o = 0; o < outer; ++o)                                    \
          memcpy(y + o * size * inner + at * inner, inputs[i] + o * part,      \
                 (size_t)part * sizeof(T));                                    \
      at += input_axis_sizes[i];                                               \
    }                                                                          \
  }

DEFINE_MOVES(f32, float)
DEFINE_MOVES(i32, int32_t)

void braid_rt_copy_bf16(braid_rt_stream_t *stream, const uint16_t *x,
                        int64_t count, uint16_t *y) {
  (void)stream;
  if (x != y && count > 0)
    braid_rt_parallel_copy(y, x, (size_t)count * sizeof(uint16_t));
}

void braid_rt_slice_grad_f32(braid_rt_stream_t *stream, const float *dy,
                             int64_t rank, const int64_t *dy_shape,
                             const int64_t *start, const int64_t *stride,
                             const int64_t *dx_shape, float *dx) {
  int64_t dx_total = braid_rt_num_elements(dx_shape, rank);
  braid_rt_parallel_zero(dx, (size_t)dx_total * sizeof(float));
  int64_t total = braid_rt_num_elements(dy_shape, rank);
  if (total == 0)
    return;
  if (rank == 0) {
    dx[0] = dy[0];
    return;
  }
  int64_t cols = dy_shape[rank - 1];
  int64_t step = stride ? stride[rank - 1] : 1;
  int64_t rows = total / cols;
  BRAID_RT_PARALLEL_FOR(total)
  for (int64_t r = 0; r < rows; ++r) {
    int64_t off = start[rank - 1], out_stride = dx_shape[rank - 1], rest = r;
    for (int64_t d = rank - 2; d >= 0; --d) {
      int64_t idx = rest % dy_shape[d];
      rest /= dy_shape[d];
      off += (start[d] + idx * (stride ? stride[d] : 1)) * out_stride;
      out_stride *= dx_shape[d];
    }
    const float *pdy = dy + r * cols;
    float *pdx = dx + off;
    for (int64_t j = 0; j < cols; ++j)
      pdx[j * step] = pdy[j];
  }
}

static int is_reduced(const int64_t *axes, int64_t num_axes, int64_t d) {
  for (int64_t i = 0; i < num_axes; ++i)
    if (axes[i] == d)
      return 1;
  return 0;
}

/* The offset in the reduction's result of the start of input row `row`
   (the input's last dimension), reduced dimensions contributing nothing. */
static inline int64_t reduced_row_offset(int64_t row, int64_t rank,
                                         const int64_t *shape,
                                         int64_t num_axes,
                                         const int64_t *axes) {
  int64_t off = 0;
  int64_t s = is_reduced(axes, num_axes, rank - 1) ? 1 : shape[rank - 1];
  for (int64_t d = rank - 2; d >= 0 && row; --d) {
    int64_t idx = row % shape[d];
    row /= shape[d];
    if (!is_reduced(axes, num_axes, d)) {
      off += idx * s;
      s *= shape[d];
    }
  }
  return off;
}

/* Result rows [o0, o1) of a reduction that keeps the last dimension (`cols`
   wide): each result element folds its input rows in row order, so result
   rows can go to different threads without changing a bit. Every thread
   walks all input rows and takes those of its result rows, so that it
   reads and writes whole rows (threads splitting the columns of each row
   instead were 1.4-4x slower on 2 threads than on 1, measured). */
static void reduce_rows(const float *x, int64_t rank, const int64_t *shape,
                        int64_t num_axes, const int64_t *axes,
                        braid_rt_reduce_kind_t kind, int64_t rows, int64_t cols,
                        int64_t count, int64_t o0, int64_t o1, float *y) {
  int is_max = kind == BRAID_RT_REDUCE_MAX;
  for (int64_t i = o0 * cols; i < o1 * cols; ++i)
    y[i] = is_max ? -INFINITY : 0.0f;
  for (int64_t r = 0; r < rows; ++r) {
    int64_t off = reduced_row_offset(r, rank, shape, num_axes, axes);
    if (off < o0 * cols || off >= o1 * cols)
      continue;
    const float *px = x + r * cols;
    float *py = y + off;
    if (is_max)
      for (int64_t j = 0; j < cols; ++j)
        py[j] = px[j] > py[j] ? px[j] : py[j];
    else
      for (int64_t j = 0; j < cols; ++j)
        py[j] += px[j];
  }
  if (kind == BRAID_RT_REDUCE_MEAN)
    for (int64_t i = o0 * cols; i < o1 * cols; ++i)
      y[i] = (float)((double)y[i] / count);
}

void braid_rt_reduce_f32(braid_rt_stream_t *stream, const float *x,
                         int64_t rank, const int64_t *shape, int64_t num_axes,
                         const int64_t *axes, braid_rt_reduce_kind_t kind,
                         float *y) {
  int is_max = kind == BRAID_RT_REDUCE_MAX;
  int64_t out_count = 1, count = 1;
  for (int64_t d = 0; d < rank; ++d) {
    if (is_reduced(axes, num_axes, d))
      count *= shape[d];
    else
      out_count *= shape[d];
  }
  float init = is_max ? -INFINITY : 0.0f;
  if (rank == 0) {
    y[0] = x[0];
    return;
  }
  int64_t total = out_count * count, cols = shape[rank - 1];
  if (total == 0 || cols == 0) {
    for (int64_t i = 0; i < out_count; ++i)
      y[i] = kind == BRAID_RT_REDUCE_MEAN ? NAN : init;
    return;
  }
  int64_t rows = total / cols;
  int last_reduced = is_reduced(axes, num_axes, rank - 1);
  if (last_reduced && num_axes == 1) {
    /* Rows map one to one to results: reduce each in double, in parallel. */
    BRAID_RT_PARALLEL_FOR(total)
    for (int64_t r = 0; r < rows; ++r) {
      const float *px = x + r * cols;
      if (is_max) {
        float mx = -INFINITY;
        for (int64_t j = 0; j < cols; ++j)
          mx = px[j] > mx ? px[j] : mx;
        y[r] = mx;
      } else {
        double sum = 0.0;
        for (int64_t j = 0; j < cols; ++j)
          sum += px[j];
        y[r] = (float)(kind == BRAID_RT_REDUCE_MEAN ? sum / count : sum);
      }
    }
    return;
  }
  if (!last_reduced) {
    /* Threads split the result rows, from 2^22 input elements: below, the
       sum runs at the speed of the caches and a second thread did not make
       it faster (measured on 2 cores: [4, 512, 512] over axis 0 0.12 ms on
       one thread, 0.16 on two; [4, 8192, 512] 3.2 and 1.3 ms). A bias
       gradient, one result row, stays on the calling thread. */
    int64_t out_rows = out_count / cols;
#ifdef _OPENMP
    if (total >= ((int64_t)1 << 22) && out_rows >= 16) {
#pragma omp parallel
      {
        int64_t o0, o1;
        braid_rt_split_range(out_rows, omp_get_num_threads(),
                             omp_get_thread_num(), 1, &o0, &o1);
        reduce_rows(x, rank, shape, num_axes, axes, kind, rows, cols, count, o0,
                    o1, y);
      }
      return;
    }
#endif
    reduce_rows(x, rank, shape, num_axes, axes, kind, rows, cols, count, 0,
                out_rows, y);
    return;
  }
  /* The last dimension and others reduced: on the calling thread. */
  for (int64_t i = 0; i < out_count; ++i)
    y[i] = init;
  for (int64_t r = 0; r < rows; ++r) {
    const float *px = x + r * cols;
    float *py = y + reduced_row_offset(r, rank, shape, num_axes, axes);
    if (is_max) {
      float mx = *py;
      for (int64_t j = 0; j < cols; ++j)
        mx = px[j] > mx ? px[j] : mx;
      *py = mx;
    } else {
      double sum = 0.0;
      for (int64_t j = 0; j < cols; ++j)
        sum += px[j];
      *py = (float)(*py + sum);
    }
  }
  if (kind == BRAID_RT_REDUCE_MEAN)
    for (int64_t i = 0; i < out_count; ++i)
      y[i] = (float)((double)y[i] / count);
}

braid_rt_status_t braid_rt_reduce_max_grad_f32(
    braid_rt_stream_t *stream, const float *x, const float *dy, int64_t rank,
    const int64_t *shape, int64_t num_axes, const int64_t *axes, float *dx) {
  int64_t out_count = 1, total = braid_rt_num_elements(shape, rank);
  for (int64_t d = 0; d < rank; ++d)
    if (!is_reduced(axes, num_axes, d))
      out_count *= shape[d];
  if (total == 0)
    return BRAID_RT_OK;
  if (rank == 0) {
    dx[0] = dy[0];
    return BRAID_RT_OK;
  }
  float *mx = malloc((size_t)out_count * sizeof(float));
  int64_t *ties = calloc((size_t)out_count, sizeof(int64_t));
  if (!mx || !ties) {
    free(mx);
    free(ties);
    return BRAID_RT_OUT_OF_MEMORY;
  }
  braid_rt_reduce_f32(stream, x, rank, shape, num_axes, axes,
                      BRAID_RT_REDUCE_MAX, mx);
  int64_t cols = shape[rank - 1], rows = total / cols;
  int64_t step = is_reduced(axes, num_axes, rank - 1) ? 0 : 1;
  for (int64_t pass = 0; pass < 2; ++pass)
    for (int64_t r = 0; r < rows; ++r) {
      int64_t o = reduced_row_offset(r, rank, shape, num_axes, axes);
      const float *px = x + r * cols;
      float *pdx = dx + r * cols;
      for (int64_t j = 0; j < cols; ++j) {
        int64_t out = o + j * step;
        if (pass == 0)
          ties[out] += px[j] == mx[out];
        else
          pdx[j] = px[j] == mx[out] ? (float)((double)dy[out] / ties[out])
                                    : 0.0f;
      }
    }
  free(mx);
  free(ties);
  return BRAID_RT_OK;
}
