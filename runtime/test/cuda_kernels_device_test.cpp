//===- cuda_kernels_device_test.cpp - CUDA kernels on a GPU vs the CPU ----===//
//
// Links braid_rt_kernels_cuda with cudart and cuBLAS (so that building it
// proves the CUDA library links), and on a machine with a GPU runs a sample
// of the kernels (the GEMM paths, grouped-head attention gradients, a
// row-wise kernel, the loss, the optimizer) against the CPU backend's,
// which it loads with dlopen from libbraid_rt_kernels_shared.so (the two
// define the same symbols), and the bf16-input matmul (cuBLAS's bf16 GEMM)
// against the CPU's and the exact product, and the matmul with a bias (and
// GELU) epilogue (cuBLASLt) against the CPU's. TF32 stays off: the f32
// kernels' results agree to 1e-5 relative to the largest magnitude (the
// bf16 GEMM's to 1e-4, and to a bound per element: see run()). It also checks
// that an id out of range surfaces at braid_rt_cuda_kernels_poll, naming the
// kernel.
//
// Without a GPU it prints why and exits 77, which ctest reports as a skip.
//
//===----------------------------------------------------------------------===//

#include "errors.h"

#include "braid/rt/kernels.h"

#include <cuda_runtime.h>
#include <dlfcn.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

// The CUDA context library defines this (braid/rt/cuda.h); this test runs
// without a context, on CUDA's legacy default stream.
extern "C" cudaStream_t braid_rt_cuda_stream(braid_rt_stream_t *) {
  return (cudaStream_t)0;
}

namespace {

constexpr int kSkip = 77;
constexpr double kTolerance = 1e-5;
int failures = 0;
void *cpuLibrary;

template <typename F> F cpu(const char *name) {
  void *f = dlsym(cpuLibrary, name);
  if (!f) {
    fprintf(stderr, "FAIL: %s not in the CPU kernels: %s\n", name, dlerror());
    exit(1);
  }
  return (F)f;
}

/// `x` to the nearest bf16 value, ties to even (NaNs untouched).
float roundBF16(float x) {
  uint32_t u;
  memcpy(&u, &x, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u)
    return x;
  u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
  memcpy(&x, &u, sizeof x);
  return x;
}

std::mt19937 rng(5);
std::vector<float> randomFloats(size_t n) {
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  std::vector<float> v(n);
  for (float &x : v)
    x = dist(rng);
  return v;
}

/// A device copy of a host vector, freed at scope exit.
template <typename T> struct Device {
  T *ptr = nullptr;
  size_t n;
  explicit Device(const std::vector<T> &host) : n(host.size()) {
    braid_rt_memory_alloc(n * sizeof(T), (void **)&ptr);
    braid_rt_memory_copy_to_device(nullptr, ptr, host.data(), n * sizeof(T));
  }
  ~Device() { braid_rt_memory_free(ptr); }
  std::vector<T> host() const {
    std::vector<T> out(n);
    braid_rt_memory_copy_to_host(nullptr, out.data(), ptr, n * sizeof(T));
    cudaStreamSynchronize(0);
    return out;
  }
};

void compare(const char *name, const std::vector<float> &want,
             const std::vector<float> &got, double tolerance = kTolerance) {
  double scale = 0.0, diff = 0.0;
  for (size_t i = 0; i < want.size(); ++i) {
    scale = std::fmax(scale, std::fabs(want[i]));
    diff = std::fmax(diff, std::fabs((double)want[i] - got[i]));
  }
  double rel = scale > 0.0 ? diff / scale : diff;
  bool ok = rel <= tolerance && !std::isnan(rel);
  printf("%-4s %-36s max relative difference %.3g\n", ok ? "ok" : "FAIL", name,
         rel);
  failures += !ok;
}

/// A matmul's operands (row-major, `a` stored transposed with `ta`, `b`
/// with `tb`) and what follows from their shapes: the result is `batch`
/// [m, n] matrices, the operands' batch dimensions (`ad`, `bd`, padded
/// with leading 1s to the result's batch rank) broadcast as in NumPy.
struct MatmulShape {
  std::vector<int64_t> a, b;
  int ta = 0, tb = 0;
  int64_t m = 0, k = 0, n = 0;
  std::vector<int64_t> ad, bd;
  size_t aElements = 1, bElements = 1, batch = 1;
  size_t resultElements() const { return batch * m * n; }
};

MatmulShape matmulShape(const std::vector<int64_t> &a,
                        const std::vector<int64_t> &b, int ta, int tb) {
  MatmulShape s;
  s.a = a;
  s.b = b;
  s.ta = ta;
  s.tb = tb;
  int64_t ra = a.size(), rb = b.size(), rank = std::max(ra, rb) - 2;
  s.m = ta ? a[ra - 1] : a[ra - 2];
  s.k = ta ? a[ra - 2] : a[ra - 1];
  s.n = tb ? b[rb - 2] : b[rb - 1];
  s.ad.assign(rank, 1);
  s.bd.assign(rank, 1);
  for (int64_t d = 0; d < ra - 2; ++d)
    s.ad[rank - (ra - 2) + d] = a[d];
  for (int64_t d = 0; d < rb - 2; ++d)
    s.bd[rank - (rb - 2) + d] = b[d];
  for (int64_t d : a)
    s.aElements *= d;
  for (int64_t d : b)
    s.bElements *= d;
  for (int64_t d = 0; d < rank; ++d)
    s.batch *= s.ad[d] == 1 ? s.bd[d] : s.ad[d];
  return s;
}

/// The largest error of `got`, the product of `a` and `b` shaped `s`,
/// against the exact (double) product, element by element, in units of
/// `unit` k sum_l |a b|.
double worstErrorOfExact(const MatmulShape &s, const std::vector<float> &a,
                         const std::vector<float> &b,
                         const std::vector<float> &got, double unit) {
  int64_t rank = s.ad.size(), m = s.m, k = s.k, n = s.n;
  int64_t lda = s.a.back(), ldb = s.b.back();
  double worst = 0.0;
  for (size_t p = 0; p < s.batch; ++p) {
    size_t oa = 0, ob = 0, rest = p, sa = 1, sb = 1;
    for (int64_t d = rank - 1; d >= 0; --d) {
      size_t od = s.ad[d] == 1 ? s.bd[d] : s.ad[d], idx = rest % od;
      rest /= od;
      oa += (s.ad[d] == 1 ? 0 : idx) * sa;
      ob += (s.bd[d] == 1 ? 0 : idx) * sb;
      sa *= s.ad[d];
      sb *= s.bd[d];
    }
    const float *ap = a.data() + oa * m * k, *bp = b.data() + ob * k * n;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double sum = 0.0, abs = 0.0;
        for (int64_t l = 0; l < k; ++l) {
          double x = s.ta ? ap[l * lda + i] : ap[i * lda + l];
          double y = s.tb ? bp[j * ldb + l] : bp[l * ldb + j];
          sum += x * y;
          abs += std::fabs(x * y);
        }
        double bound = (double)k * unit * abs + 1e-30;
        worst = std::fmax(
            worst, std::fabs((double)got[(p * m + i) * n + j] - sum) / bound);
      }
  }
  return worst;
}

void checkPoll(const char *name, braid_rt_status_t want, const char *text) {
  char message[256];
  braid_rt_status_t got = braid_rt_cuda_kernels_poll(nullptr, message, 256);
  bool ok = got == want && (!text || strstr(message, text));
  printf("%-4s %-36s poll: %s \"%s\"\n", ok ? "ok" : "FAIL", name,
         braid_rt_status_string(got), message);
  failures += !ok;
}

void run() {
  // Matmul: folded, strided and broadcast batches.
  using Matmul = decltype(&braid_rt_matmul_f32);
  struct {
    const char *name;
    std::vector<int64_t> a, b;
    int ta, tb;
  } matmuls[] = {
      {"matmul folded [4,33,65]x[65,17]", {4, 33, 65}, {65, 17}, 0, 0},
      {"matmul strided [3,20,9]^T x[3,31,20]^T", {3, 20, 9}, {3, 31, 20}, 1, 1},
      {"matmul mixed [2,1,5,7]x[1,3,7,4]", {2, 1, 5, 7}, {1, 3, 7, 4}, 0, 0}};
  for (auto &c : matmuls) {
    MatmulShape s = matmulShape(c.a, c.b, c.ta, c.tb);
    int64_t ra = s.a.size(), rb = s.b.size();
    std::vector<float> a = randomFloats(s.aElements),
                       b = randomFloats(s.bElements), want(s.resultElements());
    cpu<Matmul>("braid_rt_matmul_f32")(nullptr, a.data(), b.data(), ra,
                                       s.a.data(), rb, s.b.data(), s.ta, s.tb,
                                       want.data());
    Device<float> da(a), db(b), dc(std::vector<float>(want.size()));
    braid_rt_matmul_f32(nullptr, da.ptr, db.ptr, ra, s.a.data(), rb, s.b.data(),
                        s.ta, s.tb, dc.ptr);
    compare(c.name, want, dc.host());
  }

  // The bf16-input matmul (cuBLAS's bf16 GEMM on bf16 copies made on the
  // device) against the CPU's (oneDNN's bf16 GEMM, or its f32 GEMM where
  // the CPU has none): operands holding bf16 values, the batch paths above
  // and a larger GEMM; and operands that are not bf16, which the copies
  // round (the product of the roundings), within 1e-4 of the largest
  // magnitude of the CPU's result. Each element within k 2^-23
  // sum |a b| of the exact product of the bf16 operands: tensor cores sum
  // the exact products in f32 but may truncate where an f32 addition
  // rounds, twice the bound of the CPU tests.
  using MatmulBf16 = decltype(&braid_rt_matmul_bf16in_f32);
  struct {
    const char *name;
    std::vector<int64_t> a, b;
    int ta, tb;
    int roundInputs; // 0: operands not bf16 values
  } bf16Matmuls[] = {
      {"bf16in folded [4,33,65]x[65,17]", {4, 33, 65}, {65, 17}, 0, 0, 1},
      {"bf16in strided [3,20,9]^T x[3,31,20]^T",
       {3, 20, 9},
       {3, 31, 20},
       1,
       1,
       1},
      {"bf16in stride-0 [64,48]x[2,40,48]^T", {64, 48}, {2, 40, 48}, 0, 1, 1},
      {"bf16in mixed [2,1,5,7]x[1,3,7,4]", {2, 1, 5, 7}, {1, 3, 7, 4}, 0, 0, 1},
      {"bf16in [2,256,512]x[512,384]", {2, 256, 512}, {512, 384}, 0, 0, 1},
      {"bf16in non-bf16 [2,6,11]x[11,4]", {2, 6, 11}, {11, 4}, 0, 0, 0}};
  for (auto &c : bf16Matmuls) {
    MatmulShape s = matmulShape(c.a, c.b, c.ta, c.tb);
    int64_t ra = s.a.size(), rb = s.b.size();
    std::vector<float> a = randomFloats(s.aElements),
                       b = randomFloats(s.bElements);
    std::vector<float> ar = a, br = b; // what the GEMM multiplies
    for (float &x : ar)
      x = roundBF16(x);
    for (float &x : br)
      x = roundBF16(x);
    if (c.roundInputs) {
      a = ar;
      b = br;
    }
    std::vector<float> want(s.resultElements());
    cpu<MatmulBf16>("braid_rt_matmul_bf16in_f32")(
        nullptr, ar.data(), br.data(), ra, s.a.data(), rb, s.b.data(), s.ta,
        s.tb, want.data());
    Device<float> da(a), db(b), dc(std::vector<float>(want.size()));
    braid_rt_status_t st =
        braid_rt_matmul_bf16in_f32(nullptr, da.ptr, db.ptr, ra, s.a.data(), rb,
                                   s.b.data(), s.ta, s.tb, dc.ptr);
    std::vector<float> got = dc.host();
    if (st != BRAID_RT_OK) {
      printf("FAIL %-36s returns %s\n", c.name, braid_rt_status_string(st));
      ++failures;
      continue;
    }
    // Two f32 sums of the same products in other orders (and truncating,
    // on tensor cores): 1e-4 of the largest magnitude.
    compare(c.name, want, got, 1e-4);
    // The exact product of the bf16 operands, element by element.
    double worst = worstErrorOfExact(s, ar, br, got, std::ldexp(1.0, -23));
    bool ok = worst <= 1.0;
    printf("%-4s %-36s worst error %.3g of k 2^-23 sum|ab|\n",
           ok ? "ok" : "FAIL", c.name, worst);
    failures += !ok;
  }

  // braid.matmul_bias: cublasLtMatmul with CUBLASLT_EPILOGUE_BIAS and
  // GELU_BIAS, f32 (no TF32) and bf16 operands, against the CPU kernel
  // (the GEMM, then the bias and GELU of elementwise_math.h): 1e-5 of the
  // largest magnitude for f32 with the bias only; 1e-4 with cuBLASLt's own
  // GELU (its tanh approximation, computed its way) or bf16 operands (the
  // sums in another order, as above). The batch paths of the matmul: one
  // GEMM with the batch folded into M, strided batches with a stride-0
  // operand, mixed broadcasting (one call per batch), and a larger GEMM.
  using MatmulBias = decltype(&braid_rt_matmul_bias_f32);
  using MatmulBiasBf16 = decltype(&braid_rt_matmul_bias_bf16in_f32);
  struct {
    const char *name;
    std::vector<int64_t> a, b;
    int ta, tb, gelu, bf16;
  } biasMatmuls[] = {
      // clang-format off
      {"bias folded [4,33,65]x[65,17]", {4, 33, 65}, {65, 17}, 0, 0, 0, 0},
      {"bias gelu folded [4,33,65]x[17,65]^T", {4, 33, 65}, {17, 65}, 0, 1, 1, 0},
      {"bias gelu stride-0 [64,48]x[2,40,48]^T", {64, 48}, {2, 40, 48}, 0, 1, 1, 0},
      {"bias mixed [2,1,5,7]x[1,3,7,4]", {2, 1, 5, 7}, {1, 3, 7, 4}, 0, 0, 0, 0},
      {"bias bf16in [2,256,512]x[512,384]", {2, 256, 512}, {512, 384}, 0, 0, 0, 1},
      {"bias gelu bf16in [3,20,9]^T x[3,31,20]^T", {3, 20, 9}, {3, 31, 20}, 1, 1, 1, 1},
      // clang-format on
  };
  for (auto &c : biasMatmuls) {
    MatmulShape s = matmulShape(c.a, c.b, c.ta, c.tb);
    int64_t ra = s.a.size(), rb = s.b.size();
    std::vector<float> a = randomFloats(s.aElements),
                       b = randomFloats(s.bElements), bias = randomFloats(s.n),
                       want(s.resultElements());
    if (c.bf16) {
      for (float &x : a)
        x = roundBF16(x);
      for (float &x : b)
        x = roundBF16(x);
    }
    Device<float> da(a), db(b), dbias(bias),
        dc(std::vector<float>(want.size()));
    braid_rt_status_t st = BRAID_RT_OK;
    if (c.bf16) {
      cpu<MatmulBiasBf16>("braid_rt_matmul_bias_bf16in_f32")(
          nullptr, a.data(), b.data(), bias.data(), ra, s.a.data(), rb,
          s.b.data(), s.ta, s.tb, c.gelu, want.data());
      st = braid_rt_matmul_bias_bf16in_f32(nullptr, da.ptr, db.ptr, dbias.ptr,
                                           ra, s.a.data(), rb, s.b.data(), s.ta,
                                           s.tb, c.gelu, dc.ptr);
    } else {
      cpu<MatmulBias>("braid_rt_matmul_bias_f32")(
          nullptr, a.data(), b.data(), bias.data(), ra, s.a.data(), rb,
          s.b.data(), s.ta, s.tb, c.gelu, want.data());
      braid_rt_matmul_bias_f32(nullptr, da.ptr, db.ptr, dbias.ptr, ra,
                               s.a.data(), rb, s.b.data(), s.ta, s.tb, c.gelu,
                               dc.ptr);
    }
    std::vector<float> got = dc.host();
    if (st != BRAID_RT_OK) {
      printf("FAIL %-36s returns %s\n", c.name, braid_rt_status_string(st));
      ++failures;
      continue;
    }
    compare(c.name, want, got, c.gelu || c.bf16 ? 1e-4 : kTolerance);
  }
  // A cuBLASLt call refused (kErrCublas, recorded on the host) surfaces at
  // the poll.
  checkPoll("matmul_bias: nothing refused", BRAID_RT_OK, nullptr);

  // Attention gradients with grouped heads (hq 8, hkv 2), causal.
  const int64_t B = 2, S = 64, Hq = 8, Hkv = 2, D = 16;
  std::vector<float> q = randomFloats(B * S * Hq * D),
                     k = randomFloats(B * S * Hkv * D),
                     v = randomFloats(B * S * Hkv * D),
                     dy = randomFloats(B * S * Hq * D);
  std::vector<float> wq(q.size()), wk(k.size()), wv(v.size()), wy(q.size());
  double scale = 0.25;
  cpu<decltype(&braid_rt_attention_f32)>("braid_rt_attention_f32")(
      nullptr, q.data(), k.data(), v.data(), B, S, S, Hq, Hkv, D, 1, scale,
      wy.data());
  cpu<decltype(&braid_rt_attention_grad_all_f32)>(
      "braid_rt_attention_grad_all_f32")(nullptr, q.data(), k.data(), v.data(),
                                         dy.data(), B, S, S, Hq, Hkv, D, 1,
                                         scale, wq.data(), wk.data(),
                                         wv.data());
  Device<float> dq(q), dk(k), dv(v), ddy(dy), gy(wy), gq(wq), gk(wk), gv(wv);
  braid_rt_attention_f32(nullptr, dq.ptr, dk.ptr, dv.ptr, B, S, S, Hq, Hkv, D,
                         1, scale, gy.ptr);
  braid_rt_attention_grad_all_f32(nullptr, dq.ptr, dk.ptr, dv.ptr, ddy.ptr, B,
                                  S, S, Hq, Hkv, D, 1, scale, gq.ptr, gk.ptr,
                                  gv.ptr);
  compare("attention causal hq8 hkv2", wy, gy.host());
  compare("attention_grad dq", wq, gq.host());
  compare("attention_grad dk (grouped)", wk, gk.host());
  compare("attention_grad dv (grouped)", wv, gv.host());

  // Layer norm, cross-entropy, AdamW.
  const int64_t rows = 128, cols = 256;
  std::vector<float> x = randomFloats(rows * cols), s = randomFloats(cols),
                     bias = randomFloats(cols), want(rows * cols);
  cpu<decltype(&braid_rt_layer_norm_f32)>("braid_rt_layer_norm_f32")(
      nullptr, x.data(), s.data(), bias.data(), rows, cols, 1e-5, want.data());
  Device<float> dx(x), ds(s), dbias(bias), dout(want);
  braid_rt_layer_norm_f32(nullptr, dx.ptr, ds.ptr, dbias.ptr, rows, cols, 1e-5,
                          dout.ptr);
  compare("layer_norm 128x256", want, dout.host());

  std::vector<int32_t> labels(rows);
  for (int64_t r = 0; r < rows; ++r)
    labels[r] = (int32_t)((r * 37) % cols);
  std::vector<float> loss(1);
  cpu<decltype(&braid_rt_cross_entropy_f32)>("braid_rt_cross_entropy_f32")(
      nullptr, x.data(), labels.data(), rows, cols, loss.data());
  Device<int32_t> dlabels(labels);
  Device<float> dloss(std::vector<float>(1));
  braid_rt_cross_entropy_f32(nullptr, dx.ptr, dlabels.ptr, rows, cols,
                             dloss.ptr);
  compare("cross_entropy 128x256", loss, dloss.host());

  std::vector<float> m(rows * cols, 0.01f), vv(rows * cols, 0.001f),
      lr = {1e-3f}, gs = {1.0f};
  std::vector<int32_t> step = {3};
  std::vector<float> np(x.size()), nm(x.size()), nv(x.size());
  cpu<decltype(&braid_rt_adamw_update_f32)>("braid_rt_adamw_update_f32")(
      nullptr, x.data(), s.data(), m.data(), vv.data(), lr.data(), step.data(),
      gs.data(), cols, 0.9, 0.999, 1e-8, 0.01, np.data(), nm.data(), nv.data());
  np.resize(cols);
  Device<float> dm(m), dvv(vv), dlr(lr), dgs(gs), dnp(np), dnm(np), dnv(np);
  Device<int32_t> dstep(step);
  braid_rt_adamw_update_f32(nullptr, dx.ptr, ds.ptr, dm.ptr, dvv.ptr, dlr.ptr,
                            dstep.ptr, dgs.ptr, cols, 0.9, 0.999, 1e-8, 0.01,
                            dnp.ptr, dnm.ptr, dnv.ptr);
  compare("adamw_update param", np, dnp.host());

  checkPoll("no error recorded", BRAID_RT_OK, nullptr);
  labels[7] = (int32_t)cols; // out of range
  Device<int32_t> bad(labels);
  braid_rt_status_t launched = braid_rt_cross_entropy_f32(
      nullptr, dx.ptr, bad.ptr, rows, cols, dloss.ptr);
  printf("%-4s %-36s returns %s at the call\n",
         launched == BRAID_RT_OK ? "ok" : "FAIL", "cross_entropy, bad label",
         braid_rt_status_string(launched));
  failures += launched != BRAID_RT_OK;
  checkPoll("cross_entropy, bad label", BRAID_RT_INVALID_ARGUMENT,
            "cross_entropy: a label outside [0, vocab)");
  checkPoll("the poll cleared it", BRAID_RT_OK, nullptr);
}

} // namespace

int main(int argc, char **argv) {
  int devices = 0;
  cudaError_t e = cudaGetDeviceCount(&devices);
  if (e != cudaSuccess || devices == 0) {
    printf("SKIP runtime-cuda-kernels-device: no CUDA device (%s)\n",
           e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
    return kSkip;
  }
  if (argc != 2) {
    fprintf(stderr, "usage: %s <libbraid_rt_kernels_shared.so>\n", argv[0]);
    return 2;
  }
  cpuLibrary = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!cpuLibrary) {
    fprintf(stderr, "FAIL: cannot load the CPU kernels: %s\n", dlerror());
    return 1;
  }
  run();
  printf("%s: %d failed\n", failures ? "FAIL" : "PASS", failures);
  return failures ? 1 : 0;
}
