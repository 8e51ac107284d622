//===- attention.cu - braid.attention and attention_grad: cuBLAS + kernels ===//

#include "backend.h"
#include "ops.h"

using namespace braid_rt_cuda;

braid_rt_status_t braid_rt_attention_f32(
    braid_rt_stream_t *stream, const float *q, const float *k, const float *v,
    int64_t batch, int64_t seq_q, int64_t seq_kv, int64_t heads_q,
    int64_t heads_kv, int64_t dim, int causal, double scale, float *y) {
  CudaBackend backend(stream);
  return ops::attention(backend, q, k, v, batch, seq_q, seq_kv, heads_q,
                        heads_kv, dim, causal, scale, y);
}

braid_rt_status_t braid_rt_attention_grad_all_f32(
    braid_rt_stream_t *stream, const float *q, const float *k, const float *v,
    const float *dy, int64_t batch, int64_t seq_q, int64_t seq_kv,
    int64_t heads_q, int64_t heads_kv, int64_t dim, int causal, double scale,
    float *dq, float *dk, float *dv) {
  CudaBackend backend(stream);
  return ops::attentionGradAll(backend, q, k, v, dy, batch, seq_q, seq_kv,
                               heads_q, heads_kv, dim, causal, scale, dq, dk,
                               dv);
}

braid_rt_status_t braid_rt_attention_grad_f32(
    braid_rt_stream_t *stream, const float *q, const float *k, const float *v,
    const float *dy, int64_t batch, int64_t seq_q, int64_t seq_kv,
    int64_t heads_q, int64_t heads_kv, int64_t dim, int causal, double scale,
    int64_t operand, float *out) {
  CudaBackend backend(stream);
  return ops::attentionGrad(backend, q, k, v, dy, batch, seq_q, seq_kv,
                            heads_q, heads_kv, dim, causal, scale, operand,
                            out);
}
