//===- elementwise.cu - braid.add ... gelu_grad on CUDA -------------------===//

#include "backend.h"
#include "ops.h"

using namespace braid_rt_cuda;

#define DEFINE_BINARY(NAME, KIND)                                              \
  void braid_rt_##NAME##_f32(braid_rt_stream_t *stream, const float *a,        \
                             const float *b, int64_t a_rank,                   \
                             const int64_t *a_shape, int64_t b_rank,           \
                             const int64_t *b_shape, float *out) {             \
    CudaBackend backend(stream);                                               \
    ops::binary(backend, KIND, a, b, a_rank, a_shape, b_rank, b_shape, out);   \
  }
DEFINE_BINARY(add, kAdd)
DEFINE_BINARY(sub, kSub)
DEFINE_BINARY(mul, kMul)
DEFINE_BINARY(div, kDiv)

#define DEFINE_UNARY(NAME, KIND)                                               \
  void braid_rt_##NAME##_f32(braid_rt_stream_t *stream, const float *x,        \
                             int64_t count, float *y) {                        \
    CudaBackend backend(stream);                                               \
    ops::unary(backend, KIND, x, count, y);                                    \
  }
DEFINE_UNARY(neg, kNeg)
DEFINE_UNARY(exp, kExp)
DEFINE_UNARY(sqrt, kSqrt)
DEFINE_UNARY(rsqrt, kRsqrt)
DEFINE_UNARY(relu, kRelu)
DEFINE_UNARY(silu, kSilu)
DEFINE_UNARY(round_bf16, kRoundBF16)

void braid_rt_pack_bf16_f32(braid_rt_stream_t *stream, const float *x,
                            int64_t count, uint16_t *y) {
  CudaBackend backend(stream);
  backend.forEach(count,
                  [=] BRAID_HD(int64_t i) { y[i] = bf16Of(x[i]).bits; });
}

void braid_rt_unpack_bf16_f32(braid_rt_stream_t *stream, const uint16_t *x,
                              int64_t count, float *y) {
  CudaBackend backend(stream);
  backend.forEach(count,
                  [=] BRAID_HD(int64_t i) { y[i] = floatOf(BF16{x[i]}); });
}

void braid_rt_gelu_f32(braid_rt_stream_t *stream, const float *x, int64_t count,
                       braid_rt_gelu_approximation_t approximate, float *y) {
  CudaBackend backend(stream);
  ops::gelu(backend, x, count, approximate, y);
}

void braid_rt_relu_grad_f32(braid_rt_stream_t *stream, const float *x,
                            const float *dy, int64_t count, float *dx) {
  CudaBackend backend(stream);
  ops::reluGrad(backend, x, dy, count, dx);
}

void braid_rt_silu_grad_f32(braid_rt_stream_t *stream, const float *x,
                            const float *dy, int64_t count, float *dx) {
  CudaBackend backend(stream);
  ops::siluGrad(backend, x, dy, count, dx);
}

void braid_rt_gelu_grad_f32(braid_rt_stream_t *stream, const float *x,
                            const float *dy, int64_t count,
                            braid_rt_gelu_approximation_t approximate,
                            float *dx) {
  CudaBackend backend(stream);
  ops::geluGrad(backend, x, dy, count, approximate, dx);
}
