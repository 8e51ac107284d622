/*===- attention.c - braid.attention and braid.attention_grad ------------===*/
/*
 * Per (batch, query head): the scores Q K^T * scale as one SGEMM, a masked
 * row softmax (sums in double), then P V as a second SGEMM. Heads are read
 * in place: head h of q ([B, S, Hq, D]) is an [S, D] matrix with leading
 * dimension Hq * D, so nothing is copied. The gradient recomputes P and
 * uses four more SGEMMs:
 *   dV += P^T dY, dP = dY V^T, dS = P * (dP - rowsum(P * dP)) * scale,
 *   dQ = dS K, dK += dS^T Q,
 * where += sums the query heads that share a KV head.
 */
#include "internal.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* p ([s, t] scores) becomes the row softmax over columns [0, s + 1) when
   causal (zero beyond), [0, t) otherwise. */
/* Runs on the calling thread: between SGEMMs, OpenBLAS's threads still
   hold the cores (measured: OpenMP here made attention 1.6x slower). */
static void masked_softmax(float *p, int64_t s, int64_t t, int causal) {
  for (int64_t i = 0; i < s; ++i) {
    float *row = p + i * t;
    int64_t end = causal ? (i + 1 < t ? i + 1 : t) : t;
    float mx = -INFINITY;
    for (int64_t j = 0; j < end; ++j)
      mx = row[j] > mx ? row[j] : mx;
    double sum = 0.0;
    for (int64_t j = 0; j < end; ++j) {
      row[j] = expf(row[j] - mx);
      sum += row[j];
    }
    float inv = (float)(1.0 / sum);
    for (int64_t j = 0; j < end; ++j)
      row[j] *= inv;
    for (int64_t j = end; j < t; ++j)
      row[j] = 0.0f;
  }
}

braid_rt_status_t braid_rt_attention_f32(
    braid_rt_stream_t *stream, const float *q, const float *k, const float *v,
    int64_t batch, int64_t seq_q, int64_t seq_kv, int64_t heads_q,
    int64_t heads_kv, int64_t dim, int causal, double scale, float *y) {
  if (batch * seq_q * heads_q * dim == 0)
    return BRAID_RT_OK;
  if (seq_kv == 0) { /* no keys: the reference's empty sum */
    memset(y, 0, (size_t)(batch * seq_q * heads_q * dim) * sizeof(float));
    return BRAID_RT_OK;
  }
  float *p = malloc((size_t)(seq_q * seq_kv) * sizeof(float));
  if (!p)
    return BRAID_RT_OUT_OF_MEMORY;
  int64_t group = heads_q / heads_kv;
  int ldq = (int)(heads_q * dim), ldk = (int)(heads_kv * dim);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < heads_q; ++h) {
      const float *qh = q + (b * seq_q * heads_q + h) * dim;
      const float *kh = k + (b * seq_kv * heads_kv + h / group) * dim;
      const float *vh = v + (b * seq_kv * heads_kv + h / group) * dim;
      float *yh = y + (b * seq_q * heads_q + h) * dim;
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)seq_q,
                  (int)seq_kv, (int)dim, (float)scale, qh, ldq, kh, ldk, 0.0f,
                  p, (int)seq_kv);
      masked_softmax(p, seq_q, seq_kv, causal);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)seq_q,
                  (int)dim, (int)seq_kv, 1.0f, p, (int)seq_kv, vh, ldk, 0.0f,
                  yh, ldq);
    }
  free(p);
  return BRAID_RT_OK;
}

braid_rt_status_t braid_rt_attention_grad_all_f32(
    braid_rt_stream_t *stream, const float *q, const float *k, const float *v,
    const float *dy, int64_t batch, int64_t seq_q, int64_t seq_kv,
    int64_t heads_q, int64_t heads_kv, int64_t dim, int causal, double scale,
    float *dq, float *dk, float *dv) {
  int64_t q_count = batch * seq_q * heads_q * dim;
  int64_t kv_count = batch * seq_kv * heads_kv * dim;
  if (dq)
    memset(dq, 0, (size_t)q_count * sizeof(float));
  if (dk)
    memset(dk, 0, (size_t)kv_count * sizeof(float));
  if (dv)
    memset(dv, 0, (size_t)kv_count * sizeof(float));
  if (q_count == 0 || kv_count == 0 || (!dq && !dk && !dv))
    return BRAID_RT_OK;
  float *p = malloc((size_t)(2 * seq_q * seq_kv) * sizeof(float));
  if (!p)
    return BRAID_RT_OUT_OF_MEMORY;
  float *ds = p + seq_q * seq_kv;
  int64_t group = heads_q / heads_kv;
  int s = (int)seq_q, t = (int)seq_kv, d = (int)dim;
  int ldq = (int)(heads_q * dim), ldk = (int)(heads_kv * dim);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < heads_q; ++h) {
      int64_t q_off = (b * seq_q * heads_q + h) * dim;
      int64_t kv_off = (b * seq_kv * heads_kv + h / group) * dim;
      const float *qh = q + q_off, *kh = k + kv_off, *vh = v + kv_off;
      const float *dyh = dy + q_off;
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, s, t, d,
                  (float)scale, qh, ldq, kh, ldk, 0.0f, p, t);
      masked_softmax(p, seq_q, seq_kv, causal);
      if (dv)
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, t, d, s, 1.0f, p,
                    t, dyh, ldq, 1.0f, dv + kv_off, ldk);
      if (!dq && !dk)
        continue;
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, s, t, d, 1.0f, dyh,
                  ldq, vh, ldk, 0.0f, ds, t);
      for (int64_t i = 0; i < seq_q; ++i) {
        const float *pr = p + i * seq_kv;
        float *dr = ds + i * seq_kv;
        double pdp = 0.0;
        for (int64_t j = 0; j < seq_kv; ++j)
          pdp += (double)pr[j] * dr[j];
        for (int64_t j = 0; j < seq_kv; ++j)
          dr[j] = (float)(pr[j] * (dr[j] - pdp) * scale);
      }
      if (dq)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s, d, t, 1.0f,
                    ds, t, kh, ldk, 0.0f, dq + q_off, ldq);
      if (dk)
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, t, d, s, 1.0f, ds,
                    t, qh, ldq, 1.0f, dk + kv_off, ldk);
    }
  free(p);
  return BRAID_RT_OK;
}

braid_rt_status_t braid_rt_attention_grad_f32(
    braid_rt_stream_t *stream, const float *q, const float *k, const float *v,
    const float *dy, int64_t batch, int64_t seq_q, int64_t seq_kv,
    int64_t heads_q, int64_t heads_kv, int64_t dim, int causal, double scale,
    int64_t operand, float *out) {
  if (operand < 0 || operand > 2)
    return BRAID_RT_INVALID_ARGUMENT;
  return braid_rt_attention_grad_all_f32(
      stream, q, k, v, dy, batch, seq_q, seq_kv, heads_q, heads_kv, dim, causal,
      scale, operand == 0 ? out : NULL, operand == 1 ? out : NULL,
      operand == 2 ? out : NULL);
}
