//===- kernel_math.h - The math of the CUDA kernels, host and device ------===//
//
// Every value a CUDA kernel of the runtime computes comes from a function of
// this header, marked BRAID_HD: __host__ __device__ under nvcc, nothing under
// a host C++ compiler. The same functions therefore run on the GPU (called by
// the kernels of ops.h) and on the CPU in the host unit test
// (runtime/test/cuda_kernel_math_test.cpp), which compares them with the CPU
// backend's kernels. The formulas, and where they round to f32 or accumulate
// in double, are those of runtime/src/cpu/kernels/*.c.
//
// No CUDA header is included: the host test builds without the toolkit.
//
//===----------------------------------------------------------------------===//
#ifndef BRAID_RT_CUDA_KERNEL_MATH_H
#define BRAID_RT_CUDA_KERNEL_MATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define BRAID_HD __host__ __device__
#else
#define BRAID_HD
#endif

namespace braid_rt_cuda {

/// The largest tensor rank a general-rank kernel accepts (shapes travel to
/// the device by value, inside the kernel's arguments).
constexpr int kMaxRank = 8;

/// A shape, or strides, passed by value to a kernel.
struct Dims {
  int64_t rank = 0;
  int64_t d[kMaxRank] = {};
};

/// Codes of the errors a kernel records on the device (see errors.h): the
/// first one sticks until it is polled. Values are stable, for messages.
enum KernelError : int {
  kErrNone = 0,
  kErrEmbeddingId = 1,
  kErrEmbeddingGradId = 2,
  kErrCrossEntropyLabel = 3,
  kErrCrossEntropyGradLabel = 4,
  // Recorded on the host, for kernels that return void.
  kErrRankTooLarge = 5,
  kErrCublas = 6,
  kErrLaunch = 7,
  kErrOutOfMemory = 8,
};

/// The epilogues of a backend's gemmLt, as cuBLASLt's CUBLASLT_EPILOGUE_BIAS
/// and CUBLASLT_EPILOGUE_GELU_BIAS: bias[i] added to row i of the
/// column-major result (then tanh GELU).
enum GemmEpilogue : int {
  kBias = 1,
  kGeluBias = 2,
};

/// Records `code` in `*flag` unless an earlier error is there.
BRAID_HD inline void raiseError(int *flag, int code) {
#ifdef __CUDA_ARCH__
  atomicCAS(flag, 0, code);
#else
  if (!*flag)
    *flag = code;
#endif
}

//===----------------------------------------------------------------------===//
// Indexing
//===----------------------------------------------------------------------===//

/// The offset of the element at flat index `i` of a row-major tensor of
/// shape `shape`, in a tensor whose dimension d has stride `strides.d[d]`
/// (0 for a broadcast dimension).
BRAID_HD inline int64_t gatherOffset(int64_t i, const Dims &shape,
                                     const Dims &strides) {
  int64_t off = 0;
  for (int64_t d = shape.rank - 1; d >= 0; --d) {
    int64_t n = shape.d[d];
    off += (i % n) * strides.d[d];
    i /= n;
  }
  return off;
}

/// Whether `id` is a valid row of a table of `bound` rows.
template <typename T> BRAID_HD inline bool inRange(T id, int64_t bound) {
  return id >= 0 && (int64_t)id < bound;
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

constexpr double kPi = 3.14159265358979323846;

enum BinaryKind : int { kAdd, kSub, kMul, kDiv };
enum UnaryKind : int { kNeg, kExp, kSqrt, kRsqrt, kRelu, kSilu, kRoundBF16 };

BRAID_HD inline float negOf(float x) { return -x; }
BRAID_HD inline float expOf(float x) { return expf(x); }
BRAID_HD inline float sqrtOf(float x) { return sqrtf(x); }
BRAID_HD inline float rsqrtOf(float x) { return (float)(1.0 / sqrt((double)x)); }
BRAID_HD inline float reluOf(float x) { return x > 0.0f ? x : 0.0f; }
BRAID_HD inline float siluOf(float x) {
  return (float)((double)x / (1.0 + exp(-(double)x)));
}
BRAID_HD inline float binaryOf(int kind, float x, float y) {
  switch (kind) {
  case kAdd:
    return x + y;
  case kSub:
    return x - y;
  case kMul:
    return x * y;
  default:
    return x / y;
  }
}

// As braid_rt_round_bf16_of (braid/rt/elementwise_math.h).
BRAID_HD inline float roundBF16Of(float x) {
  uint32_t u;
  memcpy(&u, &x, sizeof(u));
  if ((u & 0x7fffffffu) > 0x7f800000u)
    return x;
  u += 0x7fffu + ((u >> 16) & 1u);
  u &= 0xffff0000u;
  memcpy(&x, &u, sizeof(x));
  return x;
}

/// A bf16 number as its 16 bits: the layout of cuBLAS's CUDA_R_16BF
/// (__nv_bfloat16), the operands of the bf16-input GEMM.
struct BF16 {
  uint16_t bits;
};

/// `x` in bf16, to nearest, ties to even (exact when `x` holds a bf16
/// value); a NaN stays a NaN (quiet). The CPU backend's to_bf16
/// (runtime/src/cpu/kernels/matmul.c), bit for bit.
BRAID_HD inline BF16 bf16Of(float x) {
  uint32_t u;
  memcpy(&u, &x, sizeof(u));
  BF16 h;
  h.bits = (u & 0x7fffffffu) > 0x7f800000u
               ? (uint16_t)((u >> 16) | 0x40u)
               : (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
  return h;
}

/// The f32 value of a bf16 one (exact).
BRAID_HD inline float floatOf(BF16 h) {
  uint32_t u = (uint32_t)h.bits << 16;
  float x;
  memcpy(&x, &u, sizeof(x));
  return x;
}

BRAID_HD inline float unaryOf(int kind, float x) {
  switch (kind) {
  case kNeg:
    return negOf(x);
  case kExp:
    return expOf(x);
  case kSqrt:
    return sqrtOf(x);
  case kRsqrt:
    return rsqrtOf(x);
  case kRelu:
    return reluOf(x);
  case kRoundBF16:
    return roundBF16Of(x);
  default:
    return siluOf(x);
  }
}

BRAID_HD inline float geluOf(float x, bool tanhApprox) {
  double v = x;
  if (tanhApprox) {
    const double c = sqrt(2.0 / kPi);
    return (float)(0.5 * v * (1.0 + tanh(c * (v + 0.044715 * v * v * v))));
  }
  return (float)(0.5 * v * (1.0 + erf(v / sqrt(2.0))));
}

BRAID_HD inline float reluGrad(float x, float dy) { return x > 0.0f ? dy : 0.0f; }
BRAID_HD inline float siluGrad(float x, float dy) {
  double xi = x, s = 1.0 / (1.0 + exp(-xi));
  return (float)(dy * s * (1.0 + xi * (1.0 - s)));
}
BRAID_HD inline float geluGrad(float x, float dy, bool tanhApprox) {
  double xi = x;
  if (tanhApprox) {
    const double c = sqrt(2.0 / kPi), a = 0.044715;
    double t = tanh(c * (xi + a * xi * xi * xi));
    return (float)(dy * (0.5 * (1.0 + t) + 0.5 * xi * (1.0 - t * t) * c *
                                               (1.0 + 3.0 * a * xi * xi)));
  }
  const double invSqrt2Pi = 1.0 / sqrt(2.0 * kPi);
  double cdf = 0.5 * (1.0 + erf(xi / sqrt(2.0)));
  double pdf = exp(-0.5 * xi * xi) * invSqrt2Pi;
  return (float)(dy * (cdf + xi * pdf));
}

//===----------------------------------------------------------------------===//
// Row-wise: one call per row (or softmax line), sums in double
//===----------------------------------------------------------------------===//

/// Softmax of line `l` of an [outer, size, inner] tensor along `size`.
BRAID_HD inline void softmaxLine(const float *x, int64_t l, int64_t size,
                                 int64_t inner, float *y) {
  int64_t o = l / inner, in = l % inner;
  const float *px = x + o * size * inner + in;
  float *py = y + o * size * inner + in;
  float mx = -INFINITY;
  for (int64_t i = 0; i < size; ++i)
    mx = px[i * inner] > mx ? px[i * inner] : mx;
  double sum = 0.0;
  for (int64_t i = 0; i < size; ++i) {
    float e = expf(px[i * inner] - mx);
    py[i * inner] = e;
    sum += e;
  }
  float inv = (float)(1.0 / sum);
  for (int64_t i = 0; i < size; ++i)
    py[i * inner] *= inv;
}

/// The mean of a row and 1 / sqrt(biased variance + eps).
BRAID_HD inline void normalizer(const float *x, int64_t h, double eps,
                                double *meanOut, double *invOut) {
  double mean = 0.0, var = 0.0;
  for (int64_t i = 0; i < h; ++i)
    mean += x[i];
  mean /= h;
  for (int64_t i = 0; i < h; ++i)
    var += (x[i] - mean) * (x[i] - mean);
  *meanOut = mean;
  *invOut = 1.0 / sqrt(var / h + eps);
}

BRAID_HD inline void layerNormRow(const float *px, const float *scale,
                                  const float *bias, int64_t cols, double eps,
                                  float *py) {
  double mean, inv;
  normalizer(px, cols, eps, &mean, &inv);
  for (int64_t i = 0; i < cols; ++i)
    py[i] = (float)((px[i] - mean) * inv * scale[i] + bias[i]);
}

BRAID_HD inline void rmsNormRow(const float *px, const float *scale,
                                int64_t cols, double eps, float *py) {
  double ms = 0.0;
  for (int64_t i = 0; i < cols; ++i)
    ms += (double)px[i] * px[i];
  double inv = 1.0 / sqrt(ms / cols + eps);
  for (int64_t i = 0; i < cols; ++i)
    py[i] = (float)(px[i] * inv * scale[i]);
}

BRAID_HD inline void layerNormGradRow(const float *px, const float *scale,
                                      const float *pdy, int64_t cols,
                                      double eps, float *pdx) {
  double mean, inv;
  normalizer(px, cols, eps, &mean, &inv);
  double meanD = 0.0, meanDx = 0.0;
  for (int64_t i = 0; i < cols; ++i) {
    double xhat = (px[i] - mean) * inv, dxhat = (double)pdy[i] * scale[i];
    meanD += dxhat;
    meanDx += dxhat * xhat;
  }
  meanD /= cols;
  meanDx /= cols;
  for (int64_t i = 0; i < cols; ++i) {
    double xhat = (px[i] - mean) * inv, dxhat = (double)pdy[i] * scale[i];
    pdx[i] = (float)(inv * (dxhat - meanD - xhat * meanDx));
  }
}

BRAID_HD inline void rmsNormGradRow(const float *px, const float *scale,
                                    const float *pdy, int64_t cols, double eps,
                                    float *pdx) {
  double ms = 0.0, dot = 0.0;
  for (int64_t i = 0; i < cols; ++i) {
    ms += (double)px[i] * px[i];
    dot += (double)pdy[i] * scale[i] * px[i];
  }
  double inv = 1.0 / sqrt(ms / cols + eps);
  double c = inv * inv * inv * dot / cols;
  for (int64_t i = 0; i < cols; ++i)
    pdx[i] = (float)(inv * pdy[i] * scale[i] - px[i] * c);
}

/// logsumexp of a row of logits, in double; *mxOut is the row's maximum.
BRAID_HD inline double logSumExp(const float *pl, int64_t v, float *mxOut) {
  float mx = -INFINITY;
  for (int64_t i = 0; i < v; ++i)
    mx = pl[i] > mx ? pl[i] : mx;
  double sum = 0.0;
  for (int64_t i = 0; i < v; ++i)
    sum += expf(pl[i] - mx);
  *mxOut = mx;
  return mx + log(sum);
}

/// One element of cross_entropy_grad, given its row's maximum and logsumexp.
BRAID_HD inline float crossEntropyGradOf(float logit, float mx, double lse,
                                       double coeff, bool isLabel) {
  double inv = exp(mx - lse); // 1 / sum of exp(logit - mx)
  double p = expf(logit - mx) * inv;
  return (float)(coeff * (isLabel ? p - 1.0 : p));
}

/// The rotation of pair (x0, x1) at position `s`, frequency `i` of `dim`.
BRAID_HD inline void rotaryPair(float x0, float x1, int64_t s, int64_t i,
                                int64_t dim, double base, bool inverse,
                                float *y0, float *y1) {
  double angle = s * pow(base, -2.0 * (double)i / dim);
  double c = cos(angle), sn = (inverse ? -1.0 : 1.0) * sin(angle);
  *y0 = (float)(x0 * c - x1 * sn);
  *y1 = (float)(x1 * c + x0 * sn);
}

/// Row `row` (of `s` rows, `t` columns) of attention scores becomes its
/// softmax over columns [0, row + 1) when causal (zero beyond), [0, t)
/// otherwise.
BRAID_HD inline void maskedSoftmaxRow(float *p, int64_t row, int64_t t,
                                      bool causal) {
  int64_t end = causal ? (row + 1 < t ? row + 1 : t) : t;
  float mx = -INFINITY;
  for (int64_t j = 0; j < end; ++j)
    mx = p[j] > mx ? p[j] : mx;
  double sum = 0.0;
  for (int64_t j = 0; j < end; ++j) {
    p[j] = expf(p[j] - mx);
    sum += p[j];
  }
  float inv = (float)(1.0 / sum);
  for (int64_t j = 0; j < end; ++j)
    p[j] *= inv;
  for (int64_t j = end; j < t; ++j)
    p[j] = 0.0f;
}

/// dS = P * (dP - rowsum(P * dP)) * scale for one row; `dr` holds dP.
BRAID_HD inline void softmaxGradRow(const float *pr, int64_t t, double scale,
                                    float *dr) {
  double pdp = 0.0;
  for (int64_t j = 0; j < t; ++j)
    pdp += (double)pr[j] * dr[j];
  for (int64_t j = 0; j < t; ++j)
    dr[j] = (float)(pr[j] * (dr[j] - pdp) * scale);
}

//===----------------------------------------------------------------------===//
// Vocabulary-parallel statistics: one call per row, in double, in the CPU's
// order (vocab_parallel.c)
//===----------------------------------------------------------------------===//

/// The maximum of a row of this rank's logits (-inf for an empty row).
BRAID_HD inline double vocabMaxRow(const float *pl, int64_t cols) {
  double m = -INFINITY;
  for (int64_t i = 0; i < cols; ++i)
    m = fmax(m, (double)pl[i]);
  return m;
}

/// The sum, in column order, of exp(logit - mx) over a row.
BRAID_HD inline double vocabSumExpRow(const float *pl, int64_t cols,
                                      double mx) {
  double s = 0.0;
  for (int64_t i = 0; i < cols; ++i)
    s += exp((double)pl[i] - mx);
  return s;
}

/// The row's logit of `label` when this rank's columns [first, first +
/// cols) hold it, else 0.
BRAID_HD inline double vocabPicked(const float *pl, int64_t cols, int64_t label,
                                   int64_t first) {
  return label >= first && label < first + cols ? (double)pl[label - first]
                                                : 0.0;
}

/// Row r of [numParts][rows] parts combined in part order: their maximum
/// (isMax) or their sum.
BRAID_HD inline double vocabCombine(const double *parts, int64_t numParts,
                                    int64_t rows, int64_t r, bool isMax) {
  double v = isMax ? -INFINITY : 0.0;
  for (int64_t k = 0; k < numParts; ++k)
    v = isMax ? fmax(v, parts[k * rows + r]) : v + parts[k * rows + r];
  return v;
}

/// One element of this rank's columns of cross_entropy_grad, from the
/// combined max and sum of its row.
BRAID_HD inline float vocabCrossEntropyGradOf(float logit, double mx,
                                              double sum, double coeff,
                                              bool isLabel) {
  double p = exp((double)logit - mx) / sum;
  return (float)(coeff * (p - (isLabel ? 1.0 : 0.0)));
}

//===----------------------------------------------------------------------===//
// Training
//===----------------------------------------------------------------------===//

BRAID_HD inline double lrAt(double t, int decay, double lr, double minLr,
                            int64_t warmup, int64_t total) {
  if (t < (double)warmup)
    return lr * (t + 1) / (double)warmup;
  double span = (double)(total - warmup);
  double p = (t - (double)warmup) / (span > 1.0 ? span : 1.0);
  p = p < 1.0 ? p : 1.0;
  if (decay == 1) // linear
    return minLr + (lr - minLr) * (1.0 - p);
  if (decay == 2) // cosine
    return minLr + (lr - minLr) * 0.5 * (1.0 + cos(kPi * p));
  return lr;
}

BRAID_HD inline float clipCoefficient(float norm, double maxNorm) {
  double c = maxNorm / ((double)norm + 1e-6);
  return (float)(c < 1.0 ? c : 1.0);
}

/// One element of adamw_update at step t (1-based).
BRAID_HD inline void adamwElement(float param, float grad, float m, float v,
                                  double lr, double t, double scale, double b1,
                                  double b2, double eps, double wd,
                                  float *newParam, float *newM, float *newV) {
  if (!(scale - scale == 0.0)) { // non-finite: a skipped step
    *newParam = param;
    *newM = m;
    *newV = v;
    return;
  }
  double c1 = 1.0 - pow(b1, t), c2 = 1.0 - pow(b2, t);
  double g = grad * scale;
  double nm = b1 * m + (1.0 - b1) * g;
  double nv = b2 * v + (1.0 - b2) * g * g;
  double decayed = param * (1.0 - lr * wd);
  // As in the reference, the parameter uses the unrounded new m and v.
  *newParam = (float)(decayed - lr * (nm / c1) / (sqrt(nv / c2) + eps));
  *newM = (float)nm;
  *newV = (float)nv;
}

BRAID_HD inline void sgdElement(float param, float grad, float buffer,
                                double rate, double scale, double momentum,
                                bool nesterov, double wd, float *newParam,
                                float *newBuffer) {
  if (!(scale - scale == 0.0)) { // non-finite: a skipped step
    *newParam = param;
    *newBuffer = buffer;
    return;
  }
  double p = param;
  double g = grad * scale + wd * p;
  double nb = momentum * buffer + g;
  double step = nesterov ? g + momentum * nb : nb;
  *newParam = (float)(p - rate * step);
  *newBuffer = (float)nb;
}

} // namespace braid_rt_cuda

#endif // BRAID_RT_CUDA_KERNEL_MATH_H
