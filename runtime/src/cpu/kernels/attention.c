/*===- attention.c - braid.attention and braid.attention_grad ------------===*/
/*
 * Flash-attention style: no [seq_q, seq_kv] score matrix. Queries and keys
 * go in blocks of kBlock rows; a (query block, key block) pair is computed
 * in per-thread scratch of O(kBlock^2 + kBlock * dim) floats, key blocks
 * wholly above the causal diagonal are skipped, and each query row keeps a
 * running maximum and sum (online softmax): when a later key block raises
 * the maximum, the row's sum and output so far are rescaled by
 * exp(old max - new max).
 *
 * The forward runs one (batch, query head, query block) per work item. The
 * backward runs one (batch, KV head) per work item, which then owns dK and
 * dV of that head and dQ of its query heads (no sharing between threads):
 * per query head it first recomputes each row's log-sum-exp L and
 * delta = rowsum(dY * Y) with the forward's loop (the op's IR gives the
 * backward q, k, v and dy only, not the forward's statistics), then, per
 * key block, over the query blocks at or below the diagonal:
 *   P = exp(scale Q K^T - L), dV += P^T dY, dP = dY V^T,
 *   dS = P * (dP - delta) * scale, dQ += dS K, dK += dS^T Q.
 * Results do not depend on the thread count (each element is computed by
 * one work item in a fixed order).
 *
 * The earlier kernels (two SGEMMs and a [seq_q, seq_kv] softmax per head)
 * stay below as braid_rt_cpu_attention_sgemm_f32 and
 * braid_rt_cpu_attention_grad_all_sgemm_f32 (internal.h): the baseline of
 * bench/attention.py and of the kernel tests.
 */
#include "braid/rt/elementwise_math.h"
#include "braid/rt/parallel.h"
#include "internal.h"

#include <cblas.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

enum { kBlock = 64 };

/*===----------------------------------------------------------------------===*/
/* C[m, n] += A[m, k] B[k, n], row-major with leading dimensions            */
/*===----------------------------------------------------------------------===*/

/* Eight floats; 4 rows x 16 columns of C stay in registers while the k
   loop runs (two 256-bit registers, or four 128-bit ones in a portable
   build). Each element of C sums over k in order. */
typedef float braid_v8 __attribute__((vector_size(32)));

/* Unaligned loads and stores (macros: a vector argument or result of a
   function would change the ABI between the clones below). */
#define LOAD8(v, p) memcpy(&(v), (p), sizeof(braid_v8))
#define STORE8(p, v) memcpy((p), &(v), sizeof(braid_v8))

/* One version per vector width, chosen at load time, so that the portable
   library runs as fast as the native one; every version computes the same
   bits (lane-wise multiplies and adds in the same order, no contraction). */
#if defined(__x86_64__) && defined(__has_attribute)
#if __has_attribute(target_clones)
#define BRAID_RT_VECTOR_CLONES                                                 \
  __attribute__((target_clones("avx512f", "avx2", "default")))
#endif
#endif
#ifndef BRAID_RT_VECTOR_CLONES
#define BRAID_RT_VECTOR_CLONES
#endif

BRAID_RT_VECTOR_CLONES
static void gemm_acc(int64_t m, int64_t n, int64_t kd, const float *a,
                     int64_t lda, const float *b, int64_t ldb, float *c,
                     int64_t ldc) {
  int64_t i = 0;
  for (; i + 4 <= m; i += 4) {
    const float *a0 = a + i * lda, *a1 = a0 + lda, *a2 = a1 + lda,
                *a3 = a2 + lda;
    float *c0 = c + i * ldc, *c1 = c0 + ldc, *c2 = c1 + ldc, *c3 = c2 + ldc;
    int64_t j = 0;
    for (; j + 16 <= n; j += 16) {
      braid_v8 x0, y0, x1, y1, x2, y2, x3, y3;
      LOAD8(x0, c0 + j), LOAD8(y0, c0 + j + 8);
      LOAD8(x1, c1 + j), LOAD8(y1, c1 + j + 8);
      LOAD8(x2, c2 + j), LOAD8(y2, c2 + j + 8);
      LOAD8(x3, c3 + j), LOAD8(y3, c3 + j + 8);
      for (int64_t p = 0; p < kd; ++p) {
        const float *bp = b + p * ldb + j;
        braid_v8 bl, bh;
        LOAD8(bl, bp), LOAD8(bh, bp + 8);
        x0 += a0[p] * bl, y0 += a0[p] * bh;
        x1 += a1[p] * bl, y1 += a1[p] * bh;
        x2 += a2[p] * bl, y2 += a2[p] * bh;
        x3 += a3[p] * bl, y3 += a3[p] * bh;
      }
      STORE8(c0 + j, x0), STORE8(c0 + j + 8, y0);
      STORE8(c1 + j, x1), STORE8(c1 + j + 8, y1);
      STORE8(c2 + j, x2), STORE8(c2 + j + 8, y2);
      STORE8(c3 + j, x3), STORE8(c3 + j + 8, y3);
    }
    for (; j < n; ++j) {
      float s0 = c0[j], s1 = c1[j], s2 = c2[j], s3 = c3[j];
      for (int64_t p = 0; p < kd; ++p) {
        float bv = b[p * ldb + j];
        s0 += a0[p] * bv, s1 += a1[p] * bv, s2 += a2[p] * bv, s3 += a3[p] * bv;
      }
      c0[j] = s0, c1[j] = s1, c2[j] = s2, c3[j] = s3;
    }
  }
  for (; i < m; ++i) {
    const float *ai = a + i * lda;
    float *ci = c + i * ldc;
    for (int64_t p = 0; p < kd; ++p) {
      const float *bp = b + p * ldb;
      float av = ai[p];
      for (int64_t j = 0; j < n; ++j)
        ci[j] += av * bp[j];
    }
  }
}

/* dst[c, r] = src[r, c] for an [rows, cols] block (leading dimensions). */
static void transpose_block(int64_t rows, int64_t cols, const float *src,
                            int64_t lds, float *dst, int64_t ldd) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      dst[c * ldd + r] = src[r * lds + c];
}

static inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/*===----------------------------------------------------------------------===*/
/* Shapes and scratch                                                       */
/*===----------------------------------------------------------------------===*/

typedef struct {
  int64_t batch, s, t, hq, hkv, d, group;
  int causal;
  float scale;
  int64_t ldq, ldk; /* hq * d, hkv * d: a head read in place */
} attn_shape_t;

static attn_shape_t make_shape(int64_t batch, int64_t s, int64_t t, int64_t hq,
                               int64_t hkv, int64_t d, int causal,
                               double scale) {
  attn_shape_t sh = {batch,        s,      t,      hq, hkv, d, hq / hkv, causal,
                     (float)scale, hq * d, hkv * d};
  return sh;
}

static inline int64_t num_blocks(int64_t n) {
  return (n + kBlock - 1) / kBlock;
}

/* Whether key block [k0, ...) has a key at or before the last query row of
   [q0, q0 + rows): blocks wholly above the causal diagonal are skipped. */
static inline int block_visible(const attn_shape_t *sh, int64_t q0,
                                int64_t rows, int64_t k0) {
  return !sh->causal || k0 <= q0 + rows - 1;
}

/* The forward's per-thread scratch. */
typedef struct {
  float *kt; /* [d, kBlock]: K block transposed */
  float *s;  /* [kBlock, kBlock]: scores, then probabilities */
  float *o;  /* [kBlock, d]: unnormalised output */
  double *m; /* [kBlock]: running maxima */
  double *l; /* [kBlock]: running sums */
} fwd_scratch_t;

static size_t fwd_scratch_floats(int64_t d) {
  return (size_t)(2 * kBlock * d + kBlock * kBlock + 4 * kBlock);
}

static fwd_scratch_t fwd_scratch_at(float *base, int64_t d) {
  fwd_scratch_t w;
  w.m = (double *)base; /* first: 8-byte aligned as malloc's result */
  w.l = w.m + kBlock;
  w.kt = (float *)(w.l + kBlock);
  w.s = w.kt + kBlock * d;
  w.o = w.s + kBlock * kBlock;
  return w;
}

/* Rows [q0, q0 + rows) of query head h of batch b: y (ld sh->ldq) gets the
   normalised output, lse (if not NULL) each row's log-sum-exp of the scaled,
   masked scores. */
static void forward_block(const attn_shape_t *sh, const float *q,
                          const float *k, const float *v, int64_t b, int64_t h,
                          int64_t q0, fwd_scratch_t w, float *y, int64_t ldy,
                          double *lse) {
  int64_t d = sh->d, rows = min64(kBlock, sh->s - q0);
  const float *qb = q + ((b * sh->s + q0) * sh->hq + h) * d;
  const float *kh = k + (b * sh->t * sh->hkv + h / sh->group) * d;
  const float *vh = v + (b * sh->t * sh->hkv + h / sh->group) * d;
  for (int64_t i = 0; i < rows; ++i) {
    w.m[i] = -INFINITY;
    w.l[i] = 0.0;
  }
  memset(w.o, 0, (size_t)(rows * d) * sizeof(float));
  for (int64_t k0 = 0; k0 < sh->t && block_visible(sh, q0, rows, k0);
       k0 += kBlock) {
    int64_t cols = min64(kBlock, sh->t - k0);
    transpose_block(cols, d, kh + k0 * sh->ldk, sh->ldk, w.kt, kBlock);
    memset(w.s, 0, (size_t)(rows * kBlock) * sizeof(float));
    gemm_acc(rows, cols, d, qb, sh->ldq, w.kt, kBlock, w.s, kBlock);
    for (int64_t i = 0; i < rows; ++i) {
      float *sr = w.s + i * kBlock;
      /* Keys k0 + j <= q0 + i when causal. */
      int64_t end = sh->causal ? min64(cols, q0 + i - k0 + 1) : cols;
      float mx = -INFINITY;
      for (int64_t j = 0; j < end; ++j) {
        sr[j] *= sh->scale;
        mx = sr[j] > mx ? sr[j] : mx;
      }
      double m_new = mx > w.m[i] ? mx : w.m[i];
      float *orow = w.o + i * d;
      if (m_new == -INFINITY) { /* nothing visible yet in this row */
        memset(sr, 0, (size_t)cols * sizeof(float));
        continue;
      }
      float mf = (float)m_new;
      double sum = 0.0;
      for (int64_t j = 0; j < end; ++j)
        sr[j] = braid_rt_expf(sr[j] - mf);
      for (int64_t j = 0; j < end; ++j)
        sum += sr[j];
      for (int64_t j = end < 0 ? 0 : end; j < cols; ++j)
        sr[j] = 0.0f;
      /* Online softmax: what the row summed under the old maximum. */
      float alpha =
          w.m[i] == -INFINITY ? 0.0f : braid_rt_expf((float)w.m[i] - mf);
      w.l[i] = w.l[i] * alpha + sum;
      w.m[i] = m_new;
      for (int64_t c = 0; c < d; ++c)
        orow[c] *= alpha;
    }
    gemm_acc(rows, d, cols, w.s, kBlock, vh + k0 * sh->ldk, sh->ldk, w.o, d);
  }
  for (int64_t i = 0; i < rows; ++i) {
    float inv = (float)(1.0 / w.l[i]);
    for (int64_t c = 0; c < d; ++c)
      y[i * ldy + c] = w.o[i * d + c] * inv;
    if (lse)
      lse[i] = (float)w.m[i] + log(w.l[i]);
  }
}

/*===----------------------------------------------------------------------===*/
/* Forward                                                                  */
/*===----------------------------------------------------------------------===*/

typedef struct {
  attn_shape_t sh;
  const float *q, *k, *v;
  float *y;
  atomic_int failed;
  atomic_llong next; /* the next work item to take */
  int64_t items;
} fwd_job_t;

static void forward_range(void *ctx, int64_t begin, int64_t end) {
  fwd_job_t *job = ctx;
  const attn_shape_t *sh = &job->sh;
  float *base = malloc(fwd_scratch_floats(sh->d) * sizeof(float));
  if (!base) {
    atomic_store(&job->failed, 1);
    return;
  }
  fwd_scratch_t w = fwd_scratch_at(base, sh->d);
  int64_t nq = num_blocks(sh->s);
  /* Items are taken one at a time rather than by the range given: on a
     busy machine a thread that the scheduler keeps waiting leaves its
     share to the others (each item is still computed by one thread in a
     fixed order, so the results do not change). */
  (void)begin, (void)end;
  for (int64_t item; (item = atomic_fetch_add(&job->next, 1)) < job->items;) {
    int64_t qb = item % nq, bh = item / nq, h = bh % sh->hq, b = bh / sh->hq;
    int64_t q0 = qb * kBlock;
    float *y = job->y + ((b * sh->s + q0) * sh->hq + h) * sh->d;
    forward_block(sh, job->q, job->k, job->v, b, h, q0, w, y, sh->ldq, NULL);
  }
  free(base);
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
  int64_t items = batch * heads_q * num_blocks(seq_q);
  fwd_job_t job = {
      make_shape(batch, seq_q, seq_kv, heads_q, heads_kv, dim, causal, scale),
      q,
      k,
      v,
      y,
      0,
      0,
      items};
  braid_rt_parallel_for(items, batch * heads_q * seq_q * seq_kv, forward_range,
                        &job);
  return atomic_load(&job.failed) ? BRAID_RT_OUT_OF_MEMORY : BRAID_RT_OK;
}

/*===----------------------------------------------------------------------===*/
/* Backward                                                                 */
/*===----------------------------------------------------------------------===*/

typedef struct {
  attn_shape_t sh;
  const float *q, *k, *v, *dy;
  float *dq, *dk, *dv;
  atomic_int failed;
  atomic_llong next; /* the next work item to take */
  int64_t items;
} bwd_job_t;

static void backward_range(void *ctx, int64_t begin, int64_t end) {
  bwd_job_t *job = ctx;
  const attn_shape_t *sh = &job->sh;
  int64_t d = sh->d, group = sh->group, s = sh->s, t = sh->t;
  size_t fwd = fwd_scratch_floats(d);
  size_t stats = (size_t)(2 * group * s) * 2;  /* lse, delta as doubles */
  size_t mine = (size_t)(2 * kBlock * d        /* kt, vt */
                         + 3 * kBlock * kBlock /* p, dp, transposed */
                         + 2 * kBlock * d);    /* dK, dV of the key block */
  float *base = malloc((stats + fwd + mine) * sizeof(float));
  if (!base) {
    atomic_store(&job->failed, 1);
    return;
  }
  double *lse = (double *)base, *delta = lse + group * s;
  fwd_scratch_t w = fwd_scratch_at(base + stats, d);
  float *kt = base + stats + fwd, *vt = kt + kBlock * d;
  float *p = vt + kBlock * d, *dp = p + kBlock * kBlock;
  float *tr = dp + kBlock * kBlock, *dkAcc = tr + kBlock * kBlock;
  float *dvAcc = dkAcc + kBlock * d;
  const int wantQK = job->dq || job->dk;
  /* Items are taken one at a time rather than by the range given: on a
     busy machine a thread that the scheduler keeps waiting leaves its
     share to the others (each item is still computed by one thread in a
     fixed order, so the results do not change). */
  (void)begin, (void)end;
  for (int64_t item; (item = atomic_fetch_add(&job->next, 1)) < job->items;) {
    int64_t g = item % sh->hkv, b = item / sh->hkv;
    const float *kh = job->k + (b * t * sh->hkv + g) * d;
    const float *vh = job->v + (b * t * sh->hkv + g) * d;
    /* L and delta of each query row of the group's heads. */
    for (int64_t r = 0; r < group; ++r) {
      int64_t h = g * group + r;
      for (int64_t q0 = 0; q0 < s; q0 += kBlock) {
        int64_t rows = min64(kBlock, s - q0);
        /* The rows' output Y goes to dkAcc, free until the key loop. */
        forward_block(sh, job->q, job->k, job->v, b, h, q0, w, dkAcc, d,
                      lse + r * s + q0);
        const float *dyb = job->dy + ((b * s + q0) * sh->hq + h) * d;
        for (int64_t i = 0; i < rows; ++i) {
          double acc = 0.0;
          for (int64_t c = 0; c < d; ++c)
            acc += (double)dyb[i * sh->ldq + c] * dkAcc[i * d + c];
          delta[r * s + q0 + i] = acc;
        }
      }
    }
    for (int64_t k0 = 0; k0 < t; k0 += kBlock) {
      int64_t cols = min64(kBlock, t - k0);
      const float *kb = kh + k0 * sh->ldk, *vb = vh + k0 * sh->ldk;
      transpose_block(cols, d, kb, sh->ldk, kt, kBlock);
      transpose_block(cols, d, vb, sh->ldk, vt, kBlock);
      memset(dkAcc, 0, (size_t)(cols * d) * sizeof(float));
      memset(dvAcc, 0, (size_t)(cols * d) * sizeof(float));
      for (int64_t r = 0; r < group; ++r) {
        int64_t h = g * group + r;
        /* The first query block reaching key k0 when causal. */
        int64_t qStart = sh->causal ? k0 / kBlock * kBlock : 0;
        for (int64_t q0 = qStart; q0 < s; q0 += kBlock) {
          int64_t rows = min64(kBlock, s - q0);
          if (!block_visible(sh, q0, rows, k0))
            continue;
          int64_t off = ((b * s + q0) * sh->hq + h) * d;
          const float *qb = job->q + off, *dyb = job->dy + off;
          const double *L = lse + r * s + q0, *D = delta + r * s + q0;
          memset(p, 0, (size_t)(rows * kBlock) * sizeof(float));
          gemm_acc(rows, cols, d, qb, sh->ldq, kt, kBlock, p, kBlock);
          for (int64_t i = 0; i < rows; ++i) {
            float *pr = p + i * kBlock;
            int64_t vis = sh->causal ? min64(cols, q0 + i - k0 + 1) : cols;
            if (vis < 0)
              vis = 0;
            float li = (float)L[i];
            for (int64_t j = 0; j < vis; ++j)
              pr[j] = braid_rt_expf(pr[j] * sh->scale - li);
            for (int64_t j = vis; j < cols; ++j)
              pr[j] = 0.0f;
          }
          if (job->dv) {
            transpose_block(rows, cols, p, kBlock, tr, kBlock);
            gemm_acc(cols, d, rows, tr, kBlock, dyb, sh->ldq, dvAcc, d);
          }
          if (!wantQK)
            continue;
          memset(dp, 0, (size_t)(rows * kBlock) * sizeof(float));
          gemm_acc(rows, cols, d, dyb, sh->ldq, vt, kBlock, dp, kBlock);
          for (int64_t i = 0; i < rows; ++i) {
            float *pr = p + i * kBlock, *dr = dp + i * kBlock;
            float di = (float)D[i];
            for (int64_t j = 0; j < cols; ++j)
              dr[j] = pr[j] * (dr[j] - di) * sh->scale;
          }
          if (job->dq)
            gemm_acc(rows, d, cols, dp, kBlock, kb, sh->ldk, job->dq + off,
                     sh->ldq);
          if (job->dk) {
            transpose_block(rows, cols, dp, kBlock, tr, kBlock);
            gemm_acc(cols, d, rows, tr, kBlock, qb, sh->ldq, dkAcc, d);
          }
        }
      }
      int64_t kvOff = ((b * t + k0) * sh->hkv + g) * d;
      for (int64_t j = 0; j < cols; ++j) {
        if (job->dk)
          memcpy(job->dk + kvOff + j * sh->ldk, dkAcc + j * d,
                 (size_t)d * sizeof(float));
        if (job->dv)
          memcpy(job->dv + kvOff + j * sh->ldk, dvAcc + j * d,
                 (size_t)d * sizeof(float));
      }
    }
  }
  free(base);
}

braid_rt_status_t braid_rt_attention_grad_all_f32(
    braid_rt_stream_t *stream, const float *q, const float *k, const float *v,
    const float *dy, int64_t batch, int64_t seq_q, int64_t seq_kv,
    int64_t heads_q, int64_t heads_kv, int64_t dim, int causal, double scale,
    float *dq, float *dk, float *dv) {
  int64_t q_count = batch * seq_q * heads_q * dim;
  int64_t kv_count = batch * seq_kv * heads_kv * dim;
  if (dq)
    braid_rt_parallel_zero(dq, (size_t)q_count * sizeof(float));
  if (dk)
    braid_rt_parallel_zero(dk, (size_t)kv_count * sizeof(float));
  if (dv)
    braid_rt_parallel_zero(dv, (size_t)kv_count * sizeof(float));
  if (q_count == 0 || kv_count == 0 || (!dq && !dk && !dv))
    return BRAID_RT_OK;
  bwd_job_t job = {
      make_shape(batch, seq_q, seq_kv, heads_q, heads_kv, dim, causal, scale),
      q,
      k,
      v,
      dy,
      dq,
      dk,
      dv,
      0,
      0,
      batch * heads_kv};
  braid_rt_parallel_for(batch * heads_kv, batch * heads_q * seq_q * seq_kv,
                        backward_range, &job);
  return atomic_load(&job.failed) ? BRAID_RT_OUT_OF_MEMORY : BRAID_RT_OK;
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

/*===----------------------------------------------------------------------===*/
/* The SGEMM kernels this file had before (baseline for bench and tests)     */
/*===----------------------------------------------------------------------===*/

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

braid_rt_status_t braid_rt_cpu_attention_sgemm_f32(
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

braid_rt_status_t braid_rt_cpu_attention_grad_all_sgemm_f32(
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
