//===- ops.h - The CUDA kernels' entry points, over an abstract backend ---===//
//
// The body of every entry point of braid/rt/kernels.h on the CUDA backend,
// written once as a template over a backend `B` that offers:
//
//   template <class F> void forEach(int64_t n, F f);  // f(i), i in [0, n)
//   int *errorFlag();        // where kernels record a KernelError
//   void fail(int code);     // records a KernelError found on the host
//   braid_rt_status_t status();  // what a fallible kernel returns
//   void *alloc(size_t);  void release(void *);  // scratch, NULL on failure
//   void zero(void *, size_t);  void copy(void *, const void *, size_t);
//   void gemmStrided(...); void gemmBatched(...);  // cuBLAS semantics:
//       column-major, op(A) is m x k, op(B) k x n, C m x n; gemmStrided
//       also with BF16 operands (bf16 in, f32 products summed in f32)
//   bool gemmLt(...);  // cublasLtMatmul, strided batches, float or BF16
//       operands, f32 C, epilogue kBias (bias[i] added to row i of C) or
//       kGeluBias (then tanh GELU); false when cuBLASLt has no algorithm
//       for the call (nothing run)
//
// CudaBackend (backend.h) launches `f` as a grid-stride kernel on the
// stream and calls cuBLAS; the host test's backend runs `f` in a loop and a
// naive column-major GEMM, so that everything here except the CUDA calls
// themselves is checked on the CPU against the CPU backend. All values come
// from kernel_math.h.
//
// Every lambda handed to forEach is BRAID_HD and captures by value: the
// pointers are device memory, the shapes travel as Dims.
//
//===----------------------------------------------------------------------===//
#ifndef BRAID_RT_CUDA_OPS_H
#define BRAID_RT_CUDA_OPS_H

#include "kernel_math.h"

#include "braid/rt/kernels.h"

#include <stddef.h>
#include <stdint.h>

namespace braid_rt_cuda {
namespace ops {

//===----------------------------------------------------------------------===//
// Host-side shape helpers
//===----------------------------------------------------------------------===//

inline int64_t numElements(const int64_t *shape, int64_t rank) {
  int64_t n = 1;
  for (int64_t d = 0; d < rank; ++d)
    n *= shape[d];
  return n;
}

/// Dimension d of a shape right-aligned in rank `outRank` (1 where absent).
inline int64_t dimAt(const int64_t *shape, int64_t rank, int64_t outRank,
                     int64_t d) {
  int64_t i = d - (outRank - rank);
  return i < 0 ? 1 : shape[i];
}

/// `shape` as Dims; false when its rank exceeds kMaxRank.
inline bool toDims(int64_t rank, const int64_t *shape, Dims &out) {
  if (rank > kMaxRank)
    return false;
  out.rank = rank;
  for (int64_t d = 0; d < rank; ++d)
    out.d[d] = shape[d];
  return true;
}

/// Row-major strides of `shape` (rank <= kMaxRank).
inline Dims stridesOf(const int64_t *shape, int64_t rank) {
  Dims s;
  s.rank = rank;
  int64_t acc = 1;
  for (int64_t d = rank - 1; d >= 0; --d) {
    s.d[d] = acc;
    acc *= shape[d];
  }
  return s;
}

/// Strides, in a tensor of shape inShape, of its broadcast to rank outRank:
/// 0 for dimensions of size 1 or absent.
inline Dims broadcastStrides(const int64_t *inShape, int64_t inRank,
                             int64_t outRank) {
  Dims s;
  s.rank = outRank;
  int64_t acc = 1;
  for (int64_t d = outRank - 1; d >= 0; --d) {
    int64_t n = dimAt(inShape, inRank, outRank, d);
    s.d[d] = n == 1 ? 0 : acc;
    acc *= n;
  }
  return s;
}

/// Row-major C[m, n] = alpha op(A) op(B) + beta C as the column-major
/// C^T = op(B)^T op(A)^T, `count` times with element strides sa, sb, sc.
/// T: float, or BF16 (the bf16-input GEMM; C stays f32).
template <class B, typename T>
void gemmRowMajor(B &b, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                  float alpha, const T *a, int64_t lda, int64_t sa, const T *bm,
                  int64_t ldb, int64_t sb, float beta, float *c, int64_t ldc,
                  int64_t sc, int64_t count) {
  b.gemmStrided(tb, ta, n, m, k, alpha, bm, ldb, sb, a, lda, sa, beta, c, ldc,
                sc, count);
}

/// gemmRowMajor (alpha 1, beta 0) through cublasLtMatmul with the epilogue
/// `gelu ? kGeluBias : kBias`: bias[j] added to row-major column j, the
/// column-major C^T's row j, which is what cuBLASLt's bias is added to.
/// Where cuBLASLt has no algorithm for the call, the plain GEMM and then the
/// bias add (and tanh GELU) of the separate kernels, in place.
template <class B, typename T>
void gemmRowMajorLt(B &b, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                    const T *a, int64_t lda, int64_t sa, const T *bm,
                    int64_t ldb, int64_t sb, float *c, int64_t ldc, int64_t sc,
                    int64_t count, const float *bias, int gelu) {
  if (b.gemmLt(tb, ta, n, m, k, bm, ldb, sb, a, lda, sa, c, ldc, sc, count,
               bias, gelu ? kGeluBias : kBias))
    return;
  gemmRowMajor(b, ta, tb, m, n, k, 1.0f, a, lda, sa, bm, ldb, sb, 0.0f, c, ldc,
               sc, count);
  bool g = gelu != 0;
  b.forEach(count * m * n, [=] BRAID_HD(int64_t i) {
    int64_t p = i / (m * n), r = i % (m * n) / n, j = i % n;
    float &x = c[p * sc + r * ldc + j];
    float sum = x + bias[j];
    x = g ? geluOf(sum, true) : sum;
  });
}

/// The same over arrays (in device memory) of `count` matrix pointers.
template <class B>
void gemmRowMajorBatched(B &b, bool ta, bool tb, int64_t m, int64_t n,
                         int64_t k, float alpha, const float *const *a,
                         int64_t lda, const float *const *bm, int64_t ldb,
                         float beta, float *const *c, int64_t ldc,
                         int64_t count) {
  b.gemmBatched(tb, ta, n, m, k, alpha, bm, ldb, a, lda, beta, c, ldc, count);
}

/// Scratch of several arrays in one allocation, each 256-byte aligned.
struct ScratchLayout {
  size_t bytes = 0;
  size_t add(size_t n) {
    size_t at = bytes;
    bytes += (n + 255) / 256 * 256;
    return at;
  }
};

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

template <class B>
void binary(B &b, int kind, const float *a, const float *bb, int64_t aRank,
            const int64_t *aShape, int64_t bRank, const int64_t *bShape,
            float *out) {
  bool same = aRank == bRank;
  for (int64_t d = 0; same && d < aRank; ++d)
    same = aShape[d] == bShape[d];
  if (same) {
    b.forEach(numElements(aShape, aRank), [=] BRAID_HD(int64_t i) {
      out[i] = binaryOf(kind, a[i], bb[i]);
    });
    return;
  }
  int64_t rank = aRank > bRank ? aRank : bRank;
  if (rank > kMaxRank) {
    b.fail(kErrRankTooLarge);
    return;
  }
  Dims shape;
  shape.rank = rank;
  int64_t total = 1;
  for (int64_t d = 0; d < rank; ++d) {
    int64_t ad = dimAt(aShape, aRank, rank, d);
    shape.d[d] = ad == 1 ? dimAt(bShape, bRank, rank, d) : ad;
    total *= shape.d[d];
  }
  Dims sa = broadcastStrides(aShape, aRank, rank);
  Dims sb = broadcastStrides(bShape, bRank, rank);
  b.forEach(total, [=] BRAID_HD(int64_t i) {
    out[i] = binaryOf(kind, a[gatherOffset(i, shape, sa)],
                      bb[gatherOffset(i, shape, sb)]);
  });
}

template <class B>
void unary(B &b, int kind, const float *x, int64_t count, float *y) {
  b.forEach(count,
            [=] BRAID_HD(int64_t i) { y[i] = unaryOf(kind, x[i]); });
}

template <class B>
void gelu(B &b, const float *x, int64_t count,
          braid_rt_gelu_approximation_t approximate, float *y) {
  bool tanhApprox = approximate == BRAID_RT_GELU_TANH;
  b.forEach(count,
            [=] BRAID_HD(int64_t i) { y[i] = geluOf(x[i], tanhApprox); });
}

template <class B>
void reluGrad(B &b, const float *x, const float *dy, int64_t count,
              float *dx) {
  b.forEach(count,
            [=] BRAID_HD(int64_t i) { dx[i] = braid_rt_cuda::reluGrad(x[i], dy[i]); });
}

template <class B>
void siluGrad(B &b, const float *x, const float *dy, int64_t count,
              float *dx) {
  b.forEach(count,
            [=] BRAID_HD(int64_t i) { dx[i] = braid_rt_cuda::siluGrad(x[i], dy[i]); });
}

template <class B>
void geluGrad(B &b, const float *x, const float *dy, int64_t count,
              braid_rt_gelu_approximation_t approximate, float *dx) {
  bool tanhApprox = approximate == BRAID_RT_GELU_TANH;
  b.forEach(count, [=] BRAID_HD(int64_t i) {
    dx[i] = braid_rt_cuda::geluGrad(x[i], dy[i], tanhApprox);
  });
}

//===----------------------------------------------------------------------===//
// Row-wise: one thread per row (block-wide rows are the performance work)
//===----------------------------------------------------------------------===//

template <class B>
void softmax(B &b, const float *x, int64_t outer, int64_t size, int64_t inner,
             float *y) {
  b.forEach(outer * inner, [=] BRAID_HD(int64_t l) {
    softmaxLine(x, l, size, inner, y);
  });
}

template <class B>
void layerNorm(B &b, const float *x, const float *scale, const float *bias,
               int64_t rows, int64_t cols, double eps, float *y) {
  b.forEach(rows, [=] BRAID_HD(int64_t r) {
    layerNormRow(x + r * cols, scale, bias, cols, eps, y + r * cols);
  });
}

template <class B>
void rmsNorm(B &b, const float *x, const float *scale, int64_t rows,
             int64_t cols, double eps, float *y) {
  b.forEach(rows, [=] BRAID_HD(int64_t r) {
    rmsNormRow(x + r * cols, scale, cols, eps, y + r * cols);
  });
}

template <class B>
void layerNormGrad(B &b, const float *x, const float *scale, const float *dy,
                   int64_t rows, int64_t cols, double eps, float *dx) {
  b.forEach(rows, [=] BRAID_HD(int64_t r) {
    layerNormGradRow(x + r * cols, scale, dy + r * cols, cols, eps,
                     dx + r * cols);
  });
}

template <class B>
void rmsNormGrad(B &b, const float *x, const float *scale, const float *dy,
                 int64_t rows, int64_t cols, double eps, float *dx) {
  b.forEach(rows, [=] BRAID_HD(int64_t r) {
    rmsNormGradRow(x + r * cols, scale, dy + r * cols, cols, eps,
                   dx + r * cols);
  });
}

/// An id outside [0, vocab) records kErrEmbeddingId and yields zeros.
template <class B, typename T>
braid_rt_status_t embedding(B &b, const float *table, const T *ids,
                            int64_t vocab, int64_t hidden, int64_t numIds,
                            float *y) {
  int *flag = b.errorFlag();
  b.forEach(numIds * hidden, [=] BRAID_HD(int64_t i) {
    T id = ids[i / hidden];
    if (!inRange(id, vocab)) {
      raiseError(flag, kErrEmbeddingId);
      y[i] = 0.0f;
      return;
    }
    y[i] = table[(int64_t)id * hidden + i % hidden];
  });
  return b.status();
}

/// One thread per column adds the rows in id order, as the CPU backend
/// does: deterministic, without atomics.
template <class B, typename T>
braid_rt_status_t embeddingGrad(B &b, const T *ids, const float *dy,
                                int64_t numIds, int64_t vocab, int64_t hidden,
                                float *dtable) {
  int *flag = b.errorFlag();
  b.zero(dtable, (size_t)(vocab * hidden) * sizeof(float));
  b.forEach(hidden, [=] BRAID_HD(int64_t c) {
    for (int64_t p = 0; p < numIds; ++p) {
      T id = ids[p];
      if (!inRange(id, vocab)) {
        raiseError(flag, kErrEmbeddingGradId);
        continue;
      }
      dtable[(int64_t)id * hidden + c] += dy[p * hidden + c];
    }
  });
  return b.status();
}

template <class B>
void rotary(B &b, const float *x, int64_t batch, int64_t seq, int64_t heads,
            int64_t dim, double base, int inverse, float *y) {
  int64_t half = dim / 2;
  b.forEach(batch * seq * heads * half, [=] BRAID_HD(int64_t p) {
    int64_t i = p % half, row = p / half; // row = (b * seq + s) * heads + h
    int64_t s = (row / heads) % seq, off = row * dim + i;
    rotaryPair(x[off], x[off + half], s, i, dim, base, inverse != 0, &y[off],
               &y[off + half]);
  });
}

/// Per-row losses into scratch, then one thread sums them in row order.
template <class B, typename T>
braid_rt_status_t crossEntropy(B &b, const float *logits, const T *labels,
                               int64_t rows, int64_t vocab, float *loss) {
  if (rows == 0) {
    b.forEach(1, [=] BRAID_HD(int64_t) { *loss = 0.0f; });
    return b.status();
  }
  double *part = (double *)b.alloc((size_t)rows * sizeof(double));
  if (!part)
    return BRAID_RT_OUT_OF_MEMORY;
  int *flag = b.errorFlag();
  b.forEach(rows, [=] BRAID_HD(int64_t r) {
    T label = labels[r];
    if (!inRange(label, vocab)) {
      raiseError(flag, kErrCrossEntropyLabel);
      part[r] = 0.0;
      return;
    }
    const float *pl = logits + r * vocab;
    float mx;
    part[r] = logSumExp(pl, vocab, &mx) - pl[label];
  });
  b.forEach(1, [=] BRAID_HD(int64_t) {
    double total = 0.0;
    for (int64_t r = 0; r < rows; ++r)
      total += part[r];
    *loss = (float)(total / rows);
  });
  b.release(part);
  return b.status();
}

template <class B, typename T>
braid_rt_status_t crossEntropyGrad(B &b, const float *logits, const T *labels,
                                   const float *grad, int64_t rows,
                                   int64_t vocab, float *dlogits) {
  if (rows == 0)
    return b.status();
  ScratchLayout layout;
  size_t lseAt = layout.add((size_t)rows * sizeof(double));
  size_t mxAt = layout.add((size_t)rows * sizeof(float));
  char *scratch = (char *)b.alloc(layout.bytes);
  if (!scratch)
    return BRAID_RT_OUT_OF_MEMORY;
  double *lse = (double *)(scratch + lseAt);
  float *mx = (float *)(scratch + mxAt);
  int *flag = b.errorFlag();
  b.forEach(rows, [=] BRAID_HD(int64_t r) {
    if (!inRange(labels[r], vocab))
      raiseError(flag, kErrCrossEntropyGradLabel);
    lse[r] = logSumExp(logits + r * vocab, vocab, &mx[r]);
  });
  b.forEach(rows * vocab, [=] BRAID_HD(int64_t i) {
    int64_t r = i / vocab, j = i % vocab;
    double coeff = (double)grad[0] / rows;
    dlogits[i] = crossEntropyGradOf(logits[i], mx[r], lse[r], coeff,
                                  (int64_t)labels[r] == j);
  });
  b.release(scratch);
  return b.status();
}

//===----------------------------------------------------------------------===//
// Matmul (GEMMs through the backend: cuBLAS) and attention
//===----------------------------------------------------------------------===//

/// braid_rt_matmul_f32 on operands of type T (float, or BF16: the
/// bf16-input GEMM); c is f32 either way. With `bias`, braid_rt_matmul_bias
/// (_bf16in)_f32: every GEMM is a cublasLtMatmul with the bias epilogue
/// (kGeluBias with `gelu`).
template <class B, typename T>
void matmulOf(B &b, const T *a, const T *bm, int64_t aRank,
              const int64_t *aShape, int64_t bRank, const int64_t *bShape,
              int transposeA, int transposeB, float *c,
              const float *bias = nullptr, int gelu = 0) {
  bool ta = transposeA != 0, tb = transposeB != 0;
  int64_t lda = aShape[aRank - 1], ldb = bShape[bRank - 1];
  int64_t m = ta ? aShape[aRank - 1] : aShape[aRank - 2];
  int64_t k = ta ? aShape[aRank - 2] : aShape[aRank - 1];
  int64_t n = tb ? bShape[bRank - 2] : bShape[bRank - 1];
  int64_t aSize = aShape[aRank - 2] * aShape[aRank - 1];
  int64_t bSize = bShape[bRank - 2] * bShape[bRank - 1];
  // The batch dimensions: shapes without their last two dimensions.
  int64_t ra = aRank - 2, rb = bRank - 2, rank = ra > rb ? ra : rb;
  int64_t batch = 1, aBatch = numElements(aShape, ra),
          bBatch = numElements(bShape, rb);
  for (int64_t d = 0; d < rank; ++d) {
    int64_t ad = dimAt(aShape, ra, rank, d);
    batch *= ad == 1 ? dimAt(bShape, rb, rank, d) : ad;
  }
  if (batch == 0 || m == 0 || n == 0)
    return;
  if (k == 0) {
    if (!bias) {
      b.zero(c, (size_t)(batch * m * n) * sizeof(float));
      return;
    }
    // No GEMM: the epilogue of a zero product.
    bool g = gelu != 0;
    b.forEach(batch * m * n, [=] BRAID_HD(int64_t i) {
      float x = 0.0f + bias[i % n];
      c[i] = g ? geluOf(x, true) : x;
    });
    return;
  }
  // One GEMM of `count` strided batches, through cuBLASLt with a bias.
  auto gemm = [&](int64_t gm, const T *ga, int64_t gsa, const T *gb,
                  int64_t gsb, float *gc, int64_t gsc, int64_t count) {
    if (bias)
      gemmRowMajorLt(b, ta, tb, gm, n, k, ga, lda, gsa, gb, ldb, gsb, gc, n,
                     gsc, count, bias, gelu);
    else
      gemmRowMajor(b, ta, tb, gm, n, k, 1.0f, ga, lda, gsa, gb, ldb, gsb, 0.0f,
                   gc, n, gsc, count);
  };
  // [..., M, K] x [K, N]: one GEMM with the batch folded into M.
  if (!ta && bBatch == 1 && aBatch == batch) {
    gemm(batch * m, a, 0, bm, 0, c, 0, 1);
    return;
  }
  // An operand's batch equals the result's (each dimension equal, as the
  // result is their broadcast) or is 1: one strided-batched GEMM.
  if ((aBatch == batch || aBatch == 1) && (bBatch == batch || bBatch == 1)) {
    gemm(m, a, aBatch == 1 ? 0 : aSize, bm, bBatch == 1 ? 0 : bSize, c, m * n,
         batch);
    return;
  }
  // Mixed broadcasting ([2, 1] x [1, 3]): one GEMM per result batch.
  for (int64_t p = 0; p < batch; ++p) {
    int64_t oa = 0, ob = 0, sa = 1, sb = 1, rest = p;
    for (int64_t d = rank - 1; d >= 0; --d) {
      int64_t ad = dimAt(aShape, ra, rank, d), bd = dimAt(bShape, rb, rank, d);
      int64_t od = ad == 1 ? bd : ad, idx = rest % od;
      rest /= od;
      if (ad != 1)
        oa += idx * sa;
      if (bd != 1)
        ob += idx * sb;
      sa *= ad;
      sb *= bd;
    }
    gemm(m, a + oa * aSize, 0, bm + ob * bSize, 0, c + p * m * n, 0, 1);
  }
}

template <class B>
void matmul(B &b, const float *a, const float *bm, int64_t aRank,
            const int64_t *aShape, int64_t bRank, const int64_t *bShape,
            int transposeA, int transposeB, float *c) {
  matmulOf(b, a, bm, aRank, aShape, bRank, bShape, transposeA, transposeB, c);
}

/// braid_rt_matmul_bias_f32.
template <class B>
void matmulBias(B &b, const float *a, const float *bm, const float *bias,
                int64_t aRank, const int64_t *aShape, int64_t bRank,
                const int64_t *bShape, int transposeA, int transposeB, int gelu,
                float *c) {
  matmulOf(b, a, bm, aRank, aShape, bRank, bShape, transposeA, transposeB, c,
           bias, gelu);
}

/// braid_rt_matmul_bf16in_f32: both operands hold bf16 values
/// (braid-legalize-bf16 follows every op that computes a bf16 value with a
/// braid.round, and the ops it leaves unrounded only move bf16 values or
/// return ones their bodies rounded), so one kernel copies them to bf16
/// exactly (bf16Of: to nearest even, as the CPU backend, for any other
/// value) into scratch from the backend's pool, and the same GEMMs as
/// braid_rt_matmul_f32 run on the copies, bf16 in and f32 sums (on CUDA
/// cublasGemmStridedBatchedEx, CUDA_R_16BF in, CUDA_R_32F out,
/// CUBLAS_COMPUTE_32F: tensor cores). Empty operands need no GEMM: the f32
/// path writes the zeros, if any.
/// With `bias`: braid_rt_matmul_bias_bf16in_f32, the GEMMs through
/// cuBLASLt (CUDA_R_16BF operands, f32 C and bias, CUBLAS_COMPUTE_32F).
template <class B>
braid_rt_status_t matmulBf16In(B &b, const float *a, const float *bm,
                               int64_t aRank, const int64_t *aShape,
                               int64_t bRank, const int64_t *bShape,
                               int transposeA, int transposeB, float *c,
                               const float *bias = nullptr, int gelu = 0) {
  int64_t aCount = numElements(aShape, aRank),
          bCount = numElements(bShape, bRank);
  if (aCount == 0 || bCount == 0) {
    matmulOf(b, a, bm, aRank, aShape, bRank, bShape, transposeA, transposeB, c,
             bias, gelu);
    return b.status();
  }
  ScratchLayout layout;
  size_t aAt = layout.add((size_t)aCount * sizeof(BF16));
  size_t bAt = layout.add((size_t)bCount * sizeof(BF16));
  char *scratch = (char *)b.alloc(layout.bytes);
  if (!scratch)
    return BRAID_RT_OUT_OF_MEMORY;
  BF16 *a16 = (BF16 *)(scratch + aAt), *b16 = (BF16 *)(scratch + bAt);
  // Both copies in one launch.
  b.forEach(aCount + bCount, [=] BRAID_HD(int64_t i) {
    if (i < aCount)
      a16[i] = bf16Of(a[i]);
    else
      b16[i - aCount] = bf16Of(bm[i - aCount]);
  });
  matmulOf(b, (const BF16 *)a16, (const BF16 *)b16, aRank, aShape, bRank,
           bShape, transposeA, transposeB, c, bias, gelu);
  b.release(scratch);
  return b.status();
}

/// Attention without a score matrix (flash-attention style, as the CPU
/// kernels): one thread per query row walks its keys in blocks of
/// kAttentionBlock held in registers, with a running maximum and sum
/// (online softmax: a block that raises the maximum rescales the sum and
/// the output so far); keys after the row's causal limit are never read.
/// The backward recomputes each row's log-sum-exp L and delta =
/// rowsum(P * dP) = dY . Y (the op gives it q, k, v, dy only), then dQ one
/// thread per query row and dK, dV one thread per key row (summing the
/// query heads of a group in head order, no atomics), so results do not
/// depend on the launch configuration. Not shared-memory tiled: written to
/// be checked on the host (ops.h's forEach), not yet tuned or run on a GPU.
constexpr int64_t kAttentionBlock = 32;

struct AttentionShape {
  int64_t batch, s, t, hq, hkv, d;
  int causal;
  float scale;
  BRAID_HD int64_t group() const { return hq / hkv; }
  /// Keys [0, end) visible to query row i.
  BRAID_HD int64_t keysOf(int64_t i) const {
    return causal ? (i + 1 < t ? i + 1 : t) : t;
  }
  BRAID_HD int64_t qOffset(int64_t b, int64_t i, int64_t h) const {
    return ((b * s + i) * hq + h) * d;
  }
  BRAID_HD int64_t kvOffset(int64_t b, int64_t j, int64_t g) const {
    return ((b * t + j) * hkv + g) * d;
  }
};

BRAID_HD inline float attentionDot(const float *a, const float *b, int64_t d) {
  float acc = 0.0f;
  for (int64_t c = 0; c < d; ++c)
    acc += a[c] * b[c];
  return acc;
}

/// Query row i of head h, batch b: the normalised output into y (if not
/// null), the row's log-sum-exp into *lse and dY . Y into *delta (if dy is
/// not null), one block of keys at a time.
BRAID_HD inline void attentionRow(AttentionShape sh, const float *q,
                                  const float *k, const float *v,
                                  const float *dy, int64_t b, int64_t i,
                                  int64_t h, float *y, double *lse,
                                  double *delta) {
  const float *qr = q + sh.qOffset(b, i, h);
  const float *dyr = dy ? dy + sh.qOffset(b, i, h) : nullptr;
  int64_t g = h / sh.group(), end = sh.keysOf(i), ldk = sh.hkv * sh.d;
  const float *kh = k + sh.kvOffset(b, 0, g), *vh = v + sh.kvOffset(b, 0, g);
  if (y)
    for (int64_t c = 0; c < sh.d; ++c)
      y[c] = 0.0f;
  float m = -INFINITY;
  double l = 0.0, u = 0.0; // sum of P, of P * (dY . V)
  float scores[kAttentionBlock];
  for (int64_t j0 = 0; j0 < end; j0 += kAttentionBlock) {
    int64_t n = end - j0 < kAttentionBlock ? end - j0 : kAttentionBlock;
    float blockMax = -INFINITY;
    for (int64_t jj = 0; jj < n; ++jj) {
      scores[jj] = attentionDot(qr, kh + (j0 + jj) * ldk, sh.d) * sh.scale;
      blockMax = scores[jj] > blockMax ? scores[jj] : blockMax;
    }
    float mNew = blockMax > m ? blockMax : m;
    float alpha = m == -INFINITY ? 0.0f : expf(m - mNew);
    l *= alpha;
    u *= alpha;
    if (y)
      for (int64_t c = 0; c < sh.d; ++c)
        y[c] *= alpha;
    for (int64_t jj = 0; jj < n; ++jj) {
      float p = expf(scores[jj] - mNew);
      const float *vr = vh + (j0 + jj) * ldk;
      l += p;
      if (y)
        for (int64_t c = 0; c < sh.d; ++c)
          y[c] += p * vr[c];
      if (dyr)
        u += (double)p * attentionDot(dyr, vr, sh.d);
    }
    m = mNew;
  }
  if (y) {
    float inv = (float)(1.0 / l);
    for (int64_t c = 0; c < sh.d; ++c)
      y[c] *= inv;
  }
  if (lse)
    *lse = (double)m + log(l);
  if (delta)
    *delta = u / l;
}

template <class B>
braid_rt_status_t attention(B &b, const float *q, const float *k,
                            const float *v, int64_t batch, int64_t seqQ,
                            int64_t seqKv, int64_t headsQ, int64_t headsKv,
                            int64_t dim, int causal, double scale, float *y) {
  if (batch * seqQ * headsQ * dim == 0)
    return b.status();
  if (seqKv == 0) { // no keys: the reference's empty sum
    b.zero(y, (size_t)(batch * seqQ * headsQ * dim) * sizeof(float));
    return b.status();
  }
  AttentionShape sh{batch,   seqQ, seqKv,  headsQ,
                    headsKv, dim,  causal, (float)scale};
  b.forEach(batch * seqQ * headsQ, [=] BRAID_HD(int64_t r) {
    int64_t h = r % sh.hq, i = r / sh.hq % sh.s, bi = r / sh.hq / sh.s;
    attentionRow(sh, q, k, v, nullptr, bi, i, h, y + r * sh.d, nullptr,
                 nullptr);
  });
  return b.status();
}

/// L and delta of every query row (scratch), then dQ per query row, then
/// dK and dV per key row: P = exp(scale q.k - L), dP = dy.v,
/// dS = P (dP - delta) scale; dQ_i = sum_j dS_ij k_j, dK_j = sum_i dS_ij
/// q_i, dV_j = sum_i P_ij dy_i.
template <class B>
braid_rt_status_t
attentionGradAll(B &b, const float *q, const float *k, const float *v,
                 const float *dy, int64_t batch, int64_t seqQ, int64_t seqKv,
                 int64_t headsQ, int64_t headsKv, int64_t dim, int causal,
                 double scale, float *dq, float *dk, float *dv) {
  int64_t qCount = batch * seqQ * headsQ * dim;
  int64_t kvCount = batch * seqKv * headsKv * dim;
  if (dq)
    b.zero(dq, (size_t)qCount * sizeof(float));
  if (dk)
    b.zero(dk, (size_t)kvCount * sizeof(float));
  if (dv)
    b.zero(dv, (size_t)kvCount * sizeof(float));
  if (qCount == 0 || kvCount == 0 || (!dq && !dk && !dv))
    return b.status();
  AttentionShape sh{batch,   seqQ, seqKv,  headsQ,
                    headsKv, dim,  causal, (float)scale};
  int64_t rows = batch * seqQ * headsQ;
  double *stats = (double *)b.alloc((size_t)(2 * rows) * sizeof(double));
  if (!stats)
    return BRAID_RT_OUT_OF_MEMORY;
  double *lse = stats, *delta = stats + rows;
  b.forEach(rows, [=] BRAID_HD(int64_t r) {
    int64_t h = r % sh.hq, i = r / sh.hq % sh.s, bi = r / sh.hq / sh.s;
    attentionRow(sh, q, k, v, dy, bi, i, h, nullptr, lse + r, delta + r);
  });
  int64_t ldk = headsKv * dim;
  if (dq)
    b.forEach(rows, [=] BRAID_HD(int64_t r) {
      int64_t h = r % sh.hq, i = r / sh.hq % sh.s, bi = r / sh.hq / sh.s;
      int64_t off = sh.qOffset(bi, i, h), g = h / sh.group();
      const float *qr = q + off, *dyr = dy + off;
      const float *kh = k + sh.kvOffset(bi, 0, g),
                  *vh = v + sh.kvOffset(bi, 0, g);
      float *out = dq + off;
      float L = (float)lse[r], D = (float)delta[r];
      for (int64_t j = 0; j < sh.keysOf(i); ++j) {
        const float *kr = kh + j * ldk;
        float p = expf(attentionDot(qr, kr, sh.d) * sh.scale - L);
        float ds = p * (attentionDot(dyr, vh + j * ldk, sh.d) - D) * sh.scale;
        for (int64_t c = 0; c < sh.d; ++c)
          out[c] += ds * kr[c];
      }
    });
  if (dk || dv)
    b.forEach(batch * seqKv * headsKv, [=] BRAID_HD(int64_t r) {
      int64_t g = r % sh.hkv, j = r / sh.hkv % sh.t, bi = r / sh.hkv / sh.t;
      int64_t off = sh.kvOffset(bi, j, g);
      const float *kr = k + off, *vr = v + off;
      // Query rows that see key j: all, or i >= j when causal.
      int64_t first = sh.causal ? j : 0;
      for (int64_t h = g * sh.group(); h < (g + 1) * sh.group(); ++h)
        for (int64_t i = first; i < sh.s; ++i) {
          int64_t qOff = sh.qOffset(bi, i, h), row = qOff / sh.d;
          const float *qr = q + qOff, *dyr = dy + qOff;
          float p =
              expf(attentionDot(qr, kr, sh.d) * sh.scale - (float)lse[row]);
          if (dv)
            for (int64_t c = 0; c < sh.d; ++c)
              dv[off + c] += p * dyr[c];
          if (dk) {
            float ds = p * (attentionDot(dyr, vr, sh.d) - (float)delta[row]) *
                       sh.scale;
            for (int64_t c = 0; c < sh.d; ++c)
              dk[off + c] += ds * qr[c];
          }
        }
    });
  b.release(stats);
  return b.status();
}

template <class B>
braid_rt_status_t attentionGrad(B &b, const float *q, const float *k,
                                const float *v, const float *dy, int64_t batch,
                                int64_t seqQ, int64_t seqKv, int64_t headsQ,
                                int64_t headsKv, int64_t dim, int causal,
                                double scale, int64_t operand, float *out) {
  if (operand < 0 || operand > 2)
    return BRAID_RT_INVALID_ARGUMENT;
  return attentionGradAll(b, q, k, v, dy, batch, seqQ, seqKv, headsQ, headsKv,
                          dim, causal, scale, operand == 0 ? out : nullptr,
                          operand == 1 ? out : nullptr,
                          operand == 2 ? out : nullptr);
}

//===----------------------------------------------------------------------===//
// Data movement and reductions
//===----------------------------------------------------------------------===//

template <class B, typename T>
void copy(B &b, const T *x, int64_t count, T *y) {
  if (x != y && count > 0)
    b.copy(y, x, (size_t)count * sizeof(T));
}

template <class B, typename T> void fill(B &b, T value, int64_t count, T *y) {
  b.forEach(count, [=] BRAID_HD(int64_t i) { y[i] = value; });
}

/// y[i] = x[base + gatherOffset(i, shape, strides)]: transpose, broadcast
/// and slice are all strided gathers.
template <class B, typename T>
void gather(B &b, const T *x, int64_t base, Dims shape, Dims strides, T *y) {
  int64_t total = 1;
  for (int64_t d = 0; d < shape.rank; ++d)
    total *= shape.d[d];
  b.forEach(total, [=] BRAID_HD(int64_t i) {
    y[i] = x[base + gatherOffset(i, shape, strides)];
  });
}

template <class B, typename T>
void transpose(B &b, const T *x, int64_t rank, const int64_t *shape,
               const int64_t *permutation, T *y) {
  if (rank > kMaxRank)
    return b.fail(kErrRankTooLarge);
  Dims in = stridesOf(shape, rank), outShape, strides;
  outShape.rank = strides.rank = rank;
  for (int64_t d = 0; d < rank; ++d) {
    outShape.d[d] = shape[permutation[d]];
    strides.d[d] = in.d[permutation[d]];
  }
  gather(b, x, 0, outShape, strides, y);
}

template <class B, typename T>
void broadcastTo(B &b, const T *x, int64_t inRank, const int64_t *inShape,
                 int64_t outRank, const int64_t *outShape, T *y) {
  Dims shape;
  if (!toDims(outRank, outShape, shape) || inRank > outRank)
    return b.fail(kErrRankTooLarge);
  gather(b, x, 0, shape, broadcastStrides(inShape, inRank, outRank), y);
}

template <class B, typename T>
void slice(B &b, const T *x, int64_t rank, const int64_t *inShape,
           const int64_t *start, const int64_t *stride,
           const int64_t *outShape, T *y) {
  Dims shape;
  if (!toDims(rank, outShape, shape))
    return b.fail(kErrRankTooLarge);
  Dims in = stridesOf(inShape, rank), strides = in;
  int64_t base = 0;
  for (int64_t d = 0; d < rank; ++d) {
    base += start[d] * in.d[d];
    strides.d[d] = in.d[d] * (stride ? stride[d] : 1);
  }
  gather(b, x, base, shape, strides, y);
}

template <class B>
void sliceGrad(B &b, const float *dy, int64_t rank, const int64_t *dyShape,
               const int64_t *start, const int64_t *stride,
               const int64_t *dxShape, float *dx) {
  Dims shape;
  if (!toDims(rank, dyShape, shape))
    return b.fail(kErrRankTooLarge);
  b.zero(dx, (size_t)numElements(dxShape, rank) * sizeof(float));
  Dims out = stridesOf(dxShape, rank), strides = out;
  int64_t base = 0;
  for (int64_t d = 0; d < rank; ++d) {
    base += start[d] * out.d[d];
    strides.d[d] = out.d[d] * (stride ? stride[d] : 1);
  }
  b.forEach(numElements(dyShape, rank), [=] BRAID_HD(int64_t i) {
    dx[base + gatherOffset(i, shape, strides)] = dy[i];
  });
}

template <class B, typename T>
void concat(B &b, const T *const *inputs, int64_t numInputs, int64_t rank,
            const int64_t *outShape, int64_t axis,
            const int64_t *inputAxisSizes, T *y) {
  int64_t outer = numElements(outShape, axis);
  int64_t inner = numElements(outShape + axis + 1, rank - axis - 1);
  int64_t size = outShape[axis], at = 0;
  for (int64_t i = 0; i < numInputs; ++i) {
    int64_t part = inputAxisSizes[i] * inner;
    const T *in = inputs[i];
    T *dst = y + at * inner;
    if (part > 0)
      b.forEach(outer * part, [=] BRAID_HD(int64_t j) {
        dst[(j / part) * size * inner + j % part] = in[j];
      });
    at += inputAxisSizes[i];
  }
}

/// A reduction's kept and reduced dimensions, with their input strides.
struct Reduction {
  Dims kept, keptStrides, reduced, reducedStrides;
  int64_t outCount = 1, count = 1;
};

inline bool makeReduction(int64_t rank, const int64_t *shape,
                          int64_t numAxes, const int64_t *axes,
                          Reduction &r) {
  if (rank > kMaxRank)
    return false;
  Dims in = stridesOf(shape, rank);
  for (int64_t d = 0; d < rank; ++d) {
    bool isReduced = false;
    for (int64_t a = 0; a < numAxes; ++a)
      isReduced |= axes[a] == d;
    Dims &dims = isReduced ? r.reduced : r.kept;
    Dims &strides = isReduced ? r.reducedStrides : r.keptStrides;
    dims.d[dims.rank] = shape[d];
    strides.d[strides.rank++] = in.d[d];
    ++dims.rank;
    (isReduced ? r.count : r.outCount) *= shape[d];
  }
  return true;
}

/// One thread per result element reduces its group, sums in double.
template <class B>
void reduce(B &b, const float *x, int64_t rank, const int64_t *shape,
            int64_t numAxes, const int64_t *axes, braid_rt_reduce_kind_t kind,
            float *y) {
  if (rank == 0)
    return copy(b, x, 1, y);
  Reduction r;
  if (!makeReduction(rank, shape, numAxes, axes, r))
    return b.fail(kErrRankTooLarge);
  bool isMax = kind == BRAID_RT_REDUCE_MAX, isMean = kind == BRAID_RT_REDUCE_MEAN;
  b.forEach(r.outCount, [=] BRAID_HD(int64_t o) {
    const float *px = x + gatherOffset(o, r.kept, r.keptStrides);
    if (r.count == 0) {
      y[o] = isMean ? NAN : isMax ? -INFINITY : 0.0f;
      return;
    }
    if (isMax) {
      float mx = -INFINITY;
      for (int64_t j = 0; j < r.count; ++j) {
        float v = px[gatherOffset(j, r.reduced, r.reducedStrides)];
        mx = v > mx ? v : mx;
      }
      y[o] = mx;
      return;
    }
    double sum = 0.0;
    for (int64_t j = 0; j < r.count; ++j)
      sum += px[gatherOffset(j, r.reduced, r.reducedStrides)];
    y[o] = (float)(isMean ? sum / r.count : sum);
  });
}

template <class B>
braid_rt_status_t reduceMaxGrad(B &b, const float *x, const float *dy,
                                int64_t rank, const int64_t *shape,
                                int64_t numAxes, const int64_t *axes,
                                float *dx) {
  int64_t total = numElements(shape, rank);
  if (total == 0)
    return b.status();
  if (rank == 0) {
    copy(b, dy, 1, dx);
    return b.status();
  }
  Reduction r;
  if (!makeReduction(rank, shape, numAxes, axes, r))
    return BRAID_RT_INVALID_ARGUMENT;
  ScratchLayout layout;
  size_t mxAt = layout.add((size_t)r.outCount * sizeof(float));
  size_t tiesAt = layout.add((size_t)r.outCount * sizeof(int64_t));
  char *scratch = (char *)b.alloc(layout.bytes);
  if (!scratch)
    return BRAID_RT_OUT_OF_MEMORY;
  float *mx = (float *)(scratch + mxAt);
  int64_t *ties = (int64_t *)(scratch + tiesAt);
  b.forEach(r.outCount, [=] BRAID_HD(int64_t o) {
    const float *px = x + gatherOffset(o, r.kept, r.keptStrides);
    float m = -INFINITY;
    for (int64_t j = 0; j < r.count; ++j) {
      float v = px[gatherOffset(j, r.reduced, r.reducedStrides)];
      m = v > m ? v : m;
    }
    int64_t n = 0;
    for (int64_t j = 0; j < r.count; ++j)
      n += px[gatherOffset(j, r.reduced, r.reducedStrides)] == m;
    mx[o] = m;
    ties[o] = n;
  });
  // The result index of input element i: its kept coordinates, row-major.
  Dims in, toOut = stridesOf(r.kept.d, r.kept.rank);
  toDims(rank, shape, in);
  Dims outStrides;
  outStrides.rank = rank;
  for (int64_t d = 0, kept = 0; d < rank; ++d) {
    bool isReduced = false;
    for (int64_t a = 0; a < numAxes; ++a)
      isReduced |= axes[a] == d;
    outStrides.d[d] = isReduced ? 0 : toOut.d[kept++];
  }
  b.forEach(total, [=] BRAID_HD(int64_t i) {
    int64_t o = gatherOffset(i, in, outStrides);
    dx[i] = x[i] == mx[o] ? (float)((double)dy[o] / ties[o]) : 0.0f;
  });
  b.release(scratch);
  return b.status();
}

//===----------------------------------------------------------------------===//
// Vocabulary-parallel statistics (one rank's columns [first, first + cols))
//===----------------------------------------------------------------------===//

template <class B>
void vocabParallelMax(B &b, const float *logits, int64_t rows, int64_t cols,
                      double *max) {
  b.forEach(rows, [=] BRAID_HD(int64_t r) {
    max[r] = vocabMaxRow(logits + r * cols, cols);
  });
}

template <class B>
void vocabParallelSumExp(B &b, const float *logits, const double *max,
                         int64_t rows, int64_t cols, double *sum) {
  b.forEach(rows, [=] BRAID_HD(int64_t r) {
    sum[r] = vocabSumExpRow(logits + r * cols, cols, max[r]);
  });
}

template <class B, typename T>
void vocabParallelPicked(B &b, const float *logits, const T *labels,
                         int64_t rows, int64_t cols, int64_t first,
                         double *picked) {
  b.forEach(rows, [=] BRAID_HD(int64_t r) {
    picked[r] = vocabPicked(logits + r * cols, cols, (int64_t)labels[r], first);
  });
}

template <class B>
void vocabParallelCombine(B &b, const double *parts, int64_t numParts,
                          int64_t rows, braid_rt_reduce_kind_t kind,
                          double *out) {
  bool isMax = kind == BRAID_RT_REDUCE_MAX;
  b.forEach(rows, [=] BRAID_HD(int64_t r) {
    out[r] = vocabCombine(parts, numParts, rows, r, isMax);
  });
}

/// One thread adds the rows' losses in row order, as the CPU does.
template <class B>
void vocabParallelLoss(B &b, const double *max, const double *sum,
                       const double *target, int64_t rows, float *loss) {
  b.forEach(1, [=] BRAID_HD(int64_t) {
    double total = 0.0;
    for (int64_t r = 0; r < rows; ++r)
      total += max[r] + log(sum[r]) - target[r];
    *loss = (float)(rows ? total / rows : 0.0);
  });
}

template <class B, typename T>
void vocabParallelCrossEntropyGrad(B &b, const float *logits, const T *labels,
                                   const float *grad, const double *max,
                                   const double *sum, int64_t rows,
                                   int64_t cols, int64_t first,
                                   float *dlogits) {
  b.forEach(rows * cols, [=] BRAID_HD(int64_t i) {
    int64_t r = i / cols, c = i % cols;
    double coeff = (double)grad[0] / rows;
    dlogits[i] = vocabCrossEntropyGradOf(logits[i], max[r], sum[r], coeff,
                                         first + c == (int64_t)labels[r]);
  });
}

/// Ids outside this rank's columns give zeros: they are another rank's.
template <class B, typename T>
void vocabParallelEmbedding(B &b, const float *table, const T *ids,
                            int64_t cols, int64_t hidden, int64_t numIds,
                            int64_t first, float *y) {
  b.forEach(numIds * hidden, [=] BRAID_HD(int64_t i) {
    int64_t id = (int64_t)ids[i / hidden];
    y[i] = id >= first && id < first + cols
               ? table[(id - first) * hidden + i % hidden]
               : 0.0f;
  });
}

/// One thread per column adds the rows of dy in id order into double
/// scratch, then rounds: the CPU's sums, bit for bit, without atomics.
template <class B, typename T>
braid_rt_status_t vocabParallelEmbeddingGrad(B &b, const T *ids,
                                             const float *dy, int64_t numIds,
                                             int64_t cols, int64_t hidden,
                                             int64_t first, float *dtable) {
  int64_t n = cols * hidden;
  double *acc = (double *)b.alloc((size_t)(n > 0 ? n : 1) * sizeof(double));
  if (!acc)
    return BRAID_RT_OUT_OF_MEMORY;
  b.zero(acc, (size_t)n * sizeof(double));
  b.forEach(hidden, [=] BRAID_HD(int64_t c) {
    for (int64_t p = 0; p < numIds; ++p) {
      int64_t id = (int64_t)ids[p];
      if (id >= first && id < first + cols)
        acc[(id - first) * hidden + c] += dy[p * hidden + c];
    }
  });
  b.forEach(n, [=] BRAID_HD(int64_t i) { dtable[i] = (float)acc[i]; });
  b.release(acc);
  return b.status();
}

//===----------------------------------------------------------------------===//
// Training
//===----------------------------------------------------------------------===//

template <class B, typename T>
void lrSchedule(B &b, const T *step, braid_rt_lr_decay_t decay, double lr,
                double minLr, int64_t warmup, int64_t total, float *out) {
  int kind = decay;
  b.forEach(1, [=] BRAID_HD(int64_t) {
    *out = (float)lrAt((double)*step, kind, lr, minLr, warmup, total);
  });
}

/// The sum of squares of all inputs in double: each input in chunks of
/// kChunk elements, one thread per chunk, then one thread adds the chunks'
/// sums in order (deterministic).
template <class B>
void sumSquares(B &b, const float *const *inputs, const int64_t *counts,
                int64_t numInputs, bool root, float *out) {
  constexpr int64_t kChunk = 4096;
  int64_t numParts = 0;
  for (int64_t t = 0; t < numInputs; ++t)
    numParts += (counts[t] + kChunk - 1) / kChunk;
  double *parts =
      (double *)b.alloc((size_t)(numParts ? numParts : 1) * sizeof(double));
  if (!parts)
    return b.fail(kErrOutOfMemory);
  for (int64_t t = 0, at = 0; t < numInputs; ++t) {
    const float *x = inputs[t];
    int64_t n = counts[t], chunks = (n + kChunk - 1) / kChunk;
    double *dst = parts + at;
    b.forEach(chunks, [=] BRAID_HD(int64_t c) {
      int64_t end = (c + 1) * kChunk < n ? (c + 1) * kChunk : n;
      double sum = 0.0;
      for (int64_t i = c * kChunk; i < end; ++i)
        sum += (double)x[i] * x[i];
      dst[c] = sum;
    });
    at += chunks;
  }
  b.forEach(1, [=] BRAID_HD(int64_t) {
    double total = 0.0;
    for (int64_t i = 0; i < numParts; ++i)
      total += parts[i];
    *out = (float)(root ? sqrt(total) : total);
  });
  b.release(parts);
}

template <class B>
void clipCoefficient(B &b, const float *norm, double maxNorm, float *out) {
  b.forEach(1, [=] BRAID_HD(int64_t) {
    *out = braid_rt_cuda::clipCoefficient(*norm, maxNorm);
  });
}

template <class B, typename T>
void adamwUpdate(B &b, const float *param, const float *grad, const float *m,
                 const float *v, const float *lr, const T *step,
                 const float *gradScale, int64_t count, double beta1,
                 double beta2, double eps, double wd, float *newParam,
                 float *newM, float *newV) {
  b.forEach(count, [=] BRAID_HD(int64_t i) {
    adamwElement(param[i], grad[i], m[i], v[i], *lr, (double)*step + 1,
                 *gradScale, beta1, beta2, eps, wd, &newParam[i], &newM[i],
                 &newV[i]);
  });
}

template <class B>
void sgdUpdate(B &b, const float *param, const float *grad,
               const float *buffer, const float *lr, const float *gradScale,
               int64_t count, double momentum, int nesterov, double wd,
               float *newParam, float *newBuffer) {
  b.forEach(count, [=] BRAID_HD(int64_t i) {
    sgdElement(param[i], grad[i], buffer[i], *lr, *gradScale, momentum,
               nesterov != 0, wd, &newParam[i], &newBuffer[i]);
  });
}

} // namespace ops
} // namespace braid_rt_cuda

#endif // BRAID_RT_CUDA_OPS_H
