//===- rowwise.cu - Softmax, norms, embedding, rotary, cross-entropy ------===//

#include "backend.h"
#include "ops.h"

using namespace braid_rt_cuda;

void braid_rt_softmax_f32(braid_rt_stream_t *stream, const float *x,
                          int64_t outer, int64_t size, int64_t inner,
                          float *y) {
  CudaBackend backend(stream);
  ops::softmax(backend, x, outer, size, inner, y);
}

void braid_rt_layer_norm_f32(braid_rt_stream_t *stream, const float *x,
                             const float *scale, const float *bias,
                             int64_t rows, int64_t cols, double epsilon,
                             float *y) {
  CudaBackend backend(stream);
  ops::layerNorm(backend, x, scale, bias, rows, cols, epsilon, y);
}

void braid_rt_rms_norm_f32(braid_rt_stream_t *stream, const float *x,
                           const float *scale, int64_t rows, int64_t cols,
                           double epsilon, float *y) {
  CudaBackend backend(stream);
  ops::rmsNorm(backend, x, scale, rows, cols, epsilon, y);
}

void braid_rt_layer_norm_grad_f32(braid_rt_stream_t *stream, const float *x,
                                  const float *scale, const float *dy,
                                  int64_t rows, int64_t cols, double epsilon,
                                  float *dx) {
  CudaBackend backend(stream);
  ops::layerNormGrad(backend, x, scale, dy, rows, cols, epsilon, dx);
}

void braid_rt_rms_norm_grad_f32(braid_rt_stream_t *stream, const float *x,
                                const float *scale, const float *dy,
                                int64_t rows, int64_t cols, double epsilon,
                                float *dx) {
  CudaBackend backend(stream);
  ops::rmsNormGrad(backend, x, scale, dy, rows, cols, epsilon, dx);
}

#define DEFINE_IDS(SUFFIX, T)                                                  \
  braid_rt_status_t braid_rt_embedding_f32##SUFFIX(                            \
      braid_rt_stream_t *stream, const float *table, const T *ids,             \
      int64_t vocab, int64_t hidden, int64_t num_ids, float *y) {              \
    CudaBackend backend(stream);                                               \
    return ops::embedding(backend, table, ids, vocab, hidden, num_ids, y);     \
  }                                                                            \
  braid_rt_status_t braid_rt_embedding_grad_f32##SUFFIX(                       \
      braid_rt_stream_t *stream, const T *ids, const float *dy,                \
      int64_t num_ids, int64_t vocab, int64_t hidden, float *dtable) {         \
    CudaBackend backend(stream);                                               \
    return ops::embeddingGrad(backend, ids, dy, num_ids, vocab, hidden,        \
                              dtable);                                         \
  }                                                                            \
  braid_rt_status_t braid_rt_cross_entropy_f32##SUFFIX(                        \
      braid_rt_stream_t *stream, const float *logits, const T *labels,         \
      int64_t rows, int64_t vocab, float *loss) {                              \
    CudaBackend backend(stream);                                               \
    return ops::crossEntropy(backend, logits, labels, rows, vocab, loss);      \
  }                                                                            \
  braid_rt_status_t braid_rt_cross_entropy_grad_f32##SUFFIX(                   \
      braid_rt_stream_t *stream, const float *logits, const T *labels,         \
      const float *grad, int64_t rows, int64_t vocab, float *dlogits) {        \
    CudaBackend backend(stream);                                               \
    return ops::crossEntropyGrad(backend, logits, labels, grad, rows, vocab,   \
                                 dlogits);                                     \
  }
DEFINE_IDS(, int32_t)
DEFINE_IDS(_i64, int64_t)

void braid_rt_rotary_f32(braid_rt_stream_t *stream, const float *x,
                         int64_t batch, int64_t seq, int64_t heads, int64_t dim,
                         double base, int inverse, float *y) {
  CudaBackend backend(stream);
  ops::rotary(backend, x, batch, seq, heads, dim, base, inverse, y);
}
