//===- vocab_parallel.cu - Local statistics of vocabulary-parallel ops ----===//
//
// What one rank of a vocabulary-parallel embedding or cross-entropy
// contributes (kernels.h): per-row statistics in double, one thread per row
// in the CPU's order, so every rank combines the same bits on either
// backend.
//
//===----------------------------------------------------------------------===//

#include "backend.h"
#include "ops.h"

using namespace braid_rt_cuda;

void braid_rt_vocab_parallel_max_f32(braid_rt_stream_t *stream,
                                     const float *logits, int64_t rows,
                                     int64_t cols, double *max) {
  CudaBackend backend(stream);
  ops::vocabParallelMax(backend, logits, rows, cols, max);
}

void braid_rt_vocab_parallel_sum_exp_f32(braid_rt_stream_t *stream,
                                         const float *logits,
                                         const double *max, int64_t rows,
                                         int64_t cols, double *sum) {
  CudaBackend backend(stream);
  ops::vocabParallelSumExp(backend, logits, max, rows, cols, sum);
}

void braid_rt_vocab_parallel_combine_f64(braid_rt_stream_t *stream,
                                         const double *parts,
                                         int64_t num_parts, int64_t rows,
                                         braid_rt_reduce_kind_t kind,
                                         double *out) {
  CudaBackend backend(stream);
  ops::vocabParallelCombine(backend, parts, num_parts, rows, kind, out);
}

void braid_rt_vocab_parallel_loss_f32(braid_rt_stream_t *stream,
                                      const double *max, const double *sum,
                                      const double *target, int64_t rows,
                                      float *loss) {
  CudaBackend backend(stream);
  ops::vocabParallelLoss(backend, max, sum, target, rows, loss);
}

#define DEFINE_IDS(SUFFIX, T)                                                  \
  void braid_rt_vocab_parallel_picked_f32##SUFFIX(                             \
      braid_rt_stream_t *stream, const float *logits, const T *labels,         \
      int64_t rows, int64_t cols, int64_t first, double *picked) {             \
    CudaBackend backend(stream);                                               \
    ops::vocabParallelPicked(backend, logits, labels, rows, cols, first,       \
                             picked);                                          \
  }                                                                            \
  void braid_rt_vocab_parallel_cross_entropy_grad_f32##SUFFIX(                 \
      braid_rt_stream_t *stream, const float *logits, const T *labels,         \
      const float *grad, const double *max, const double *sum, int64_t rows,   \
      int64_t cols, int64_t first, float *dlogits) {                           \
    CudaBackend backend(stream);                                               \
    ops::vocabParallelCrossEntropyGrad(backend, logits, labels, grad, max,     \
                                       sum, rows, cols, first, dlogits);       \
  }                                                                            \
  void braid_rt_vocab_parallel_embedding_f32##SUFFIX(                          \
      braid_rt_stream_t *stream, const float *table, const T *ids,             \
      int64_t cols, int64_t hidden, int64_t num_ids, int64_t first,            \
      float *y) {                                                              \
    CudaBackend backend(stream);                                               \
    ops::vocabParallelEmbedding(backend, table, ids, cols, hidden, num_ids,    \
                                first, y);                                     \
  }                                                                            \
  braid_rt_status_t braid_rt_vocab_parallel_embedding_grad_f32##SUFFIX(        \
      braid_rt_stream_t *stream, const T *ids, const float *dy,                \
      int64_t num_ids, int64_t cols, int64_t hidden, int64_t first,            \
      float *dtable) {                                                         \
    CudaBackend backend(stream);                                               \
    return ops::vocabParallelEmbeddingGrad(backend, ids, dy, num_ids, cols,    \
                                           hidden, first, dtable);             \
  }
DEFINE_IDS(, int32_t)
DEFINE_IDS(_i64, int64_t)
