//===- shape.cu - Data movement, reductions and constants on CUDA ---------===//

#include "backend.h"
#include "ops.h"

using namespace braid_rt_cuda;

#define DEFINE_MOVES(SUFFIX, T)                                                \
  void braid_rt_copy_##SUFFIX(braid_rt_stream_t *stream, const T *x,           \
                              int64_t count, T *y) {                           \
    CudaBackend backend(stream);                                               \
    ops::copy(backend, x, count, y);                                           \
  }                                                                            \
  void braid_rt_fill_##SUFFIX(braid_rt_stream_t *stream, T value,              \
                              int64_t count, T *y) {                           \
    CudaBackend backend(stream);                                               \
    ops::fill(backend, value, count, y);                                       \
  }                                                                            \
  void braid_rt_transpose_##SUFFIX(braid_rt_stream_t *stream, const T *x,      \
                                   int64_t rank, const int64_t *shape,         \
                                   const int64_t *permutation, T *y) {         \
    CudaBackend backend(stream);                                               \
    ops::transpose(backend, x, rank, shape, permutation, y);                   \
  }                                                                            \
  void braid_rt_broadcast_to_##SUFFIX(                                         \
      braid_rt_stream_t *stream, const T *x, int64_t in_rank,                  \
      const int64_t *in_shape, int64_t out_rank, const int64_t *out_shape,     \
      T *y) {                                                                  \
    CudaBackend backend(stream);                                               \
    ops::broadcastTo(backend, x, in_rank, in_shape, out_rank, out_shape, y);   \
  }                                                                            \
  void braid_rt_slice_##SUFFIX(braid_rt_stream_t *stream, const T *x,          \
                               int64_t rank, const int64_t *in_shape,          \
                               const int64_t *start, const int64_t *stride,    \
                               const int64_t *out_shape, T *y) {               \
    CudaBackend backend(stream);                                               \
    ops::slice(backend, x, rank, in_shape, start, stride, out_shape, y);       \
  }                                                                            \
  void braid_rt_concat_##SUFFIX(                                               \
      braid_rt_stream_t *stream, const T *const *inputs, int64_t num_inputs,   \
      int64_t rank, const int64_t *out_shape, int64_t axis,                    \
      const int64_t *input_axis_sizes, T *y) {                                 \
    CudaBackend backend(stream);                                               \
    ops::concat(backend, inputs, num_inputs, rank, out_shape, axis,            \
                input_axis_sizes, y);                                          \
  }
DEFINE_MOVES(f32, float)
DEFINE_MOVES(i32, int32_t)

void braid_rt_copy_bf16(braid_rt_stream_t *stream, const uint16_t *x,
                        int64_t count, uint16_t *y) {
  CudaBackend backend(stream);
  ops::copy(backend, x, count, y);
}

void braid_rt_slice_grad_f32(braid_rt_stream_t *stream, const float *dy,
                             int64_t rank, const int64_t *dy_shape,
                             const int64_t *start, const int64_t *stride,
                             const int64_t *dx_shape, float *dx) {
  CudaBackend backend(stream);
  ops::sliceGrad(backend, dy, rank, dy_shape, start, stride, dx_shape, dx);
}

void braid_rt_reduce_f32(braid_rt_stream_t *stream, const float *x,
                         int64_t rank, const int64_t *shape, int64_t num_axes,
                         const int64_t *axes, braid_rt_reduce_kind_t kind,
                         float *y) {
  CudaBackend backend(stream);
  ops::reduce(backend, x, rank, shape, num_axes, axes, kind, y);
}

braid_rt_status_t braid_rt_reduce_max_grad_f32(
    braid_rt_stream_t *stream, const float *x, const float *dy, int64_t rank,
    const int64_t *shape, int64_t num_axes, const int64_t *axes, float *dx) {
  CudaBackend backend(stream);
  return ops::reduceMaxGrad(backend, x, dy, rank, shape, num_axes, axes, dx);
}
