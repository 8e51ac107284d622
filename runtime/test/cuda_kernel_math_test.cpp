//===- cuda_kernel_math_test.cpp - CUDA kernels' math vs the CPU kernels --===//
//
// Runs every entry point of the CUDA backend's ops.h (all of kernels.h) on
// the host, through HostBackend: forEach is a loop over the same
// __host__ __device__ bodies the GPU runs, GEMMs are a naive column-major
// GEMM with cuBLAS's arguments (so the row-major to column-major mapping is
// checked too), scratch is malloc. Each result is compared with the CPU
// backend's kernel on random inputs (fixed seed): the largest difference,
// relative to the largest magnitude of the CPU result, must be at most
// 1e-5. Statuses (ids out of range, bad operands) must match the CPU's.
// The bf16-input matmul also runs a reference bf16 GEMM (bf16 operands,
// products summed in f32, as cublasGemmStridedBatchedEx with
// CUBLAS_COMPUTE_32F) and is held to an error bound per element
// (testMatmulBf16In). The matmuls with a bias go through a reference
// cublasLtMatmul (HostBackend::gemmLt: the GEMM, then cuBLASLt's BIAS or
// GELU_BIAS epilogue; anything else refused) and are compared with the
// CPU's braid_rt_matmul_bias_f32 / _bf16in_f32 (testMatmulBias).
// What this cannot check: the CUDA launches and cuBLAS calls themselves.
//
// Built without CUDA: kernel_math.h defines BRAID_HD away.
//
//===----------------------------------------------------------------------===//

#include "ops.h"

#include "braid/rt/kernels.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

using namespace braid_rt_cuda;

namespace {

/// ops.h's backend on the host.
struct HostBackend {
  int flag = kErrNone;
  // GEMM calls by operand type, and an allocation failure on request.
  int f32Gemms = 0, bf16Gemms = 0, ltGemms = 0;
  bool failAlloc = false;

  template <class F> void forEach(int64_t n, F f) {
    for (int64_t i = 0; i < n; ++i)
      f(i);
  }
  int *errorFlag() { return &flag; }
  void fail(int code) { raiseError(&flag, code); }
  braid_rt_status_t status() const {
    return flag == kErrNone ? BRAID_RT_OK
           : flag == kErrOutOfMemory ? BRAID_RT_OUT_OF_MEMORY
           : flag <= kErrCrossEntropyGradLabel ? BRAID_RT_INVALID_ARGUMENT
                                              : BRAID_RT_INTERNAL;
  }
  void *alloc(size_t bytes) {
    return failAlloc ? nullptr : malloc(bytes ? bytes : 1);
  }
  void release(void *p) { free(p); }
  void zero(void *p, size_t bytes) { memset(p, 0, bytes); }
  void copy(void *dst, const void *src, size_t bytes) {
    memcpy(dst, src, bytes);
  }

  // cuBLAS semantics: column-major, element (i, j) of X at X[i + j * ldx].
  static void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                   float alpha, const float *a, int64_t lda, const float *b,
                   int64_t ldb, float beta, float *c, int64_t ldc) {
    for (int64_t j = 0; j < n; ++j)
      for (int64_t i = 0; i < m; ++i) {
        double sum = 0.0;
        for (int64_t l = 0; l < k; ++l)
          sum += (double)(ta ? a[l + i * lda] : a[i + l * lda]) *
                 (tb ? b[j + l * ldb] : b[l + j * ldb]);
        float &out = c[i + j * ldc];
        out = (float)(alpha * sum + (beta == 0.0f ? 0.0 : beta * out));
      }
  }
  void gemmStrided(bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                   float alpha, const float *a, int64_t lda, int64_t sa,
                   const float *b, int64_t ldb, int64_t sb, float beta,
                   float *c, int64_t ldc, int64_t sc, int64_t count) {
    ++f32Gemms;
    for (int64_t p = 0; p < count; ++p)
      gemm(ta, tb, m, n, k, alpha, a + p * sa, lda, b + p * sb, ldb, beta,
           c + p * sc, ldc);
  }
  // cublasGemmStridedBatchedEx with CUDA_R_16BF operands, CUDA_R_32F C and
  // CUBLAS_COMPUTE_32F: the bf16 products (exact in f32) summed in f32, in
  // order.
  void gemmStrided(bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                   float alpha, const BF16 *a, int64_t lda, int64_t sa,
                   const BF16 *b, int64_t ldb, int64_t sb, float beta, float *c,
                   int64_t ldc, int64_t sc, int64_t count) {
    ++bf16Gemms;
    for (int64_t p = 0; p < count; ++p) {
      const BF16 *ap = a + p * sa, *bp = b + p * sb;
      float *cp = c + p * sc;
      for (int64_t j = 0; j < n; ++j)
        for (int64_t i = 0; i < m; ++i) {
          float sum = 0.0f;
          for (int64_t l = 0; l < k; ++l)
            sum += floatOf(ta ? ap[l + i * lda] : ap[i + l * lda]) *
                   floatOf(tb ? bp[j + l * ldb] : bp[l + j * ldb]);
          float &out = cp[i + j * ldc];
          out = alpha * sum + (beta == 0.0f ? 0.0f : beta * out);
        }
    }
  }
  void gemmBatched(bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                   float alpha, const float *const *a, int64_t lda,
                   const float *const *b, int64_t ldb, float beta,
                   float *const *c, int64_t ldc, int64_t count) {
    ++f32Gemms;
    for (int64_t p = 0; p < count; ++p)
      gemm(ta, tb, m, n, k, alpha, a[p], lda, b[p], ldb, beta, c[p], ldc);
  }
  // A reference cublasLtMatmul (alpha 1, beta 0, strided batches, f32 C):
  // the GEMM, then CUBLASLT_EPILOGUE_BIAS (bias[i], f32, added to row i of
  // the column-major C, the same bias for every batch) or GELU_BIAS (then
  // tanh GELU, kernel_math.h's). Refused, as kErrCublas and no output, for
  // what it does not implement: another epilogue, no bias, a C narrower
  // than its rows, no batches. With ltNoAlgorithm it has no algorithm for
  // any call: false, nothing run or recorded (cuBLASLt's heuristic
  // returning no result).
  bool ltNoAlgorithm = false;
  template <typename T>
  bool gemmLt(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const T *a,
              int64_t lda, int64_t sa, const T *b, int64_t ldb, int64_t sb,
              float *c, int64_t ldc, int64_t sc, int64_t count,
              const float *bias, GemmEpilogue epilogue) {
    if (ltNoAlgorithm)
      return false;
    if ((epilogue != kBias && epilogue != kGeluBias) || !bias || ldc < m ||
        count < 1) {
      fail(kErrCublas);
      return true;
    }
    ++ltGemms;
    for (int64_t p = 0; p < count; ++p) {
      const T *ap = a + p * sa, *bp = b + p * sb;
      float *cp = c + p * sc;
      for (int64_t j = 0; j < n; ++j)
        for (int64_t i = 0; i < m; ++i) {
          double sum = 0.0;
          for (int64_t l = 0; l < k; ++l)
            sum += (double)floatOf(ta ? ap[l + i * lda] : ap[i + l * lda]) *
                   floatOf(tb ? bp[j + l * ldb] : bp[l + j * ldb]);
          float x = (float)sum + bias[i];
          cp[i + j * ldc] = epilogue == kGeluBias ? geluOf(x, true) : x;
        }
    }
    return true;
  }
  static float floatOf(float x) { return x; }
  static float floatOf(BF16 x) { return braid_rt_cuda::floatOf(x); }
};

std::mt19937 rng(12);
int failures = 0, checks = 0;
double worst = 0.0;
std::string worstName;
constexpr double kTolerance = 1e-5;

std::vector<float> randomFloats(int64_t n, float lo = -2.0f, float hi = 2.0f) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float &x : v)
    x = dist(rng);
  return v;
}

template <typename T> std::vector<T> randomIds(int64_t n, int64_t bound) {
  std::uniform_int_distribution<int64_t> dist(0, bound - 1);
  std::vector<T> v(n);
  for (T &x : v)
    x = (T)dist(rng);
  return v;
}

/// CUDA-side result `got` against the CPU's `want`.
template <typename T>
void compare(const std::string &name, const std::vector<T> &want,
             const std::vector<T> &got) {
  ++checks;
  double scale = 0.0, diff = 0.0;
  bool nanMismatch = want.size() != got.size();
  for (size_t i = 0; !nanMismatch && i < want.size(); ++i) {
    double w = (double)want[i], g = (double)got[i];
    if (std::isnan(w) || std::isnan(g)) {
      nanMismatch |= std::isnan(w) != std::isnan(g);
      continue;
    }
    if (std::isinf(w) || std::isinf(g)) {
      nanMismatch |= w != g;
      continue;
    }
    scale = std::fmax(scale, std::fabs(w));
    diff = std::fmax(diff, std::fabs(w - g));
  }
  double rel = scale > 0.0 ? diff / scale : diff;
  if (rel > worst) {
    worst = rel;
    worstName = name;
  }
  bool ok = !nanMismatch && rel <= kTolerance;
  printf("%-4s %-44s %zu elements, max relative difference %.3g\n",
         ok ? "ok" : "FAIL", name.c_str(), want.size(), rel);
  failures += !ok;
}

void compareStatus(const std::string &name, braid_rt_status_t want,
                   braid_rt_status_t got) {
  ++checks;
  bool ok = want == got;
  printf("%-4s %-44s status %s (CPU %s)\n", ok ? "ok" : "FAIL", name.c_str(),
         braid_rt_status_string(got), braid_rt_status_string(want));
  failures += !ok;
}

std::vector<float> zeros(int64_t n) { return std::vector<float>(n, 0.0f); }

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

void testElementwise() {
  using CpuBinary = void (*)(braid_rt_stream_t *, const float *, const float *,
                             int64_t, const int64_t *, int64_t,
                             const int64_t *, float *);
  struct Binary {
    const char *name;
    CpuBinary cpu;
    int kind;
  } binaries[] = {{"add", braid_rt_add_f32, kAdd},
                  {"sub", braid_rt_sub_f32, kSub},
                  {"mul", braid_rt_mul_f32, kMul},
                  {"div", braid_rt_div_f32, kDiv}};
  struct Shapes {
    std::vector<int64_t> a, b, out;
  } shapes[] = {{{3, 5}, {3, 5}, {3, 5}},
                {{2, 1, 4}, {3, 1}, {2, 3, 4}},
                {{4, 3}, {3}, {4, 3}},
                {{4, 3}, {}, {4, 3}}};
  for (const Binary &op : binaries)
    for (const Shapes &s : shapes) {
      int64_t na = ops::numElements(s.a.data(), s.a.size());
      int64_t nb = ops::numElements(s.b.data(), s.b.size());
      int64_t no = ops::numElements(s.out.data(), s.out.size());
      std::vector<float> a = randomFloats(na), b = randomFloats(nb, 0.5f, 2.0f);
      std::vector<float> want = zeros(no), got = zeros(no);
      op.cpu(nullptr, a.data(), b.data(), s.a.size(), s.a.data(), s.b.size(),
             s.b.data(), want.data());
      HostBackend host;
      ops::binary(host, op.kind, a.data(), b.data(), s.a.size(), s.a.data(),
                  s.b.size(), s.b.data(), got.data());
      compare(std::string(op.name) + " rank " + std::to_string(s.a.size()) +
                  " x rank " + std::to_string(s.b.size()),
              want, got);
    }

  using CpuUnary = void (*)(braid_rt_stream_t *, const float *, int64_t,
                            float *);
  struct Unary {
    const char *name;
    CpuUnary cpu;
    int kind;
    float lo, hi;
  } unaries[] = {{"neg", braid_rt_neg_f32, kNeg, -4, 4},
                 {"exp", braid_rt_exp_f32, kExp, -4, 4},
                 {"sqrt", braid_rt_sqrt_f32, kSqrt, 0.01f, 4},
                 {"rsqrt", braid_rt_rsqrt_f32, kRsqrt, 0.01f, 4},
                 {"relu", braid_rt_relu_f32, kRelu, -4, 4},
                 {"silu", braid_rt_silu_f32, kSilu, -8, 8}};
  const int64_t n = 1000;
  for (const Unary &op : unaries) {
    std::vector<float> x = randomFloats(n, op.lo, op.hi), want = zeros(n),
                       got = zeros(n);
    op.cpu(nullptr, x.data(), n, want.data());
    HostBackend host;
    ops::unary(host, op.kind, x.data(), n, got.data());
    compare(op.name, want, got);
  }

  std::vector<float> x = randomFloats(n, -6, 6), dy = randomFloats(n);
  for (auto approx : {BRAID_RT_GELU_EXACT, BRAID_RT_GELU_TANH}) {
    std::string suffix = approx == BRAID_RT_GELU_TANH ? " tanh" : " exact";
    std::vector<float> want = zeros(n), got = zeros(n);
    HostBackend host;
    braid_rt_gelu_f32(nullptr, x.data(), n, approx, want.data());
    ops::gelu(host, x.data(), n, approx, got.data());
    compare("gelu" + suffix, want, got);
    braid_rt_gelu_grad_f32(nullptr, x.data(), dy.data(), n, approx,
                           want.data());
    ops::geluGrad(host, x.data(), dy.data(), n, approx, got.data());
    compare("gelu_grad" + suffix, want, got);
  }
  std::vector<float> want = zeros(n), got = zeros(n);
  HostBackend host;
  braid_rt_relu_grad_f32(nullptr, x.data(), dy.data(), n, want.data());
  ops::reluGrad(host, x.data(), dy.data(), n, got.data());
  compare("relu_grad", want, got);
  braid_rt_silu_grad_f32(nullptr, x.data(), dy.data(), n, want.data());
  ops::siluGrad(host, x.data(), dy.data(), n, got.data());
  compare("silu_grad", want, got);
}

//===----------------------------------------------------------------------===//
// Row-wise
//===----------------------------------------------------------------------===//

template <typename T> void testIds(const char *suffix) {
  const int64_t vocab = 11, hidden = 6, numIds = 9, rows = 7;
  std::vector<float> table = randomFloats(vocab * hidden),
                     dy = randomFloats(numIds * hidden);
  std::vector<T> ids = randomIds<T>(numIds, vocab);
  ids[3] = ids[5]; // a repeated id accumulates in embedding_grad
  std::string s = suffix;
  std::vector<float> want = zeros(numIds * hidden), got = want;
  HostBackend host;
  braid_rt_status_t (*embedding)(braid_rt_stream_t *, const float *,
                                 const T *, int64_t, int64_t, int64_t,
                                 float *);
  braid_rt_status_t (*embeddingGrad)(braid_rt_stream_t *, const T *,
                                     const float *, int64_t, int64_t, int64_t,
                                     float *);
  braid_rt_status_t (*crossEntropy)(braid_rt_stream_t *, const float *,
                                    const T *, int64_t, int64_t, float *);
  braid_rt_status_t (*crossEntropyGrad)(braid_rt_stream_t *, const float *,
                                        const T *, const float *, int64_t,
                                        int64_t, float *);
  if constexpr (sizeof(T) == 4) {
    embedding = braid_rt_embedding_f32;
    embeddingGrad = braid_rt_embedding_grad_f32;
    crossEntropy = braid_rt_cross_entropy_f32;
    crossEntropyGrad = braid_rt_cross_entropy_grad_f32;
  } else {
    embedding = braid_rt_embedding_f32_i64;
    embeddingGrad = braid_rt_embedding_grad_f32_i64;
    crossEntropy = braid_rt_cross_entropy_f32_i64;
    crossEntropyGrad = braid_rt_cross_entropy_grad_f32_i64;
  }
  compareStatus("embedding" + s,
                embedding(nullptr, table.data(), ids.data(), vocab, hidden,
                          numIds, want.data()),
                ops::embedding(host, table.data(), ids.data(), vocab, hidden,
                               numIds, got.data()));
  compare("embedding" + s, want, got);
  std::vector<float> wantTable = zeros(vocab * hidden), gotTable = wantTable;
  compareStatus("embedding_grad" + s,
                embeddingGrad(nullptr, ids.data(), dy.data(), numIds, vocab,
                              hidden, wantTable.data()),
                ops::embeddingGrad(host, ids.data(), dy.data(), numIds, vocab,
                                   hidden, gotTable.data()));
  compare("embedding_grad" + s, wantTable, gotTable);

  std::vector<float> logits = randomFloats(rows * vocab, -5, 5);
  std::vector<T> labels = randomIds<T>(rows, vocab);
  std::vector<float> wantLoss(1), gotLoss(1), grad = {0.75f};
  compareStatus("cross_entropy" + s,
                crossEntropy(nullptr, logits.data(), labels.data(), rows,
                             vocab, wantLoss.data()),
                ops::crossEntropy(host, logits.data(), labels.data(), rows,
                                  vocab, gotLoss.data()));
  compare("cross_entropy" + s, wantLoss, gotLoss);
  std::vector<float> wantD = zeros(rows * vocab), gotD = wantD;
  compareStatus("cross_entropy_grad" + s,
                crossEntropyGrad(nullptr, logits.data(), labels.data(),
                                 grad.data(), rows, vocab, wantD.data()),
                ops::crossEntropyGrad(host, logits.data(), labels.data(),
                                      grad.data(), rows, vocab, gotD.data()));
  compare("cross_entropy_grad" + s, wantD, gotD);
  wantLoss[0] = 1.0f;
  gotLoss[0] = 2.0f;
  crossEntropy(nullptr, logits.data(), labels.data(), 0, vocab,
               wantLoss.data());
  HostBackend empty;
  ops::crossEntropy(empty, logits.data(), labels.data(), 0, vocab,
                    gotLoss.data());
  compare("cross_entropy of no rows" + s, wantLoss, gotLoss);

  // Out of range: the CPU returns INVALID_ARGUMENT; the CUDA kernels record
  // it in the error flag, which HostBackend::status() reports.
  ids[4] = (T)vocab;
  labels[2] = (T)-1;
  for (int which = 0; which < 4; ++which) {
    HostBackend bad;
    braid_rt_status_t want, got;
    const char *name;
    if (which == 0) {
      name = "embedding of an id = vocab";
      want = embedding(nullptr, table.data(), ids.data(), vocab, hidden,
                       numIds, wantD.data());
      got = ops::embedding(bad, table.data(), ids.data(), vocab, hidden,
                           numIds, gotD.data());
    } else if (which == 1) {
      name = "embedding_grad of an id = vocab";
      want = embeddingGrad(nullptr, ids.data(), dy.data(), numIds, vocab,
                           hidden, wantTable.data());
      got = ops::embeddingGrad(bad, ids.data(), dy.data(), numIds, vocab,
                               hidden, gotTable.data());
    } else if (which == 2) {
      name = "cross_entropy of a label -1";
      want = crossEntropy(nullptr, logits.data(), labels.data(), rows, vocab,
                          wantLoss.data());
      got = ops::crossEntropy(bad, logits.data(), labels.data(), rows, vocab,
                              gotLoss.data());
    } else {
      name = "cross_entropy_grad of a label -1";
      want = crossEntropyGrad(nullptr, logits.data(), labels.data(),
                              grad.data(), rows, vocab, wantD.data());
      got = ops::crossEntropyGrad(bad, logits.data(), labels.data(),
                                  grad.data(), rows, vocab, gotD.data());
    }
    compareStatus(name + s, want, got);
    if (bad.flag == kErrNone)
      compareStatus(name + s + " (error flag)", BRAID_RT_INVALID_ARGUMENT,
                    BRAID_RT_OK);
  }
}

void testRowwise() {
  for (int64_t inner : {1, 4}) {
    const int64_t outer = 3, size = 7, n = outer * size * inner;
    std::vector<float> x = randomFloats(n, -5, 5), want = zeros(n),
                       got = zeros(n);
    HostBackend host;
    braid_rt_softmax_f32(nullptr, x.data(), outer, size, inner, want.data());
    ops::softmax(host, x.data(), outer, size, inner, got.data());
    compare("softmax inner " + std::to_string(inner), want, got);
  }
  const int64_t rows = 6, cols = 33, n = rows * cols;
  std::vector<float> x = randomFloats(n, -3, 3), scale = randomFloats(cols),
                     bias = randomFloats(cols), dy = randomFloats(n);
  std::vector<float> want = zeros(n), got = zeros(n);
  HostBackend host;
  braid_rt_layer_norm_f32(nullptr, x.data(), scale.data(), bias.data(), rows,
                          cols, 1e-5, want.data());
  ops::layerNorm(host, x.data(), scale.data(), bias.data(), rows, cols, 1e-5,
                 got.data());
  compare("layer_norm", want, got);
  braid_rt_rms_norm_f32(nullptr, x.data(), scale.data(), rows, cols, 1e-6,
                        want.data());
  ops::rmsNorm(host, x.data(), scale.data(), rows, cols, 1e-6, got.data());
  compare("rms_norm", want, got);
  braid_rt_layer_norm_grad_f32(nullptr, x.data(), scale.data(), dy.data(),
                               rows, cols, 1e-5, want.data());
  ops::layerNormGrad(host, x.data(), scale.data(), dy.data(), rows, cols, 1e-5,
                     got.data());
  compare("layer_norm_grad", want, got);
  braid_rt_rms_norm_grad_f32(nullptr, x.data(), scale.data(), dy.data(), rows,
                             cols, 1e-6, want.data());
  ops::rmsNormGrad(host, x.data(), scale.data(), dy.data(), rows, cols, 1e-6,
                   got.data());
  compare("rms_norm_grad", want, got);

  const int64_t batch = 2, seq = 5, heads = 3, dim = 8;
  const int64_t m = batch * seq * heads * dim;
  std::vector<float> r = randomFloats(m), wantR = zeros(m), gotR = zeros(m);
  for (int inverse : {0, 1}) {
    braid_rt_rotary_f32(nullptr, r.data(), batch, seq, heads, dim, 10000.0,
                        inverse, wantR.data());
    ops::rotary(host, r.data(), batch, seq, heads, dim, 10000.0, inverse,
                gotR.data());
    compare(inverse ? "rotary inverse" : "rotary", wantR, gotR);
  }
  testIds<int32_t>("");
  testIds<int64_t>(" i64");
}

//===----------------------------------------------------------------------===//
// Matmul and attention
//===----------------------------------------------------------------------===//

/// A matmul's operands (row-major, `a` stored transposed with `ta`, `b`
/// with `tb`) and what follows from their shapes: the result is batch
/// [m, n] matrices, the operands' batch dimensions broadcast as in NumPy.
struct MatmulShape {
  std::vector<int64_t> a, b;
  int ta = 0, tb = 0;
  int64_t m = 0, k = 0, n = 0, batch = 1;
  /// The operands' and the result's element counts.
  int64_t aElements() const { return ops::numElements(a.data(), a.size()); }
  int64_t bElements() const { return ops::numElements(b.data(), b.size()); }
  int64_t resultElements() const { return batch * m * n; }
};

/// The shape of a matmul of operands shaped `a` and `b`.
MatmulShape matmulShape(std::vector<int64_t> a, std::vector<int64_t> b, int ta,
                        int tb) {
  MatmulShape s;
  int64_t ra = a.size(), rb = b.size(), rank = std::max(ra, rb) - 2;
  s.m = ta ? a[ra - 1] : a[ra - 2];
  s.k = ta ? a[ra - 2] : a[ra - 1];
  s.n = tb ? b[rb - 2] : b[rb - 1];
  for (int64_t d = 0; d < rank; ++d) {
    int64_t ad = ops::dimAt(a.data(), ra - 2, rank, d);
    s.batch *= ad == 1 ? ops::dimAt(b.data(), rb - 2, rank, d) : ad;
  }
  s.a = std::move(a);
  s.b = std::move(b);
  s.ta = ta;
  s.tb = tb;
  return s;
}

/// The shape of a matmul of `aBatch` [m, k] matrices by `bBatch` [k, n]
/// ones, stored transposed with `ta`, `tb`.
MatmulShape matmulShape(std::vector<int64_t> aBatch,
                        std::vector<int64_t> bBatch, int64_t m, int64_t k,
                        int64_t n, int ta, int tb) {
  aBatch.push_back(ta ? k : m);
  aBatch.push_back(ta ? m : k);
  bBatch.push_back(tb ? n : k);
  bBatch.push_back(tb ? k : n);
  return matmulShape(std::move(aBatch), std::move(bBatch), ta, tb);
}

void testMatmul() {
  struct Case {
    const char *name;
    std::vector<int64_t> a, b;
    int ta, tb;
  } cases[] = {
      {"matmul [2,3,4] x [4,5] (folded batch)", {2, 3, 4}, {4, 5}, 0, 0},
      {"matmul [2,4,3]^T x [4,5] (stride-0 b)", {2, 4, 3}, {4, 5}, 1, 0},
      {"matmul [2,3,4] x [2,4,5] (strided)", {2, 3, 4}, {2, 4, 5}, 0, 0},
      {"matmul [3,4] x [2,5,4]^T (stride-0 a)", {3, 4}, {2, 5, 4}, 0, 1},
      {"matmul [2,1,3,4] x [1,3,4,5] (mixed)", {2, 1, 3, 4}, {1, 3, 4, 5}, 0,
       0},
      {"matmul [4,3]^T x [5,4]^T", {4, 3}, {5, 4}, 1, 1},
      {"matmul [2,3,0] x [0,5] (k = 0)", {2, 3, 0}, {0, 5}, 0, 0},
  };
  for (const Case &c : cases) {
    MatmulShape s = matmulShape(c.a, c.b, c.ta, c.tb);
    std::vector<float> a = randomFloats(s.aElements()),
                       b = randomFloats(s.bElements());
    std::vector<float> want(s.resultElements(), 7.0f),
        got(s.resultElements(), -7.0f);
    braid_rt_matmul_f32(nullptr, a.data(), b.data(), s.a.size(), s.a.data(),
                        s.b.size(), s.b.data(), s.ta, s.tb, want.data());
    HostBackend host;
    ops::matmul(host, a.data(), b.data(), s.a.size(), s.a.data(), s.b.size(),
                s.b.data(), s.ta, s.tb, got.data());
    compare(c.name, want, got);
  }
}

/// The exact (double) product of row-major a and b with NumPy batch
/// broadcasting, and per element sum_l |a b| (for the error bound),
/// computed independently of ops.h's batching.
void exactMatmul(const std::vector<float> &a, const std::vector<float> &b,
                 const MatmulShape &s, std::vector<double> &exact,
                 std::vector<double> &absSum) {
  const std::vector<int64_t> &as = s.a, &bs = s.b;
  int ta = s.ta, tb = s.tb;
  int64_t ra = as.size(), rb = bs.size(), rank = std::max(ra, rb) - 2;
  int64_t m = s.m, k = s.k, n = s.n;
  int64_t lda = as[ra - 1], ldb = bs[rb - 1];
  std::vector<int64_t> ad(rank, 1), bd(rank, 1), od(rank);
  for (int64_t d = 0; d < ra - 2; ++d)
    ad[rank - (ra - 2) + d] = as[d];
  for (int64_t d = 0; d < rb - 2; ++d)
    bd[rank - (rb - 2) + d] = bs[d];
  int64_t batch = 1;
  for (int64_t d = 0; d < rank; ++d)
    batch *= od[d] = ad[d] == 1 ? bd[d] : ad[d];
  exact.assign(batch * m * n, 0.0);
  absSum.assign(batch * m * n, 0.0);
  for (int64_t p = 0; p < batch; ++p) {
    // Batch index p's coordinates, then each operand's batch offset.
    int64_t oa = 0, ob = 0, rest = p;
    std::vector<int64_t> idx(rank);
    for (int64_t d = rank - 1; d >= 0; --d) {
      idx[d] = rest % od[d];
      rest /= od[d];
    }
    for (int64_t d = 0; d < rank; ++d) {
      oa = oa * ad[d] + (ad[d] == 1 ? 0 : idx[d]);
      ob = ob * bd[d] + (bd[d] == 1 ? 0 : idx[d]);
    }
    const float *ap = a.data() + oa * m * k, *bp = b.data() + ob * k * n;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double sum = 0.0, abs = 0.0;
        for (int64_t l = 0; l < k; ++l) {
          double x = ta ? ap[l * lda + i] : ap[i * lda + l];
          double y = tb ? bp[j * ldb + l] : bp[l * ldb + j];
          sum += x * y;
          abs += std::fabs(x * y);
        }
        exact[(p * m + i) * n + j] = sum;
        absSum[(p * m + i) * n + j] = abs;
      }
  }
}

/// Every element of `got` within k 2^-24 sum_l |a b| of the exact product:
/// an f32 sum of k exact products (bf16 times bf16 is exact in f32), in
/// any order, is that close (Higham's gamma_k, to first order).
void checkBound(const std::string &name, const std::vector<float> &got,
                const std::vector<double> &exact,
                const std::vector<double> &absSum, int64_t k) {
  ++checks;
  double worstRatio = 0.0;
  bool ok = got.size() == exact.size();
  for (size_t i = 0; ok && i < got.size(); ++i) {
    double bound = (double)k * std::ldexp(1.0, -24) * absSum[i] + 1e-30;
    double r = std::fabs((double)got[i] - exact[i]) / bound;
    worstRatio = std::fmax(worstRatio, r);
    ok = !std::isnan(r);
  }
  ok = ok && worstRatio <= 1.0;
  printf("%-4s %-44s worst error %.3g of k 2^-24 sum|ab|\n", ok ? "ok" : "FAIL",
         name.c_str(), worstRatio);
  failures += !ok;
}

void checkThat(const std::string &name, bool ok, const char *what) {
  ++checks;
  printf("%-4s %-44s %s\n", ok ? "ok" : "FAIL", name.c_str(), what);
  failures += !ok;
}

std::vector<float> randomBF16(int64_t n) {
  std::vector<float> v = randomFloats(n);
  for (float &x : v)
    x = roundBF16Of(x);
  return v;
}

/// bf16Of, the operands' copy, against the CPU's rounding kernel: ties
/// both ways, the largest finite values (to infinity), zeros, subnormals,
/// infinities; NaNs stay NaNs (one whose payload is in the low 16 bits
/// only, too, which a plain truncation would make an infinity).
void testBf16Conversion() {
  const uint32_t bits[] = {0x3f800000u, 0x3f808000u, 0x3f818000u, 0x3f80ffffu,
                           0x3f807fffu, 0xbf808000u, 0x7f7fffffu, 0xff7fffffu,
                           0x7f7f7fffu, 0x00000000u, 0x80000000u, 0x00000001u,
                           0x00008000u, 0x00018000u, 0x007fffffu, 0x7f800000u,
                           0xff800000u, 0x7fc00000u, 0x7f800001u, 0xff800001u,
                           0x7fbfffffu, 0x3eaaaaabu, 0xc2c80000u};
  std::vector<float> x;
  for (uint32_t u : bits) {
    float f;
    memcpy(&f, &u, sizeof f);
    x.push_back(f);
  }
  std::vector<float> cpu(x.size());
  braid_rt_round_bf16_f32(nullptr, x.data(), x.size(), cpu.data());
  bool ok = true;
  for (size_t i = 0; i < x.size(); ++i) {
    BF16 h = bf16Of(x[i]);
    float got = floatOf(h);
    uint32_t gu, wu;
    memcpy(&gu, &got, sizeof gu);
    memcpy(&wu, &cpu[i], sizeof wu);
    bool same =
        std::isnan(x[i]) ? std::isnan(got) && (h.bits & 0x40u) : gu == wu;
    if (!same)
      printf("     bf16Of(0x%08x) = 0x%04x, CPU rounding 0x%08x\n", bits[i],
             h.bits, wu);
    ok &= same;
  }
  checkThat("bf16Of = braid_rt_round_bf16_f32 (23 values)", ok,
            "bit for bit; NaNs quiet NaNs");
}

/// ops::matmulBf16In (braid_rt_matmul_bf16in_f32 on CUDA): every batch
/// path of ops::matmul (folded into M, strided with either operand's batch
/// stride 0, both batched, mixed broadcasting, no batch) under the four
/// transposes, on operands holding bf16 values (fixed seed), against the
/// CPU kernel (oneDNN's bf16 GEMM: 1e-5 of the largest magnitude, as the
/// f32 kernels) and, element by element, both against the exact product
/// within the f32-sum bound (checkBound). The host backend must have run
/// only bf16 GEMMs: a path that multiplied the f32 operands would pass the
/// bounds on bf16 values, so the counts pin the conversion, and operands
/// that are not bf16 (last) must give the product of their bf16 roundings.
void testMatmulBf16In() {
  struct Case {
    const char *name;
    std::vector<int64_t> aBatch, bBatch;
    int64_t m, k, n;
  } cases[] = {
      {"no batch", {}, {}, 5, 7, 3},
      {"folded/strided b0", {2, 3}, {}, 4, 9, 5},
      {"strided", {3}, {3}, 6, 5, 4},
      {"strided a0", {}, {2, 2}, 3, 8, 6},
      {"mixed", {2, 1}, {1, 3}, 3, 4, 5},
      {"mixed rank 3", {2, 1, 2}, {3, 1}, 2, 6, 3},
      {"k 40", {2}, {}, 17, 40, 33},
  };
  for (const Case &c : cases)
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb) {
        MatmulShape s = matmulShape(c.aBatch, c.bBatch, c.m, c.k, c.n, ta, tb);
        std::string name = std::string("matmul_bf16in ") + c.name +
                           (ta ? " aT" : "") + (tb ? " bT" : "");
        std::vector<float> a = randomBF16(s.aElements()),
                           b = randomBF16(s.bElements());
        std::vector<double> exact, absSum;
        exactMatmul(a, b, s, exact, absSum);
        std::vector<float> want(exact.size(), 7.0f), got(exact.size(), -7.0f);
        braid_rt_status_t ws = braid_rt_matmul_bf16in_f32(
            nullptr, a.data(), b.data(), s.a.size(), s.a.data(), s.b.size(),
            s.b.data(), ta, tb, want.data());
        HostBackend host;
        braid_rt_status_t gs =
            ops::matmulBf16In(host, a.data(), b.data(), s.a.size(), s.a.data(),
                              s.b.size(), s.b.data(), ta, tb, got.data());
        compareStatus(name, ws, gs);
        compare(name, want, got);
        checkBound(name + " (CUDA path)", got, exact, absSum, c.k);
        checkBound(name + " (CPU)", want, exact, absSum, c.k);
        checkThat(name, host.bf16Gemms > 0 && host.f32Gemms == 0,
                  "bf16 GEMMs only");
      }

  // Empty operands: no GEMM; k = 0 writes zeros, an empty batch nothing.
  {
    std::vector<int64_t> as = {2, 3, 0}, bs = {0, 5};
    std::vector<float> a, b, got(30, -7.0f);
    HostBackend host;
    braid_rt_status_t s = ops::matmulBf16In(
        host, a.data(), b.data(), 3, as.data(), 2, bs.data(), 0, 0, got.data());
    compare("matmul_bf16in k = 0", zeros(30), got);
    checkThat("matmul_bf16in k = 0",
              s == BRAID_RT_OK && host.bf16Gemms + host.f32Gemms == 0,
              "OK, no GEMM");
  }
  {
    std::vector<int64_t> as = {0, 3, 4}, bs = {4, 5};
    std::vector<float> a, b = randomBF16(20), got(1, -7.0f);
    HostBackend host;
    braid_rt_status_t s = ops::matmulBf16In(
        host, a.data(), b.data(), 3, as.data(), 2, bs.data(), 0, 0, got.data());
    checkThat("matmul_bf16in empty batch",
              s == BRAID_RT_OK && got[0] == -7.0f &&
                  host.bf16Gemms + host.f32Gemms == 0,
              "OK, nothing written, no GEMM");
  }

  // Operands that are not bf16 values: the product of their roundings.
  {
    std::vector<int64_t> as = {2, 6, 11}, bs = {11, 4};
    std::vector<float> a = randomFloats(132), b = randomFloats(44);
    std::vector<float> ar = a, br = b;
    for (float &x : ar)
      x = roundBF16Of(x);
    for (float &x : br)
      x = roundBF16Of(x);
    std::vector<double> exact, absSum;
    exactMatmul(ar, br, matmulShape(as, bs, 0, 0), exact, absSum);
    std::vector<float> got(48);
    HostBackend host;
    ops::matmulBf16In(host, a.data(), b.data(), 3, as.data(), 2, bs.data(), 0,
                      0, got.data());
    checkBound("matmul_bf16in of non-bf16 operands", got, exact, absSum, 11);
  }

  // Scratch that cannot be allocated: OUT_OF_MEMORY, no GEMM.
  {
    std::vector<int64_t> as = {3, 4}, bs = {4, 5};
    std::vector<float> a = randomBF16(12), b = randomBF16(20), got(15);
    HostBackend host;
    host.failAlloc = true;
    braid_rt_status_t s = ops::matmulBf16In(
        host, a.data(), b.data(), 2, as.data(), 2, bs.data(), 0, 0, got.data());
    checkThat("matmul_bf16in, scratch refused",
              s == BRAID_RT_OUT_OF_MEMORY &&
                  host.bf16Gemms + host.f32Gemms == 0,
              "OUT_OF_MEMORY, no GEMM");
  }
}

/// braid_rt_matmul_bias_f32 and _bf16in_f32 (bias, and bias + GELU) through
/// the reference cublasLtMatmul against the CPU kernels, 1e-5 of the largest
/// magnitude (for bf16: the same bf16 operands on both sides), on every GEMM
/// path of matmulOf (folded, strided, mixed broadcasting, transposes); the
/// host backend must have run cuBLASLt GEMMs only. Again with the reference
/// having no cuBLASLt algorithm for any call: the plain GEMMs and then the
/// bias add (and GELU), the same result within the same tolerance. The CPU
/// kernel itself is checked against braid_rt_matmul_f32, braid_rt_add_f32
/// and braid_rt_gelu_f32 bit for bit (runtime/test/matmul_bias_test.c).
void testMatmulBias() {
  struct Case {
    const char *name;
    std::vector<int64_t> aBatch, bBatch;
    int64_t m, k, n;
  } cases[] = {
      {"no batch", {}, {}, 5, 7, 3},      {"folded", {2, 3}, {}, 4, 9, 5},
      {"strided", {3}, {3}, 6, 5, 4},     {"strided a0", {}, {2, 2}, 3, 8, 6},
      {"mixed", {2, 1}, {1, 3}, 3, 4, 5},
  };
  for (int noLt = 0; noLt < 2; ++noLt)
    for (int bf16 = 0; bf16 < 2; ++bf16)
      for (int gelu = 0; gelu < 2; ++gelu)
        for (const Case &c : cases)
          for (int ta = 0; ta < 2; ++ta)
            for (int tb = 0; tb < 2; ++tb) {
              MatmulShape s =
                  matmulShape(c.aBatch, c.bBatch, c.m, c.k, c.n, ta, tb);
              const std::vector<int64_t> &as = s.a, &bs = s.b;
              std::string name =
                  std::string("matmul_bias") + (bf16 ? "_bf16in " : " ") +
                  (gelu ? "gelu " : "") + c.name + (ta ? " aT" : "") +
                  (tb ? " bT" : "") + (noLt ? " (no cuBLASLt algorithm)" : "");
              int64_t na = s.aElements(), nb = s.bElements();
              std::vector<float> a = bf16 ? randomBF16(na) : randomFloats(na);
              std::vector<float> b = bf16 ? randomBF16(nb) : randomFloats(nb);
              std::vector<float> bias = randomFloats(c.n);
              std::vector<float> want(s.resultElements(), 7.0f),
                  got(s.resultElements(), -7.0f);
              HostBackend host;
              host.ltNoAlgorithm = noLt != 0;
              braid_rt_status_t ws = BRAID_RT_OK, gs = BRAID_RT_OK;
              if (bf16) {
                ws = braid_rt_matmul_bias_bf16in_f32(
                    nullptr, a.data(), b.data(), bias.data(), as.size(),
                    as.data(), bs.size(), bs.data(), ta, tb, gelu, want.data());
                gs = ops::matmulBf16In(host, a.data(), b.data(), as.size(),
                                       as.data(), bs.size(), bs.data(), ta, tb,
                                       got.data(), bias.data(), gelu);
              } else {
                braid_rt_matmul_bias_f32(
                    nullptr, a.data(), b.data(), bias.data(), as.size(),
                    as.data(), bs.size(), bs.data(), ta, tb, gelu, want.data());
                ops::matmulBias(host, a.data(), b.data(), bias.data(),
                                as.size(), as.data(), bs.size(), bs.data(), ta,
                                tb, gelu, got.data());
                gs = host.status();
              }
              compareStatus(name, ws, gs);
              compare(name, want, got);
              if (noLt)
                checkThat(name,
                          host.ltGemms == 0 &&
                              (bf16 ? host.bf16Gemms : host.f32Gemms) > 0,
                          "plain GEMMs and the epilogue");
              else
                checkThat(name,
                          host.ltGemms > 0 &&
                              host.f32Gemms + host.bf16Gemms == 0,
                          "cuBLASLt GEMMs only");
            }

  // k = 0: no GEMM, the epilogue of zeros.
  for (int gelu = 0; gelu < 2; ++gelu) {
    std::vector<int64_t> as = {2, 3, 0}, bs = {0, 5};
    std::vector<float> a, b, bias = randomFloats(5), want(30), got(30, -7.0f);
    braid_rt_matmul_bias_f32(nullptr, a.data(), b.data(), bias.data(), 3,
                             as.data(), 2, bs.data(), 0, 0, gelu, want.data());
    HostBackend host;
    ops::matmulBias(host, a.data(), b.data(), bias.data(), 3, as.data(), 2,
                    bs.data(), 0, 0, gelu, got.data());
    std::string name = std::string("matmul_bias k = 0") + (gelu ? " gelu" : "");
    compare(name, want, got);
    checkThat(name, host.ltGemms + host.f32Gemms + host.bf16Gemms == 0,
              "no GEMM");
  }

  // The reference refuses what it does not implement.
  {
    HostBackend host;
    float a = 1.0f, b = 1.0f, c = -7.0f;
    host.gemmLt(false, false, 1, 1, 1, &a, 1, 0, &b, 1, 0, &c, 1, 0, 1, nullptr,
                kBias);
    checkThat("reference cublasLtMatmul without a bias",
              host.status() == BRAID_RT_INTERNAL && c == -7.0f &&
                  host.ltGemms == 0,
              "refused");
  }
}

void testAttention() {
  struct Case {
    int64_t batch, sq, skv, hq, hkv, d;
    int causal;
  } cases[] = {{2, 5, 5, 4, 2, 8, 1},
               {1, 3, 6, 2, 2, 4, 0},
               {2, 4, 4, 6, 1, 3, 0},
               {1, 3, 0, 2, 1, 4, 0},
               // Several key blocks (32 on CUDA, 64 on the CPU), sizes not
               // a multiple of either: the online softmax's rescaling.
               {1, 70, 70, 4, 2, 16, 1},
               {1, 45, 100, 2, 1, 8, 0}};
  for (const Case &c : cases) {
    std::string name = "attention b" + std::to_string(c.batch) + " s" +
                       std::to_string(c.sq) + " t" + std::to_string(c.skv) +
                       " hq" + std::to_string(c.hq) + " hkv" +
                       std::to_string(c.hkv) + (c.causal ? " causal" : "");
    int64_t nq = c.batch * c.sq * c.hq * c.d, nkv = c.batch * c.skv * c.hkv * c.d;
    double scale = 1.0 / std::sqrt((double)c.d);
    std::vector<float> q = randomFloats(nq), k = randomFloats(nkv),
                       v = randomFloats(nkv), dy = randomFloats(nq);
    std::vector<float> want = zeros(nq), got = zeros(nq);
    HostBackend host;
    compareStatus(name, braid_rt_attention_f32(nullptr, q.data(), k.data(),
                                               v.data(), c.batch, c.sq, c.skv,
                                               c.hq, c.hkv, c.d, c.causal,
                                               scale, want.data()),
                  ops::attention(host, q.data(), k.data(), v.data(), c.batch,
                                 c.sq, c.skv, c.hq, c.hkv, c.d, c.causal, scale,
                                 got.data()));
    compare(name, want, got);
    std::vector<float> wq = zeros(nq), wk = zeros(nkv), wv = zeros(nkv);
    std::vector<float> gq = zeros(nq), gk = zeros(nkv), gv = zeros(nkv);
    compareStatus(name + " grad_all",
                  braid_rt_attention_grad_all_f32(
                      nullptr, q.data(), k.data(), v.data(), dy.data(),
                      c.batch, c.sq, c.skv, c.hq, c.hkv, c.d, c.causal, scale,
                      wq.data(), wk.data(), wv.data()),
                  ops::attentionGradAll(host, q.data(), k.data(), v.data(),
                                        dy.data(), c.batch, c.sq, c.skv, c.hq,
                                        c.hkv, c.d, c.causal, scale, gq.data(),
                                        gk.data(), gv.data()));
    compare(name + " dq", wq, gq);
    compare(name + " dk", wk, gk);
    compare(name + " dv", wv, gv);
    for (int64_t operand = 0; operand < 3; ++operand) {
      int64_t count = operand == 0 ? nq : nkv;
      std::vector<float> w = zeros(count), g = zeros(count);
      braid_rt_attention_grad_f32(nullptr, q.data(), k.data(), v.data(),
                                  dy.data(), c.batch, c.sq, c.skv, c.hq, c.hkv,
                                  c.d, c.causal, scale, operand, w.data());
      ops::attentionGrad(host, q.data(), k.data(), v.data(), dy.data(),
                         c.batch, c.sq, c.skv, c.hq, c.hkv, c.d, c.causal,
                         scale, operand, g.data());
      compare(name + " grad operand " + std::to_string(operand), w, g);
    }
  }
  std::vector<float> x = randomFloats(16);
  HostBackend host;
  compareStatus("attention_grad operand 3",
                braid_rt_attention_grad_f32(nullptr, x.data(), x.data(),
                                            x.data(), x.data(), 1, 2, 2, 2, 2,
                                            2, 0, 1.0, 3, x.data()),
                ops::attentionGrad(host, x.data(), x.data(), x.data(), x.data(),
                                   1, 2, 2, 2, 2, 2, 0, 1.0, 3, x.data()));
}

//===----------------------------------------------------------------------===//
// Shape ops and reductions
//===----------------------------------------------------------------------===//

template <typename T> std::vector<T> convert(const std::vector<float> &x) {
  std::vector<T> out(x.size());
  for (size_t i = 0; i < x.size(); ++i)
    out[i] = (T)std::round(x[i] * 100.0f);
  return out;
}

template <typename T> void testMoves(const char *suffix) {
  std::string s = suffix;
  bool isFloat = sizeof(T) == 4 && (T)0.5 != 0;
  auto pick = [&](auto f32, auto i32) {
    if constexpr (std::is_same_v<T, float>)
      return f32;
    else
      return i32;
  };
  (void)isFloat;
  std::vector<int64_t> shape = {2, 3, 4}, perm = {2, 0, 1};
  std::vector<T> x = convert<T>(randomFloats(24));
  if constexpr (std::is_same_v<T, float>)
    x = randomFloats(24);
  std::vector<T> want(24), got(24);
  HostBackend host;
  pick(braid_rt_copy_f32, braid_rt_copy_i32)(nullptr, x.data(), 24,
                                             want.data());
  ops::copy(host, x.data(), 24, got.data());
  compare("copy" + s, want, got);
  pick(braid_rt_fill_f32, braid_rt_fill_i32)(nullptr, (T)3, 24, want.data());
  ops::fill(host, (T)3, 24, got.data());
  compare("fill" + s, want, got);
  pick(braid_rt_transpose_f32, braid_rt_transpose_i32)(
      nullptr, x.data(), 3, shape.data(), perm.data(), want.data());
  ops::transpose(host, x.data(), 3, shape.data(), perm.data(), got.data());
  compare("transpose (2,0,1)" + s, want, got);

  std::vector<int64_t> in = {3, 1}, out = {2, 3, 4};
  pick(braid_rt_broadcast_to_f32, braid_rt_broadcast_to_i32)(
      nullptr, x.data(), 2, in.data(), 3, out.data(), want.data());
  ops::broadcastTo(host, x.data(), 2, in.data(), 3, out.data(), got.data());
  compare("broadcast_to [3,1] -> [2,3,4]" + s, want, got);

  std::vector<int64_t> inShape = {4, 6}, start = {1, 0}, stride = {2, 3},
                       outShape = {2, 2};
  std::vector<T> big = convert<T>(randomFloats(24));
  std::vector<T> ws(4), gs(4);
  pick(braid_rt_slice_f32, braid_rt_slice_i32)(
      nullptr, big.data(), 2, inShape.data(), start.data(), stride.data(),
      outShape.data(), ws.data());
  ops::slice(host, big.data(), 2, inShape.data(), start.data(), stride.data(),
             outShape.data(), gs.data());
  compare("slice strided" + s, ws, gs);
  std::vector<int64_t> start2 = {1, 2}, out2 = {3, 3};
  std::vector<T> ws2(9), gs2(9);
  pick(braid_rt_slice_f32, braid_rt_slice_i32)(nullptr, big.data(), 2,
                                               inShape.data(), start2.data(),
                                               nullptr, out2.data(), ws2.data());
  ops::slice(host, big.data(), 2, inShape.data(), start2.data(), nullptr,
             out2.data(), gs2.data());
  compare("slice" + s, ws2, gs2);

  // Concat along axis 1 of [2, 1, 3], [2, 2, 3], [2, 0, 3], [2, 3, 3].
  std::vector<int64_t> sizes = {1, 2, 0, 3}, catShape = {2, 6, 3};
  std::vector<std::vector<T>> parts;
  for (int64_t sz : sizes)
    parts.push_back(convert<T>(randomFloats(2 * sz * 3)));
  std::vector<const T *> ptrs;
  for (auto &p : parts)
    ptrs.push_back(p.data());
  std::vector<T> wc(36), gc(36);
  pick(braid_rt_concat_f32, braid_rt_concat_i32)(
      nullptr, ptrs.data(), 4, 3, catShape.data(), 1, sizes.data(), wc.data());
  ops::concat(host, ptrs.data(), 4, 3, catShape.data(), 1, sizes.data(),
              gc.data());
  compare("concat axis 1" + s, wc, gc);
}

void testShape() {
  testMoves<float>("");
  testMoves<int32_t>(" i32");

  std::vector<int64_t> shape = {3, 4, 5};
  std::vector<float> x = randomFloats(60);
  // Integers in [0, 3]: reduce_max_grad meets ties.
  std::vector<float> tied(60);
  for (int64_t i = 0; i < 60; ++i)
    tied[i] = (float)((i * 7 + i / 5) % 4);
  std::vector<std::vector<int64_t>> axesCases = {{2}, {1}, {0, 2}, {0, 1, 2}};
  for (const auto &axes : axesCases) {
    int64_t outCount = 1;
    for (int64_t d = 0; d < 3; ++d)
      if (std::find(axes.begin(), axes.end(), d) == axes.end())
        outCount *= shape[d];
    std::string axesName = "{";
    for (int64_t a : axes)
      axesName += std::to_string(a) + (a == axes.back() ? "}" : ",");
    for (auto kind :
         {BRAID_RT_REDUCE_SUM, BRAID_RT_REDUCE_MEAN, BRAID_RT_REDUCE_MAX}) {
      std::vector<float> want = zeros(outCount), got = zeros(outCount);
      HostBackend host;
      braid_rt_reduce_f32(nullptr, x.data(), 3, shape.data(), axes.size(),
                          axes.data(), kind, want.data());
      ops::reduce(host, x.data(), 3, shape.data(), axes.size(), axes.data(),
                  kind, got.data());
      const char *kinds[] = {"sum", "mean", "max"};
      compare(std::string("reduce ") + kinds[kind] + " over " + axesName, want,
              got);
    }
    std::vector<float> dy = randomFloats(outCount), want = zeros(60),
                       got = zeros(60);
    HostBackend host;
    compareStatus("reduce_max_grad over " + axesName,
                  braid_rt_reduce_max_grad_f32(nullptr, tied.data(), dy.data(),
                                               3, shape.data(), axes.size(),
                                               axes.data(), want.data()),
                  ops::reduceMaxGrad(host, tied.data(), dy.data(), 3,
                                     shape.data(), axes.size(), axes.data(),
                                     got.data()));
    compare("reduce_max_grad over " + axesName + " (ties)", want, got);
  }
  std::vector<int64_t> emptyShape = {3, 0}, lastAxis = {1};
  for (auto kind : {BRAID_RT_REDUCE_SUM, BRAID_RT_REDUCE_MEAN,
                    BRAID_RT_REDUCE_MAX}) {
    std::vector<float> want = zeros(3), got = zeros(3);
    HostBackend host;
    braid_rt_reduce_f32(nullptr, x.data(), 2, emptyShape.data(), 1,
                        lastAxis.data(), kind, want.data());
    ops::reduce(host, x.data(), 2, emptyShape.data(), 1, lastAxis.data(), kind,
                got.data());
    compare("reduce of empty groups kind " + std::to_string(kind), want, got);
  }

  std::vector<int64_t> dxShape = {4, 6}, start = {1, 1}, stride = {2, 2},
                       dyShape = {2, 3};
  std::vector<float> dy = randomFloats(6), want(24, 5.0f), got(24, -5.0f);
  HostBackend host;
  braid_rt_slice_grad_f32(nullptr, dy.data(), 2, dyShape.data(), start.data(),
                          stride.data(), dxShape.data(), want.data());
  ops::sliceGrad(host, dy.data(), 2, dyShape.data(), start.data(),
                 stride.data(), dxShape.data(), got.data());
  compare("slice_grad strided", want, got);
}

//===----------------------------------------------------------------------===//
// Vocabulary-parallel statistics
//===----------------------------------------------------------------------===//

/// A vocabulary of numParts * cols ids, one part per (simulated) rank: each
/// part's statistics, their combination and the part's gradients.
template <typename T> void testVocabParallel(const char *suffix) {
  const int64_t rows = 7, cols = 5, numParts = 3, hidden = 4, numIds = 10;
  const int64_t total = cols * numParts;
  std::string s = suffix;
  std::vector<T> labels = randomIds<T>(rows, total),
                 ids = randomIds<T>(numIds, total);
  ids[2] = ids[7]; // a repeated id accumulates in embedding_grad
  std::vector<double> maxParts(numParts * rows), sumParts(numParts * rows),
      pickedParts(numParts * rows);
  std::vector<std::vector<float>> logits;
  for (int64_t k = 0; k < numParts; ++k)
    logits.push_back(randomFloats(rows * cols, -4.0f, 4.0f));
  for (int64_t k = 0; k < numParts; ++k) {
    std::string part = " part " + std::to_string(k) + s;
    const float *l = logits[k].data();
    int64_t first = k * cols;
    HostBackend host;
    std::vector<double> want(rows), got(rows);
    braid_rt_vocab_parallel_max_f32(nullptr, l, rows, cols, want.data());
    ops::vocabParallelMax(host, l, rows, cols, got.data());
    compare("vocab_parallel_max" + part, want, got);
    std::copy(want.begin(), want.end(), maxParts.begin() + k * rows);
    // The same maxima into both sum_exp kernels: only sum_exp is compared.
    std::vector<double> mx = want;
    braid_rt_vocab_parallel_sum_exp_f32(nullptr, l, mx.data(), rows, cols,
                                        want.data());
    ops::vocabParallelSumExp(host, l, mx.data(), rows, cols, got.data());
    compare("vocab_parallel_sum_exp" + part, want, got);
    std::copy(want.begin(), want.end(), sumParts.begin() + k * rows);
    if constexpr (std::is_same<T, int32_t>::value)
      braid_rt_vocab_parallel_picked_f32(nullptr, l, labels.data(), rows, cols,
                                         first, want.data());
    else
      braid_rt_vocab_parallel_picked_f32_i64(nullptr, l, labels.data(), rows,
                                             cols, first, want.data());
    ops::vocabParallelPicked(host, l, labels.data(), rows, cols, first,
                             got.data());
    compare("vocab_parallel_picked" + part, want, got);
    std::copy(want.begin(), want.end(), pickedParts.begin() + k * rows);

    std::vector<float> table = randomFloats(cols * hidden),
                       wantY = zeros(numIds * hidden), gotY = wantY;
    if constexpr (std::is_same<T, int32_t>::value)
      braid_rt_vocab_parallel_embedding_f32(nullptr, table.data(), ids.data(),
                                            cols, hidden, numIds, first,
                                            wantY.data());
    else
      braid_rt_vocab_parallel_embedding_f32_i64(nullptr, table.data(),
                                                ids.data(), cols, hidden,
                                                numIds, first, wantY.data());
    ops::vocabParallelEmbedding(host, table.data(), ids.data(), cols, hidden,
                                numIds, first, gotY.data());
    compare("vocab_parallel_embedding" + part, wantY, gotY);
    std::vector<float> dy = randomFloats(numIds * hidden),
                       wantT(cols * hidden, 7.0f), gotT(cols * hidden, -7.0f);
    braid_rt_status_t wantStatus, gotStatus;
    if constexpr (std::is_same<T, int32_t>::value)
      wantStatus = braid_rt_vocab_parallel_embedding_grad_f32(
          nullptr, ids.data(), dy.data(), numIds, cols, hidden, first,
          wantT.data());
    else
      wantStatus = braid_rt_vocab_parallel_embedding_grad_f32_i64(
          nullptr, ids.data(), dy.data(), numIds, cols, hidden, first,
          wantT.data());
    gotStatus = ops::vocabParallelEmbeddingGrad(host, ids.data(), dy.data(),
                                                numIds, cols, hidden, first,
                                                gotT.data());
    compareStatus("vocab_parallel_embedding_grad" + part, wantStatus,
                  gotStatus);
    compare("vocab_parallel_embedding_grad" + part, wantT, gotT);
  }

  // Combined in part order, as every rank combines the gathered parts.
  std::vector<double> mx(rows), sum(rows), target(rows), got(rows);
  HostBackend host;
  braid_rt_vocab_parallel_combine_f64(nullptr, maxParts.data(), numParts, rows,
                                      BRAID_RT_REDUCE_MAX, mx.data());
  ops::vocabParallelCombine(host, maxParts.data(), numParts, rows,
                            BRAID_RT_REDUCE_MAX, got.data());
  compare("vocab_parallel_combine max" + s, mx, got);
  braid_rt_vocab_parallel_combine_f64(nullptr, sumParts.data(), numParts, rows,
                                      BRAID_RT_REDUCE_SUM, sum.data());
  ops::vocabParallelCombine(host, sumParts.data(), numParts, rows,
                            BRAID_RT_REDUCE_SUM, got.data());
  compare("vocab_parallel_combine sum" + s, sum, got);
  braid_rt_vocab_parallel_combine_f64(nullptr, pickedParts.data(), numParts,
                                      rows, BRAID_RT_REDUCE_SUM, target.data());
  std::vector<float> wantLoss(1), gotLoss(1);
  braid_rt_vocab_parallel_loss_f32(nullptr, mx.data(), sum.data(),
                                   target.data(), rows, wantLoss.data());
  ops::vocabParallelLoss(host, mx.data(), sum.data(), target.data(), rows,
                         gotLoss.data());
  compare("vocab_parallel_loss" + s, wantLoss, gotLoss);

  float grad = 1.5f;
  for (int64_t k = 0; k < numParts; ++k) {
    std::vector<float> want = zeros(rows * cols), gotD = want;
    if constexpr (std::is_same<T, int32_t>::value)
      braid_rt_vocab_parallel_cross_entropy_grad_f32(
          nullptr, logits[k].data(), labels.data(), &grad, mx.data(),
          sum.data(), rows, cols, k * cols, want.data());
    else
      braid_rt_vocab_parallel_cross_entropy_grad_f32_i64(
          nullptr, logits[k].data(), labels.data(), &grad, mx.data(),
          sum.data(), rows, cols, k * cols, want.data());
    ops::vocabParallelCrossEntropyGrad(host, logits[k].data(), labels.data(),
                                       &grad, mx.data(), sum.data(), rows, cols,
                                       k * cols, gotD.data());
    compare("vocab_parallel_cross_entropy_grad part " + std::to_string(k) + s,
            want, gotD);
  }
}

void testVocabParallelEdges() {
  // Rows of no columns: the maximum is -inf; no rows: the loss is 0.
  std::vector<float> none(1);
  std::vector<double> want(3), got(3);
  HostBackend host;
  braid_rt_vocab_parallel_max_f32(nullptr, none.data(), 3, 0, want.data());
  ops::vocabParallelMax(host, none.data(), 3, 0, got.data());
  compare("vocab_parallel_max of empty rows", want, got);
  std::vector<float> wantLoss = {5.0f}, gotLoss = {-5.0f};
  braid_rt_vocab_parallel_loss_f32(nullptr, want.data(), want.data(),
                                   want.data(), 0, wantLoss.data());
  ops::vocabParallelLoss(host, want.data(), want.data(), want.data(), 0,
                         gotLoss.data());
  compare("vocab_parallel_loss of no rows", wantLoss, gotLoss);
}

//===----------------------------------------------------------------------===//
// Training
//===----------------------------------------------------------------------===//

void testTraining() {
  for (auto decay : {BRAID_RT_LR_CONSTANT, BRAID_RT_LR_LINEAR,
                     BRAID_RT_LR_COSINE})
    for (int32_t step : {0, 2, 5, 9, 30}) {
      std::vector<float> want(1), got(1), want64(1), got64(1);
      int64_t step64 = step;
      HostBackend host;
      braid_rt_lr_schedule_f32(nullptr, &step, decay, 3e-3, 1e-4, 3, 20,
                               want.data());
      ops::lrSchedule(host, &step, decay, 3e-3, 1e-4, 3, 20, got.data());
      braid_rt_lr_schedule_f32_i64(nullptr, &step64, decay, 3e-3, 1e-4, 3, 20,
                                   want64.data());
      ops::lrSchedule(host, &step64, decay, 3e-3, 1e-4, 3, 20, got64.data());
      want.push_back(want64[0]);
      got.push_back(got64[0]);
      compare("lr_schedule decay " + std::to_string(decay) + " step " +
                  std::to_string(step) + " (i32, i64)",
              want, got);
    }

  std::vector<std::vector<float>> tensors = {randomFloats(10000), randomFloats(7),
                                             randomFloats(0), randomFloats(4096)};
  std::vector<const float *> ptrs;
  std::vector<int64_t> counts;
  for (auto &t : tensors) {
    ptrs.push_back(t.data());
    counts.push_back(t.size());
  }
  std::vector<float> want(1), got(1);
  HostBackend host;
  braid_rt_global_norm_f32(nullptr, ptrs.data(), counts.data(), 4, want.data());
  ops::sumSquares(host, ptrs.data(), counts.data(), 4, true, got.data());
  compare("global_norm of 4 tensors", want, got);
  braid_rt_sum_squares_f32(nullptr, ptrs.data(), counts.data(), 4, want.data());
  ops::sumSquares(host, ptrs.data(), counts.data(), 4, false, got.data());
  compare("sum_squares of 4 tensors", want, got);
  braid_rt_sum_squares_f32(nullptr, ptrs.data(), counts.data(), 0, want.data());
  ops::sumSquares(host, ptrs.data(), counts.data(), 0, false, got.data());
  compare("sum_squares of no tensors", want, got);
  for (float norm : {0.5f, 3.0f}) {
    braid_rt_clip_coefficient_f32(nullptr, &norm, 1.0, want.data());
    ops::clipCoefficient(host, &norm, 1.0, got.data());
    compare("clip_coefficient of " + std::to_string(norm), want, got);
  }

  const int64_t n = 500;
  std::vector<float> param = randomFloats(n), grad = randomFloats(n),
                     m = randomFloats(n, -0.1f, 0.1f),
                     v = randomFloats(n, 0.0f, 0.01f);
  float lr = 1e-3f, scale = 0.5f;
  int32_t step = 4;
  int64_t step64 = 4;
  std::vector<float> wp = zeros(n), wm = zeros(n), wv = zeros(n), gp = zeros(n),
                     gm = zeros(n), gv = zeros(n);
  braid_rt_adamw_update_f32(nullptr, param.data(), grad.data(), m.data(),
                            v.data(), &lr, &step, &scale, n, 0.9, 0.999, 1e-8,
                            0.01, wp.data(), wm.data(), wv.data());
  ops::adamwUpdate(host, param.data(), grad.data(), m.data(), v.data(), &lr,
                   &step, &scale, n, 0.9, 0.999, 1e-8, 0.01, gp.data(),
                   gm.data(), gv.data());
  compare("adamw_update param", wp, gp);
  compare("adamw_update m", wm, gm);
  compare("adamw_update v", wv, gv);
  braid_rt_adamw_update_f32_i64(nullptr, param.data(), grad.data(), m.data(),
                                v.data(), &lr, &step64, &scale, n, 0.9, 0.95,
                                1e-6, 0.1, wp.data(), wm.data(), wv.data());
  ops::adamwUpdate(host, param.data(), grad.data(), m.data(), v.data(), &lr,
                   &step64, &scale, n, 0.9, 0.95, 1e-6, 0.1, gp.data(),
                   gm.data(), gv.data());
  compare("adamw_update i64 param", wp, gp);
  for (int nesterov : {0, 1}) {
    braid_rt_sgd_update_f32(nullptr, param.data(), grad.data(), m.data(), &lr,
                            &scale, n, 0.9, nesterov, 0.01, wp.data(),
                            wm.data());
    ops::sgdUpdate(host, param.data(), grad.data(), m.data(), &lr, &scale, n,
                   0.9, nesterov, 0.01, gp.data(), gm.data());
    std::string s = nesterov ? " nesterov" : "";
    compare("sgd_update param" + s, wp, gp);
    compare("sgd_update momentum" + s, wm, gm);
  }
  // A non-finite scale skips the step: the results are the inputs.
  for (float bad : {std::numeric_limits<float>::infinity(),
                    std::numeric_limits<float>::quiet_NaN()}) {
    std::string s = std::isnan(bad) ? " (nan scale)" : " (inf scale)";
    ops::adamwUpdate(host, param.data(), grad.data(), m.data(), v.data(), &lr,
                     &step, &bad, n, 0.9, 0.999, 1e-8, 0.01, gp.data(),
                     gm.data(), gv.data());
    compare("adamw_update skipped param" + s, param, gp);
    compare("adamw_update skipped m" + s, m, gm);
    compare("adamw_update skipped v" + s, v, gv);
    ops::sgdUpdate(host, param.data(), grad.data(), m.data(), &lr, &bad, n,
                   0.9, 0, 0.01, gp.data(), gm.data());
    compare("sgd_update skipped param" + s, param, gp);
    compare("sgd_update skipped momentum" + s, m, gm);
  }
}

} // namespace

int main() {
  testElementwise();
  testRowwise();
  testMatmul();
  testBf16Conversion();
  testMatmulBf16In();
  testMatmulBias();
  testAttention();
  testShape();
  testVocabParallel<int32_t>("");
  testVocabParallel<int64_t>(" i64");
  testVocabParallelEdges();
  testTraining();
  printf("%d checks, %d failed; largest relative difference %.3g (%s), "
         "tolerance %.0e\n",
         checks, failures, worst, worstName.c_str(), kTolerance);
  return failures ? 1 : 0;
}
