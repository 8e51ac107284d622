//===- Calibrate.cpp - Measuring this machine for a hardware file ---------===//
//
// Compute: OpenBLAS sgemm through the runtime's matmul kernel on square
// matrices (the best rate is the f32 peak; the matmul efficiency is the
// rate at the sizes small models here use over that peak), the attention
// kernels, forward and backward (their products' rate over the peak and
// their bytes' rate, fitted to two sequence lengths), memcpy (the memory
// bandwidth), the add kernel and GELU with its gradient (their bandwidth over
// memcpy's is the memory and the transcendental efficiency), the optimizer
// step, the row-wise kernels at a layer's and a head's sizes (the row-wise
// efficiency) and a GPT layer's kernels at two
// batch sizes (the fixed cost per kernel). Network: all_reduce,
// all_gather, reduce_scatter and send/recv over a range of sizes on `ranks`
// MPI ranks of this machine, each fitted to the ring model (fitLinkCost),
// and, when the ranks share cores, the wait of a collective for
// descheduled peers. One machine has one link level, so both levels get
// the same figures. Memory: a rank's fixed part (the workspace), from a
// small program compiled as braidc compiles one and run on the same ranks.
//
//===----------------------------------------------------------------------===//

#include "Calibrate.h"

#include "braid/Planner/Calibration.h"
#include "braid/Target/Toolchain.h"
#include "braid/rt/collectives.h"
#include "braid/rt/context.h"
#include "braid/rt/kernels.h"
#include "braid/rt/mesh.h"

#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/Program.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <mpi.h>
#include <sched.h>
#include <set>
#include <thread>
#include <vector>

using namespace mlir::braid::plan;
using llvm::formatv;

static double now() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

/// Best of `reps` timings of `fn` (the machine is shared; the minimum is
/// the least disturbed).
template <typename Fn> static double bestOf(int reps, Fn fn) {
  double best = 1e30;
  for (int i = 0; i < reps; ++i) {
    double t0 = now();
    fn();
    best = std::min(best, now() - t0);
  }
  return best;
}

/// Seconds per call of `fn`: calls repeated until `minSeconds` have passed
/// (a tiny kernel takes less than the clock resolves), best of `reps`.
template <typename Fn>
static double perCall(int reps, double minSeconds, Fn fn) {
  double best = 1e30;
  for (int i = 0; i < reps; ++i) {
    int64_t calls = 0;
    double t0 = now(), elapsed;
    do {
      fn();
      ++calls;
      elapsed = now() - t0;
    } while (elapsed < minSeconds);
    best = std::min(best, elapsed / calls);
  }
  return best;
}

static double gemmRate(int64_t n, int reps) {
  std::vector<float> a(n * n, 0.5f), b(n * n, 0.25f), c(n * n);
  int64_t shape[2] = {n, n};
  auto run = [&] {
    braid_rt_matmul_f32(nullptr, a.data(), b.data(), 2, shape, 2, shape, 0, 0,
                        c.data());
  };
  run();
  return 2.0 * n * n * n / bestOf(reps, run);
}

/// Seconds of the forward of a GPT layer (hidden 128, 4 heads, sequence 64,
/// MLP 512) over `batch` sequences through the runtime's kernels, a buffer
/// per value as a compiled program has them: 18 kernels (2 layer norms, 6
/// products and their 6 bias adds, the attention, the GELU, 2 residual
/// adds), as the cost model counts them.
constexpr int kLayerKernels = 18;
static double layerForward(int64_t batch, int reps) {
  const int64_t s = 64, h = 128, heads = 4, f = 4 * h, t = batch * s;
  auto buf = [](int64_t n) { return std::vector<float>(n, 0.01f); };
  std::vector<float> x = buf(t * h), ln1 = buf(t * h), ln2 = buf(t * h),
                     att = buf(t * h), x1 = buf(t * h), x2 = buf(t * h),
                     fc = buf(t * f), fcb = buf(t * f), g = buf(t * f);
  std::vector<std::vector<float>> xw(4, buf(t * h)), xwb(4, buf(t * h)),
      w(4, buf(h * h)), bias(4, buf(h));
  std::vector<float> ones(h, 1.0f), zeros(h, 0.0f),
      wfc = buf(h * f), bfc = buf(f), wp = buf(f * h), bp = buf(h),
      mp = buf(t * h), mpb = buf(t * h);
  int64_t th[2] = {t, h}, hh[2] = {h, h}, hf[2] = {h, f}, tf[2] = {t, f},
          fh[2] = {f, h}, bh[1] = {h}, bfs[1] = {f};
  auto linear = [&](const float *in, int64_t *inShape, const float *weight,
                    int64_t *wShape, float *out, const float *b,
                    int64_t *bShape, int64_t *outShape, float *outB) {
    braid_rt_matmul_f32(nullptr, in, weight, 2, inShape, 2, wShape, 0, 0, out);
    braid_rt_add_f32(nullptr, out, b, 2, outShape, 1, bShape, outB);
  };
  auto run = [&] {
    braid_rt_layer_norm_f32(nullptr, x.data(), ones.data(), zeros.data(), t, h,
                            1e-5, ln1.data());
    for (int i = 0; i < 3; ++i)
      linear(ln1.data(), th, w[i].data(), hh, xw[i].data(), bias[i].data(), bh,
             th, xwb[i].data());
    (void)braid_rt_attention_f32(nullptr, xwb[0].data(), xwb[1].data(),
                                 xwb[2].data(), batch, s, s, heads, heads,
                                 h / heads, 1, 0.17677669529663687, att.data());
    linear(att.data(), th, w[3].data(), hh, xw[3].data(), bias[3].data(), bh,
           th, xwb[3].data());
    braid_rt_add_f32(nullptr, x.data(), xwb[3].data(), 2, th, 2, th, x1.data());
    braid_rt_layer_norm_f32(nullptr, x1.data(), ones.data(), zeros.data(), t, h,
                            1e-5, ln2.data());
    linear(ln2.data(), th, wfc.data(), hf, fc.data(), bfc.data(), bfs, tf,
           fcb.data());
    braid_rt_gelu_f32(nullptr, fcb.data(), t * f, BRAID_RT_GELU_TANH, g.data());
    linear(g.data(), tf, wp.data(), fh, mp.data(), bp.data(), bh, th,
           mpb.data());
    braid_rt_add_f32(nullptr, x1.data(), mpb.data(), 2, th, 2, th, x2.data());
  };
  run();
  return perCall(reps, 0.05, run);
}

/// The fixed memory of a rank: a program compiled and linked as braidc
/// links a program on a mesh (the CPU toolchain: the program runtime, the
/// kernels, OpenBLAS, OpenMP, the communication layer and MPI), run on the
/// ranks, initialises what a compiled program does (the runtime's context
/// and mesh, a group's communicator) and runs three steps of a GPT layer's
/// kernels at the sizes of the models trained here (256 tokens, hidden 128,
/// MLP 512, 4 heads; a loss over 512 classes) with the gradient all_reduce
/// over the world; each rank prints its peak resident set and the bytes of
/// the tensors it allocated ("fixed_memory RANK PEAK TENSORS").
static const char *const kMemoryProbe = R"cpp(
#include "braid/rt/kernels.h"
#include "braid/rt/program.h"
#include "braid/rt/program_spmd.h"

#include <sys/resource.h>

static long long tensorBytes = 0;
// A buffer of the program runtime, written whole, counted as braidc's
// memory plan counts its buffers.
static float *tensor(int64_t count, float value) {
  float *p = braid_rt_program_alloc_f32(count);
  for (int64_t i = 0; i < count; ++i)
    p[i] = value * (float)(i % 7);
  tensorBytes += (count * 4 + 63) / 64 * 64;
  return p;
}

int main(int argc, char **argv) {
  int64_t dims[1] = {argc > 1 ? atoll(argv[1]) : 1};
  const char *const names[1] = {"dp"};
  braid_rt_program_spmd_start(&argc, &argv, 1, dims, names);
  int rank = braid_rt_program_spmd_rank();
  braid_rt_stream_t *s = braid_rt_program_stream();
  const int64_t t = 256, h = 128, f = 512, heads = 4;
  float *x = tensor(t * h, 0.01f), *ln = tensor(t * h, 0),
        *att = tensor(t * h, 0), *y2 = tensor(t * h, 0),
        *w1 = tensor(h * f, 0.02f), *w2 = tensor(f * h, 0.02f),
        *dw = tensor(f * h, 0), *dwSum = tensor(f * h, 0),
        *y1 = tensor(t * f, 0), *y1b = tensor(t * f, 0), *g = tensor(t * f, 0),
        *dlogits = tensor(t * f, 0), *dx = tensor(t * f, 0),
        *b1 = tensor(f, 0.01f), *ones = tensor(h, 1), *zeros = tensor(h, 0),
        *loss = tensor(1, 0), *one = tensor(1, 1);
  int32_t *labels = braid_rt_program_alloc_i32(t);
  for (int64_t i = 0; i < t; ++i)
    labels[i] = (int32_t)(i * 7 % f);
  tensorBytes += (t * 4 + 63) / 64 * 64;
  int64_t th[2] = {t, h}, hf[2] = {h, f}, tf[2] = {t, f}, fh[2] = {f, h},
          bf[1] = {f};
  static braid_rt_program_pending_t pending;
  braid_rt_program_comm(1);
  for (int step = 0; step < 3; ++step) {
    braid_rt_layer_norm_f32(s, x, ones, zeros, t, h, 1e-5, ln);
    braid_rt_program_check(
        braid_rt_attention_f32(s, ln, ln, ln, t / 64, 64, 64, heads, heads,
                               h / heads, 1, 0.17677669529663687, att),
        "attention");
    braid_rt_matmul_f32(s, att, w1, 2, th, 2, hf, 0, 0, y1);
    braid_rt_add_f32(s, y1, b1, 2, tf, 1, bf, y1b);
    braid_rt_gelu_f32(s, y1b, t * f, BRAID_RT_GELU_TANH, g);
    braid_rt_matmul_f32(s, g, w2, 2, tf, 2, fh, 0, 0, y2);
    braid_rt_program_check(
        braid_rt_cross_entropy_f32(s, g, labels, t, f, loss), "loss");
    braid_rt_program_check(braid_rt_cross_entropy_grad_f32(s, g, labels, one,
                                                           t, f, dlogits),
                           "loss gradient");
    braid_rt_matmul_f32(s, dlogits, y2, 2, tf, 2, th, 1, 0, dw);
    braid_rt_matmul_f32(s, y2, w2, 2, th, 2, fh, 0, 1, dx);
    braid_rt_program_collective_f32(BRAID_RT_PROGRAM_ALL_REDUCE, 1, dw, f * h,
                                    1, 1, 1, 1, 0, dwSum, &pending,
                                    "all_reduce");
    braid_rt_add_f32(s, w2, dwSum, 2, fh, 2, fh, w2);
  }
  braid_rt_program_spmd_finish();
  struct rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  printf("fixed_memory %d %lld %lld\n", rank,
         (long long)usage.ru_maxrss * 1024, tensorBytes);
  fflush(stdout);
  return 0;
}
)cpp";

/// Compiles kMemoryProbe with the CPU toolchain into `dir` and returns the
/// executable.
static llvm::Expected<std::string> buildMemoryProbe(llvm::StringRef dir) {
  llvm::SmallString<128> source(dir), exe(dir);
  llvm::sys::path::append(source, "memory_probe.cpp");
  llvm::sys::path::append(exe, "memory_probe");
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(source, ec);
    if (ec)
      return llvm::createStringError("calibrate: cannot write %s: %s",
                                     source.c_str(), ec.message().c_str());
    os << kMemoryProbe;
  }
  mlir::braid::CpuToolchain toolchain(
      mlir::braid::CpuToolchain::getBuildOptions());
  mlir::braid::CompileJob job;
  job.source = source.str().str();
  job.output = exe.str().str();
  job.spmd = true;
  if (llvm::Error err = toolchain.compile(job))
    return llvm::createStringError("calibrate: the memory probe: " +
                                   llvm::toString(std::move(err)));
  return exe.str().str();
}

/// The cores this process may run on (as braid-run counts them).
static int availableCores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0)
    return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

// OpenMP's and OpenBLAS's setters, weak: the kernels run on OpenMP threads
// when the runtime is built with OpenMP (OpenBLAS's own then idle), else on
// OpenBLAS's.
extern "C" {
__attribute__((weak)) void omp_set_num_threads(int);
__attribute__((weak)) void openblas_set_num_threads(int);
}

/// Runs this process's kernels, and the processes it starts, on `threads`
/// threads (both libraries read the environment when they load, before
/// --calibrate is parsed).
static void useThreads(int threads) {
  std::string t = std::to_string(threads);
  setenv("OMP_NUM_THREADS", t.c_str(), 1);
  setenv("OPENBLAS_NUM_THREADS", t.c_str(), 1);
  if (omp_set_num_threads)
    omp_set_num_threads(threads);
  if (openblas_set_num_threads)
    openblas_set_num_threads(threads);
}

llvm::Expected<Hardware> calibrateLocal(const CalibrationOptions &options,
                                        llvm::raw_ostream &log) {
  // Threads and placement as braid-run gives a program's ranks, for the
  // kernels timed here too: the hardware file then describes the ranks
  // plans run on, whatever this shell's OMP_NUM_THREADS.
  llvm::Expected<RankPlacement> chosen =
      chooseRankPlacement(options.ranks, availableCores(), options.threads,
                          llvm::sys::Process::GetEnv("OMP_NUM_THREADS"));
  if (!chosen)
    return llvm::createStringError("calibrate: " +
                                   llvm::toString(chosen.takeError()));
  RankPlacement placement = *chosen;
  log << "calibrate: " << placement.describe() << "\n";
  useThreads(placement.threads);
  // The ranks' launcher, before any timing.
  std::string mpirun = options.mpirun;
  if (mpirun.empty())
    mpirun = llvm::sys::Process::GetEnv("BRAID_MPIRUN").value_or("mpirun");
  llvm::ErrorOr<std::string> mpirunPath = llvm::sys::findProgramByName(mpirun);
  if (!mpirunPath || !llvm::sys::fs::can_execute(*mpirunPath))
    return llvm::createStringError(
        "calibrate: '%s' not found (install openmpi-bin or pass --mpirun)",
        mpirun.c_str());

  int reps = options.quick ? 2 : 5;
  Hardware hw;
  hw.name = "cpu-local";

  // GEMM.
  std::vector<int64_t> sizes =
      options.quick ? std::vector<int64_t>{64, 128, 256}
                    : std::vector<int64_t>{64, 128, 256, 512, 1024, 2048};
  double peak = 0;
  std::map<int64_t, double> rates;
  for (int64_t n : sizes) {
    rates[n] = gemmRate(n, reps);
    peak = std::max(peak, rates[n]);
    log << formatv("calibrate: sgemm {0}^3: {1:F2} GFLOP/s\n", n,
                   rates[n] / 1e9);
  }
  // The products of a training step of the models trained here (256
  // tokens, hidden 128, MLP 512): forward X W, input gradient dY W^T and
  // weight gradient X^T dY, for both MLP matrices.
  double stepRate = 0;
  int stepShapes = 0;
  for (auto [m, k, n] : {std::array<int64_t, 3>{256, 128, 512},
                         std::array<int64_t, 3>{256, 512, 128}}) {
    std::vector<float> x(m * k, 0.5f), w(k * n, 0.25f), dy(m * n, 0.1f),
        out(std::max({m * n, m * k, k * n}));
    int64_t xs[2] = {m, k}, ws[2] = {k, n}, dys[2] = {m, n};
    double flops = 2.0 * m * k * n;
    double fwd = bestOf(reps, [&] {
      braid_rt_matmul_f32(nullptr, x.data(), w.data(), 2, xs, 2, ws, 0, 0,
                          out.data());
    });
    double bwd = bestOf(reps, [&] {
      braid_rt_matmul_f32(nullptr, dy.data(), w.data(), 2, dys, 2, ws, 0, 1,
                          out.data());
    });
    double wgt = bestOf(reps, [&] {
      braid_rt_matmul_f32(nullptr, x.data(), dy.data(), 2, xs, 2, dys, 1, 0,
                          out.data());
    });
    for (double t : {fwd, bwd, wgt}) {
      stepRate += flops / t;
      ++stepShapes;
    }
    log << formatv("calibrate: matmul {0}x{1}x{2} (F, B, W): {3:F2}, {4:F2}, "
                   "{5:F2} GFLOP/s\n",
                   m, k, n, flops / fwd / 1e9, flops / bwd / 1e9,
                   flops / wgt / 1e9);
  }
  double matmulEff = std::min(1.0, stepRate / stepShapes / peak);

  // Attention, forward and backward: 4 heads of 64, causal, counted dense,
  // at a short and a long sequence over the same tokens: the same rows and
  // bytes, 4x the products. The difference is the products' rate; what the
  // short sequence takes beyond its products at that rate, over its bytes
  // (as the cost interface counts them), the kernel's streaming rate.
  struct AttentionFit {
    double rate = 0, bandwidth = 0;
  };
  auto fitAttention = [&](bool backward) {
    int64_t h = 4, d = 64, tokens = options.quick ? 512 : 1024;
    int64_t seqs[2] = {options.quick ? 32 : 64, options.quick ? 128 : 256};
    size_t n = size_t(tokens * h * d);
    std::vector<float> q(n, 0.1f), k(n, 0.2f), v(n, 0.3f), dy(n, 0.01f), y(n),
        dq(n), dk(n), dv(n);
    double flops[2], seconds[2];
    for (int i = 0; i < 2; ++i) {
      int64_t s = seqs[i], b = tokens / s;
      auto run = [&] {
        if (backward)
          braid_rt_attention_grad_all_f32(nullptr, q.data(), k.data(), v.data(),
                                          dy.data(), b, s, s, h, h, d, 1, 0.125,
                                          dq.data(), dk.data(), dv.data());
        else
          braid_rt_attention_f32(nullptr, q.data(), k.data(), v.data(), b, s, s,
                                 h, h, d, 1, 0.125, y.data());
      };
      run();
      // The forward's q k^T and p v; the backward's four products.
      flops[i] = (backward ? 8.0 : 4.0) * b * s * s * h * d;
      seconds[i] = bestOf(reps, run);
    }
    // The forward reads q, k, v and writes y; the backward's three ops
    // (dq, dk, dv) each read q, k, v and dy and write one gradient.
    double bytes = (backward ? 15.0 : 4.0) * double(n) * sizeof(float);
    AttentionFit fit;
    if (seconds[1] > seconds[0]) {
      fit.rate = (flops[1] - flops[0]) / (seconds[1] - seconds[0]);
      double rest = seconds[0] - flops[0] / fit.rate;
      fit.bandwidth = rest > 0 ? bytes / rest : 0;
    } else {
      fit.rate = flops[1] / seconds[1];
    }
    log << formatv("calibrate: attention {0} (h={1} d={2}, {3} tokens): "
                   "sequence {4} {5:F3} ms, {6} {7:F3} ms: products at "
                   "{8:F2} GFLOP/s ({9:F3} of peak), streaming {10:F2} GB/s\n",
                   backward ? "backward" : "forward", h, d, tokens, seqs[0],
                   seconds[0] * 1e3, seqs[1], seconds[1] * 1e3, fit.rate / 1e9,
                   fit.rate / peak, fit.bandwidth / 1e9);
    return fit;
  };
  AttentionFit attnF = fitAttention(false), attnB = fitAttention(true);
  double attnEff = std::min(1.0, attnF.rate / peak);
  double attnBackEff = std::min(1.0, attnB.rate / peak);

  // Memory: memcpy and the add kernel over arrays far larger than caches.
  int64_t elems = options.quick ? (int64_t(1) << 22) : (int64_t(1) << 24);
  std::vector<float> x(elems, 1.0f), z(elems, 2.0f), out(elems);
  double copyTime = bestOf(
      reps, [&] { std::memcpy(out.data(), x.data(), elems * sizeof(float)); });
  double copyBw = 2.0 * elems * sizeof(float) / copyTime;
  // Memory-bound kernels of a training step over the same arrays, each its
  // bytes (inputs and output) over its time: the add kernel, a streaming
  // op, over memcpy's bandwidth is the memory class's efficiency; GELU
  // (tanh) and its gradient, the transcendental class's (their harmonic
  // mean: equal bytes through each). (And the layer norm over rows of 128,
  // reported: it is row-wise, calibrated below.)
  int64_t shape[1] = {elems};
  double addTime = bestOf(reps, [&] {
    braid_rt_add_f32(nullptr, x.data(), z.data(), 1, shape, 1, shape,
                     out.data());
  });
  double geluTime = bestOf(reps, [&] {
    braid_rt_gelu_f32(nullptr, x.data(), elems, BRAID_RT_GELU_TANH, out.data());
  });
  double geluGradTime = bestOf(reps, [&] {
    braid_rt_gelu_grad_f32(nullptr, x.data(), z.data(), elems,
                           BRAID_RT_GELU_TANH, out.data());
  });
  std::vector<float> ones(128, 1.0f), zeros(128, 0.0f);
  double normTime = bestOf(reps, [&] {
    braid_rt_layer_norm_f32(nullptr, x.data(), ones.data(), zeros.data(),
                            elems / 128, 128, 1e-5, out.data());
  });
  double bytes = elems * sizeof(float);
  double addBw = 3 * bytes / addTime, geluBw = 2 * bytes / geluTime,
         geluGradBw = 3 * bytes / geluGradTime, normBw = 2 * bytes / normTime;
  double memEff = std::min(1.0, addBw / copyBw);
  double transEff =
      std::min(1.0, (2 * bytes + 3 * bytes) /
                        (2 * bytes / geluBw + 3 * bytes / geluGradBw) / copyBw);
  log << formatv("calibrate: memcpy {0:F2} GB/s; add {1:F2} GB/s (memory "
                 "efficiency {2:F3}); gelu {3:F2}, gelu_grad {4:F2} GB/s "
                 "(transcendental efficiency {5:F3}); layer_norm {6:F2} GB/s\n",
                 copyBw / 1e9, addBw / 1e9, memEff, geluBw / 1e9,
                 geluGradBw / 1e9, transEff, normBw / 1e9);

  // The optimizer step as braidc's programs run it, over the same arrays:
  // the gradient norm (a read of the gradients) and AdamW in place (reads
  // parameters, gradients and both moments, writes all but the gradients).
  // Its square root and division per element (in double) make it slower
  // per byte than memcpy or the add kernel on a CPU: its own class.
  double optEff;
  {
    std::vector<float> param(elems, 0.5f), grad(elems, 1e-3f), m(elems, 0.0f),
        v(elems, 0.0f);
    float lr = 1e-3f, scale = 1.0f, norm = 0;
    int32_t step = 0;
    const float *grads[1] = {grad.data()};
    int64_t counts[1] = {elems};
    double optTime = bestOf(reps, [&] {
      braid_rt_sum_squares_f32(nullptr, grads, counts, 1, &norm);
      braid_rt_adamw_update_f32(nullptr, param.data(), grad.data(), m.data(),
                                v.data(), &lr, &step, &scale, elems, 0.9, 0.999,
                                1e-8, 0.01, param.data(), m.data(), v.data());
    });
    double optBw = 8 * bytes / optTime;
    optEff = std::min(1.0, optBw / copyBw);
    log << formatv("calibrate: optimizer step (gradient norm and AdamW, 32 "
                   "bytes an element) {0:F2} GB/s (efficiency {1:F3})\n",
                   optBw / 1e9, optEff);
  }

  // Row-wise reductions: the layer norm and its input gradient over rows of
  // a layer's width, the softmax, the cross-entropy and its gradient over
  // rows of a head's vocabulary (the models trained here: 256 tokens,
  // hidden 256, vocabulary 4096), each its bytes as the cost interface
  // counts them (operands and results) over its time; the harmonic mean
  // over memcpy's bandwidth of the norms (the row-wise class) and of the
  // loss and its gradient (the loss class; equal bytes through each, as
  // for the memory class). The softmax is printed for comparison.
  double rowEff, lossEff;
  {
    int64_t rows = 256, width = 256, vocab = options.quick ? 1024 : 4096;
    std::vector<float> in(rows * vocab), dy(rows * vocab), res(rows * vocab),
        scale(width, 1.0f), bias(width, 0.0f);
    for (size_t i = 0; i < in.size(); ++i) {
      in[i] = float(i % 97) * 0.01f;
      dy[i] = float(i % 13) * 0.1f;
    }
    std::vector<int32_t> labels(rows);
    for (int64_t r = 0; r < rows; ++r)
      labels[r] = int32_t(r * 7 % vocab);
    float loss = 0, grad = 1;
    double f = sizeof(float), rc = double(rows) * width,
           rv = double(rows) * vocab;
    // Which mean a kernel's rate goes to: the norms (row-wise), the loss
    // and its gradient (loss), or none (the softmax: printed; the models
    // here run it inside the attention kernel only).
    enum Mean { RowWise, Loss, Printed };
    struct Kernel {
      const char *name;
      double bytes;
      std::function<void()> fn;
      Mean mean = RowWise;
    };
    Kernel kernels[] = {
        {"layer_norm", (2 * rc + 2 * width) * f,
         [&] {
           braid_rt_layer_norm_f32(nullptr, in.data(), scale.data(),
                                   bias.data(), rows, width, 1e-5, res.data());
         }},
        {"layer_norm_grad", (3 * rc + width) * f,
         [&] {
           braid_rt_layer_norm_grad_f32(nullptr, in.data(), scale.data(),
                                        dy.data(), rows, width, 1e-5,
                                        res.data());
         }},
        {"softmax", 2 * rv * f,
         [&] {
           braid_rt_softmax_f32(nullptr, in.data(), rows, vocab, 1, res.data());
         },
         Printed},
        {"cross_entropy", (rv + rows + 1) * f,
         [&] {
           (void)braid_rt_cross_entropy_f32(nullptr, in.data(), labels.data(),
                                            rows, vocab, &loss);
         },
         Loss},
        {"cross_entropy_grad", (2 * rv + rows + 1) * f,
         [&] {
           (void)braid_rt_cross_entropy_grad_f32(nullptr, in.data(),
                                                 labels.data(), &grad, rows,
                                                 vocab, res.data());
         },
         Loss},
    };
    // Harmonic means: the norms (row-wise), the loss and its gradient
    // (loss).
    double inverse[3] = {0, 0, 0};
    int count[3] = {0, 0, 0};
    std::string rates;
    for (Kernel &k : kernels) {
      double bw = k.bytes / perCall(reps, 0.02, k.fn);
      inverse[k.mean] += 1 / bw;
      ++count[k.mean];
      rates +=
          formatv("{0}{1} {2:F2}", rates.empty() ? "" : ", ", k.name, bw / 1e9)
              .str();
    }
    rowEff = std::min(1.0, count[RowWise] / inverse[RowWise] / copyBw);
    lossEff = std::min(1.0, count[Loss] / inverse[Loss] / copyBw);
    log << formatv("calibrate: row-wise, {0} rows (width {1}, vocabulary "
                   "{2}): {3} GB/s (row-wise efficiency {4:F3}, loss "
                   "{5:F3})\n",
                   rows, width, vocab, rates, rowEff, lossEff);
  }

  // A kernel's fixed cost: tiny calls (8 elements: add, GELU, layer norm,
  // softmax; a 2x2 matmul), whose work is negligible; their mean.
  double overhead;
  {
    std::vector<float> a(8, 0.5f), b(8, 0.25f), c(8), ones(8, 1.0f),
        zeros(8, 0.0f);
    int64_t eight[1] = {8}, two[2] = {2, 2};
    double sum = 0;
    int n = 0;
    for (const std::function<void()> &fn :
         std::initializer_list<std::function<void()>>{
             [&] {
               braid_rt_add_f32(nullptr, a.data(), b.data(), 1, eight, 1, eight,
                                c.data());
             },
             [&] {
               braid_rt_gelu_f32(nullptr, a.data(), 8, BRAID_RT_GELU_TANH,
                                 c.data());
             },
             [&] {
               braid_rt_layer_norm_f32(nullptr, a.data(), ones.data(),
                                       zeros.data(), 1, 8, 1e-5, c.data());
             },
             [&] {
               braid_rt_softmax_f32(nullptr, a.data(), 1, 8, 1, c.data());
             },
             [&] {
               braid_rt_matmul_f32(nullptr, a.data(), b.data(), 2, two, 2, two,
                                   0, 0, c.data());
             }}) {
      sum += perCall(reps, 0.01, fn);
      ++n;
    }
    double tiny = sum / n;
    // In a program a kernel's fixed cost is more than its call: small
    // products run below the GEMM rate, each kernel starts on cold
    // caches. A GPT layer's forward kernels at 1 and 4 sequences: time is
    // fixed + per-sample work, t(4) - t(1) = 3 x per-sample, so the fixed
    // part is (4 t(1) - t(4)) / 3, per kernel.
    double one = layerForward(1, reps), four = layerForward(4, reps);
    double fixed = (4 * one - four) / 3 / kLayerKernels;
    overhead = std::max(tiny, fixed);
    log << formatv("calibrate: kernel overhead: tiny calls (add, GELU, layer "
                   "norm, softmax, matmul) {0:F3} us; a GPT layer's forward "
                   "({1} kernels, hidden 128, sequence 64) {2:F3} ms at batch "
                   "1, {3:F3} ms at batch 4: {4:F3} us fixed per kernel\n",
                   tiny * 1e6, kLayerKernels, one * 1e3, four * 1e3,
                   fixed * 1e6);
  }

  hw.peakFlops["f32"] = peak;
  hw.efficiency[(int)OpClass::Matmul] = matmulEff;
  hw.efficiency[(int)OpClass::Attention] = std::max(1e-3, attnEff);
  hw.efficiency[(int)OpClass::AttentionBackward] = std::max(1e-3, attnBackEff);
  hw.attentionBandwidth = attnF.bandwidth;
  hw.attentionBackwardBandwidth = attnB.bandwidth;
  hw.efficiency[(int)OpClass::Memory] = memEff;
  hw.efficiency[(int)OpClass::RowWise] = std::max(1e-4, rowEff);
  hw.efficiency[(int)OpClass::Loss] = std::max(1e-4, lossEff);
  hw.efficiency[(int)OpClass::Optimizer] = std::max(1e-4, optEff);
  hw.efficiency[(int)OpClass::Transcendental] = std::max(1e-4, transEff);
  hw.kernelOverhead = overhead;
  // Not measured: how Braid's compiled layers keep activations for the
  // backward (a copy into the repeat's stack in F, one out of it in B).
  hw.savedActivationCopies = 2;
  hw.memoryBandwidth = copyBw;
  // A device is one rank with the placement's threads (those the kernels
  // above ran with). More ranks than that share the cores: the node holds
  // --ranks devices,
  // of which cores / threads compute at once.
  unsigned cores = placement.cores, threads = placement.threads;
  unsigned slots = std::max(1u, cores / threads);
  hw.devicesPerNode = std::max<int>(slots, options.ranks);
  if ((unsigned)options.ranks > slots)
    hw.concurrentDevicesPerNode = slots;
  // /proc/meminfo's MemTotal, shared by the ranks of the machine.
  double total = 0;
  {
    std::ifstream meminfo("/proc/meminfo");
    std::string key;
    double kb;
    std::string unit;
    while (meminfo >> key >> kb >> unit)
      if (key == "MemTotal:") {
        total = kb * 1024;
        break;
      }
  }
  hw.deviceMemory = total > 0 ? total / hw.devicesPerNode : 1;

  // Collectives on `ranks` ranks.
  std::string ranks = std::to_string(options.ranks);
  // Root in containers, and more ranks than cores where asked.
  std::vector<std::string> placementArgs = placement.getMpirunArgs();
  std::vector<llvm::StringRef> launcher = {
      *mpirunPath, "-n", ranks, "--allow-run-as-root", "--oversubscribe"};
  launcher.insert(launcher.end(), placementArgs.begin(), placementArgs.end());
  // Runs `args` (the launcher's, then a program's) and returns its stdout.
  auto runRanks = [&](llvm::ArrayRef<llvm::StringRef> args,
                      llvm::StringRef what)
      -> llvm::Expected<std::unique_ptr<llvm::MemoryBuffer>> {
    llvm::SmallString<128> outPath;
    if (std::error_code ec = llvm::sys::fs::createTemporaryFile(
            "braid-plan-ranks", "txt", outPath))
      return llvm::createStringError("calibrate: cannot create a temporary "
                                     "file: %s",
                                     ec.message().c_str());
    std::optional<llvm::StringRef> redirects[] = {std::nullopt, outPath.str(),
                                                  std::nullopt};
    std::string errMsg;
    log << "calibrate: " << llvm::join(args, " ") << "\n";
    int rc =
        llvm::sys::ExecuteAndWait(*mpirunPath, args, std::nullopt, redirects,
                                  /*SecondsToWait=*/600, 0, &errMsg);
    auto buffer = llvm::MemoryBuffer::getFile(outPath);
    llvm::sys::fs::remove(outPath);
    if (rc != 0)
      return llvm::createStringError(
          "calibrate: the %s failed (exit %d%s%s)", what.str().c_str(), rc,
          errMsg.empty() ? "" : ": ", errMsg.c_str());
    if (!buffer)
      return llvm::createStringError("calibrate: no output of the %s",
                                     what.str().c_str());
    return std::move(*buffer);
  };
  std::vector<llvm::StringRef> args = launcher;
  args.push_back(options.self);
  args.push_back("--calibrate-comm-worker");
  if (options.quick)
    args.push_back("--quick");
  if (hw.concurrentDevicesPerNode > 0)
    args.push_back("--shared-cores");

  // Per kind and size, the fastest time of any attempt. On a busy machine
  // one run's timings can be noise (time falling with size); another run
  // of the workers then gives each size more chances.
  std::map<std::string, std::map<double, double>> best;
  // Ranks sharing cores: per kind and size, each run's median round.
  std::map<std::string, std::map<double, std::vector<double>>> medians;
  // The descheduled wait of each timed pair, of the last run of the workers.
  std::vector<double> waits;
  LinkLevel level;
  std::string fitFailure;
  // Kinds whose median rounds did not grow with size: fitted to the
  // fastest rounds instead.
  std::set<int> fellBack;
  // Ranks sharing cores: a collective's time is bimodal (2 MB over 4
  // ranks on 2 cores here: 0.9 ms when the scheduler keeps the ranks'
  // turns in step, 2.2-3.2 ms in most rounds, after compute as back to
  // back; docs/planner.md), and a step meets the typical one: the links
  // are fitted to the median round (the median of the runs' medians),
  // not the fastest.
  bool typical = hw.concurrentDevicesPerNode > 0;
  // Per size of `name`, the times fitted: the fastest, or the typical.
  auto fittedTimes = [&](const std::string &name, bool median) {
    if (!median)
      return best[name];
    std::map<double, double> times;
    for (auto &[bytes, runs] : medians[name]) {
      std::vector<double> sorted = runs;
      std::sort(sorted.begin(), sorted.end());
      times[bytes] = sorted[sorted.size() / 2];
    }
    return times;
  };
  auto samplesOf = [](const std::map<double, double> &times) {
    std::vector<TimingSample> samples;
    for (auto &[bytes, seconds] : times)
      samples.push_back({bytes, seconds});
    return samples;
  };
  const int attempts = 3;
  for (int attempt = 1; attempt <= attempts; ++attempt) {
    fitFailure.clear();
    waits.clear();
    auto buffer = runRanks(args, "collective timings");
    if (!buffer)
      return buffer.takeError();
    llvm::SmallVector<llvm::StringRef> lines;
    (*buffer)->getBuffer().split(lines, '\n');
    for (llvm::StringRef line : lines) {
      llvm::SmallVector<llvm::StringRef> f;
      line.trim().split(f, ' ', -1, false);
      double bytes, seconds;
      if (f.size() != 3 || f[1].getAsDouble(bytes) || f[2].getAsDouble(seconds))
        continue;
      if (f[0] == "descheduled_wait") {
        waits.push_back(seconds);
        continue;
      }
      if (f[0].consume_front("median:")) {
        medians[f[0].str()][bytes].push_back(seconds);
        continue;
      }
      auto [it, inserted] = best[f[0].str()].try_emplace(bytes, seconds);
      if (!inserted)
        it->second = std::min(it->second, seconds);
    }
    fellBack.clear();
    for (int k = 0; k < kNumCollectiveKinds; ++k) {
      CollectiveKind kind = CollectiveKind(k);
      std::string name = getCollectiveKindName(kind).str();
      llvm::Expected<LinkCost> fit = fitLinkCost(
          kind, options.ranks, samplesOf(fittedTimes(name, typical)));
      // A few rounds' medians on a busy machine can fail to grow with
      // size where the fastest rounds still do (CI, with other tests
      // running beside it): those are a bound the kind cannot beat, better
      // than no file.
      if (!fit && typical) {
        llvm::consumeError(fit.takeError());
        fit = fitLinkCost(kind, options.ranks, samplesOf(best[name]));
        if (fit)
          fellBack.insert(k);
      }
      if (!fit) {
        fitFailure = llvm::toString(fit.takeError());
        break;
      }
      level.costs[k] = *fit;
    }
    if (fitFailure.empty())
      break;
    if (attempt < attempts)
      log << "calibrate: " << fitFailure << "; timing again\n";
  }
  if (!fitFailure.empty())
    return llvm::createStringError(
        llvm::formatv("calibrate: {0} (after {1} runs; is the machine very "
                      "busy?)",
                      fitFailure, attempts)
            .str());
  for (int k = 0; k < kNumCollectiveKinds; ++k) {
    CollectiveKind kind = CollectiveKind(k);
    std::string name = getCollectiveKindName(kind).str();
    bool median = typical && !fellBack.count(k);
    std::map<double, double> fitted = fittedTimes(name, median);
    // Beside the typical fit, the fastest rounds' for comparison.
    std::string fastest;
    if (typical && !median)
      fastest = "; the median rounds did not grow with size";
    if (median) {
      if (llvm::Expected<LinkCost> f =
              fitLinkCost(kind, options.ranks, samplesOf(best[name])))
        fastest = formatv("; fastest rounds: alpha {0:F2} us, beta {1:F2} "
                          "GB/s",
                          f->alpha * 1e6, f->beta / 1e9)
                      .str();
      else
        llvm::consumeError(f.takeError());
    }
    log << formatv("calibrate: {0} on {1} ranks: alpha {2:F2} us, beta "
                   "{3:F2} GB/s ({4} sizes{5}{6})\n",
                   name, options.ranks, level.costs[k].alpha * 1e6,
                   level.costs[k].beta / 1e9, fitted.size(),
                   median    ? ", median rounds"
                   : typical ? ", fastest rounds"
                             : "",
                   fastest);
    // Say when the ring model does not explain the timings: on a busy
    // machine they are noise, and so is the fit.
    double worst = 0, worstBytes = 0;
    for (auto &[bytes, seconds] : fitted) {
      double model =
          getCollectiveTime(level.costs[k], kind, bytes, options.ranks);
      double err = std::abs(model - seconds) / seconds;
      if (err > worst) {
        worst = err;
        worstBytes = bytes;
      }
    }
    if (worst > 1.0)
      log << formatv("calibrate: warning: the fit misses the {0} timing of "
                     "{1:F0} bytes by {2:F0}%; the machine may be busy: "
                     "calibrate again when it is quiet\n",
                     name, worstBytes, worst * 100);
  }
  if (!waits.empty()) {
    // The median pair, and the quartiles to show how far one pair is worth.
    std::sort(waits.begin(), waits.end());
    auto quantile = [&](double q) {
      return waits[size_t(q * double(waits.size() - 1) + 0.5)];
    };
    double wait = std::max(0.0, quantile(0.5));
    hw.descheduledWait = wait;
    log << formatv("calibrate: {0} ranks sharing {1} cores: a collective "
                   "waits {2:F3} ms for descheduled peers (median of {3} "
                   "pairs; quartiles {4:F3} to {5:F3} ms)\n",
                   options.ranks, hw.concurrentDevicesPerNode, wait * 1e3,
                   waits.size(), quantile(0.25) * 1e3, quantile(0.75) * 1e3);
  }
  hw.intraNode = level;
  hw.intraNode.name = "intra_node";
  hw.interNode = level;
  hw.interNode.name = "inter_node";

  // What a rank holds beside its program's buffers (workspace_bytes): the
  // memory probe's peak resident set less its tensors, on the same ranks
  // under the same launcher and threads; the largest over the ranks (a
  // plan must fit on every one).
  {
    llvm::SmallString<128> dir;
    llvm::sys::path::system_temp_directory(/*ErasedOnReboot=*/true, dir);
    llvm::sys::path::append(dir, "braid-plan-memory");
    if (std::error_code ec = llvm::sys::fs::createUniqueDirectory(dir, dir))
      return llvm::createStringError("calibrate: cannot create a temporary "
                                     "directory: %s",
                                     ec.message().c_str());
    llvm::scope_exit removeDir([&] { llvm::sys::fs::remove_directories(dir); });
    llvm::Expected<std::string> probe = buildMemoryProbe(dir);
    if (!probe)
      return probe.takeError();
    std::vector<llvm::StringRef> probeArgs = launcher;
    probeArgs.push_back(*probe);
    probeArgs.push_back(ranks);
    auto buffer = runRanks(probeArgs, "memory probe");
    if (!buffer)
      return buffer.takeError();
    std::vector<double> fixed(options.ranks, -1);
    llvm::SmallVector<llvm::StringRef> lines;
    (*buffer)->getBuffer().split(lines, '\n');
    for (llvm::StringRef line : lines) {
      llvm::SmallVector<llvm::StringRef> f;
      line.trim().split(f, ' ', -1, false);
      int rank;
      double peak, tensors;
      if (f.size() != 4 || f[0] != "fixed_memory" ||
          f[1].getAsInteger(10, rank) || f[2].getAsDouble(peak) ||
          f[3].getAsDouble(tensors) || rank < 0 || rank >= options.ranks)
        continue;
      fixed[rank] = peak - tensors;
    }
    // A rank missing, or a peak below the tensors it holds, is a broken
    // probe, not a measurement.
    if (llvm::any_of(fixed, [](double bytes) { return bytes <= 0; }))
      return llvm::createStringError(
          "calibrate: the memory probe did not print every rank's peak "
          "resident set above its tensors:\n%s",
          (*buffer)->getBuffer().str().c_str());
    hw.workspaceBytes = *std::max_element(fixed.begin(), fixed.end());
    std::string perRank;
    for (double bytes : fixed)
      perRank +=
          formatv("{0}{1:F2}", perRank.empty() ? "" : ", ", bytes / (1 << 20))
              .str();
    log << formatv("calibrate: fixed memory per rank (peak resident set less "
                   "the tensors) on {0} ranks: {1} MiB; workspace {2:F2} "
                   "MiB\n",
                   options.ranks, perRank, hw.workspaceBytes / (1 << 20));
  }
  hw.description =
      formatv("This machine, measured by braid-plan --calibrate{0}: {1} "
              "cores, {2} thread(s) per rank, so {3} device(s) (ranks) per "
              "node computing at once{4}; ranks: {5}",
              options.quick ? " --quick" : "", cores, threads, slots,
              hw.concurrentDevicesPerNode
                  ? formatv(", {0} ranks sharing them", hw.devicesPerNode).str()
                  : std::string(),
              placement.describe())
          .str();
  // Say which links are not what the source says for ranks sharing cores.
  if (!fellBack.empty()) {
    llvm::SmallVector<std::string> kinds;
    for (int k : fellBack)
      kinds.push_back(getCollectiveKindName(CollectiveKind(k)).str());
    hw.description += formatv("; links of {0}: fastest rounds (their median "
                              "rounds did not grow with size)",
                              llvm::join(kinds, ", "))
                          .str();
  }
  hw.source =
      "threads per rank: as braid-run gives them (--threads, else "
      "$OMP_NUM_THREADS, else cores / ranks, at least 1; the description "
      "says which), set as OMP_NUM_THREADS and OPENBLAS_NUM_THREADS for the "
      "kernels timed in the calibrating process, the collectives' ranks and "
      "the memory probe's, the ranks bound and oversubscribed as braid-run "
      "does; peak_flops.f32: the best sgemm rate (runtime matmul kernel, "
      "square 64..2048); efficiency.matmul: the mean rate of a training step's "
      "products (256 tokens, hidden 128, MLP 512; F, B and W forms) over "
      "it; efficiency.attention and efficiency.attention_backward: the "
      "attention kernels' (forward; backward, all three gradients at once) "
      "dense-counted products' rate over it, and attention_bandwidth and "
      "attention_backward_bandwidth their bytes' rate, both fitted to the "
      "kernels timed at sequence 64 and 256 over 1024 tokens (4 heads of "
      "64, causal); memory_bandwidth: memcpy (read + write); "
      "efficiency.memory: "
      "the add kernel's bandwidth over memcpy's; efficiency.transcendental: "
      "the harmonic mean bandwidth of GELU (tanh) and its gradient over "
      "memcpy's; efficiency.rowwise: the harmonic mean bandwidth of "
      "the layer norm and its gradient (256 x 256) over memcpy's; "
      "efficiency.loss: that of cross-entropy and its gradient (256 x "
      "4096); efficiency.optimizer: the gradient norm and AdamW's update "
      "(32 bytes an element, in place) over memcpy's; kernel_overhead: the "
      "fixed part per kernel of a GPT layer's forward kernels timed at batch "
      "1 and 4 (at least a tiny call's time); descheduled_wait (ranks "
      "sharing cores): per round of about a millisecond of GEMMs, the time "
      "an all_reduce of 1 KiB adds beyond its own, the median of 9 pairs "
      "of runs with and without it (3 with --quick); saved_activation_copies: "
      "2, how Braid's compiled layers keep activations (not measured); "
      "links: least-squares fits "
      "of the ring model to MPI collectives on this machine (both levels "
      "alike), each size's fastest of 20 rounds (12 with --quick), or where "
      "ranks share cores its median round (the median over the runs of "
      "the workers), which is what a step meets; devices_per_node: cores / "
      "threads per rank, or --ranks if "
      "more (then concurrent_devices_per_node: cores / threads per rank); "
      "device_memory: MemTotal / devices_per_node; workspace_bytes: what "
      "a rank holds beside its program's buffers (executable, MPI, "
      "OpenBLAS, OpenMP, the runtime), the largest over the ranks of the "
      "peak resident set of a program linked as braidc links one, run on "
      "the ranks (context, mesh, three steps of a GPT layer's kernels and "
      "a gradient all_reduce), less its tensors";
  return hw;
}

int runCommWorker(int argc, char **argv) {
  bool quickMode = false, sharedCores = false;
  for (int i = 2; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0)
      quickMode = true;
    if (std::strcmp(argv[i], "--shared-cores") == 0)
      sharedCores = true;
  }
  braid_rt_context_t *ctx = nullptr;
  if (braid_rt_context_create(nullptr, &argc, &argv, &ctx) != BRAID_RT_OK) {
    fprintf(stderr, "braid-plan: %s\n", braid_rt_context_last_error(nullptr));
    return 1;
  }
  braid_rt_comm_t *world = braid_rt_context_world(ctx);
  int rank = braid_rt_context_rank(ctx), size = braid_rt_context_size(ctx);
  size_t maxCount = quickMode ? (size_t(1) << 18) : (size_t(1) << 22);
  // Rounds over every kind and size, one timing of each per round, the
  // fastest kept: on a shared machine a busy spell then costs one round of
  // every size rather than all repetitions of a few sizes.
  int rounds = quickMode ? 12 : 20;
  std::vector<float> a(maxCount * size, 1.0f), b(maxCount * size);
  struct Timing {
    const char *name;
    size_t count; // elements of the full tensor
    std::function<bool()> fn;
    double best = 1e30;
    std::vector<double> runs = {}; // every round's
  };
  std::vector<Timing> timings;
  for (size_t count = 256; count <= maxCount; count *= 4) {
    timings.push_back({"all_reduce", count, [&, count] {
                         return braid_rt_all_reduce_sum_f32(world, a.data(),
                                                            count, nullptr) !=
                                BRAID_RT_OK;
                       }});
    // The full tensor is count elements: each rank holds count / size.
    size_t share = count / size;
    timings.push_back({"all_gather", share * size, [&, share] {
                         return braid_rt_all_gather_f32(world, a.data(),
                                                        b.data(), share,
                                                        nullptr) != BRAID_RT_OK;
                       }});
    timings.push_back({"reduce_scatter", share * size, [&, share] {
                         return braid_rt_reduce_scatter_sum_f32(
                                    world, a.data(), b.data(), share,
                                    nullptr) != BRAID_RT_OK;
                       }});
    // Rank 0 sends to rank 1; the others idle.
    timings.push_back({"send_recv", count, [&, count] {
                         if (rank == 0)
                           return braid_rt_send_f32(world, a.data(), count, 1,
                                                    7, nullptr) != BRAID_RT_OK;
                         if (rank == 1)
                           return braid_rt_recv_f32(world, b.data(), count, 0,
                                                    7, nullptr) != BRAID_RT_OK;
                         return false;
                       }});
  }
  int status = 0;
  for (Timing &t : timings) // warm-up
    for (int i = 0; i < 2 && !status; ++i)
      status |= t.fn();
  for (int round = 0; round < rounds && !status; ++round)
    for (Timing &t : timings) {
      if (status)
        break;
      MPI_Barrier(MPI_COMM_WORLD);
      double t0 = now();
      status |= t.fn();
      double elapsed = now() - t0, slowest = 0;
      MPI_Allreduce(&elapsed, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      t.best = std::min(t.best, slowest);
      t.runs.push_back(slowest);
    }
  // Ranks sharing cores: rounds of compute (GEMMs of about a millisecond
  // alone) each followed by a small all_reduce, against the same rounds
  // with no collective between them (each rank computes when it gets a
  // core; one barrier at the end). The difference per round, less the
  // all_reduce's own time, is what a collective waits for peers that are
  // descheduled. Timed in pairs, the order alternating so that a drift of
  // the machine falls on both sides, and the median pair kept: the
  // difference of the two sides' fastest runs swung threefold between
  // idle calibrations hours apart (docs/planner.md, run i).
  std::vector<double> waits;
  if (sharedCores && !status) {
    int64_t n = 128, shape[2] = {n, n};
    std::vector<float> ga(n * n, 0.5f), gb(n * n, 0.25f), gc(n * n);
    auto work = [&] {
      for (int i = 0; i < 24; ++i)
        braid_rt_matmul_f32(nullptr, ga.data(), gb.data(), 2, shape, 2, shape,
                            0, 0, gc.data());
    };
    int syncRounds = quickMode ? 20 : 100;
    auto timed = [&](bool sync) {
      MPI_Barrier(MPI_COMM_WORLD);
      double t0 = now();
      for (int i = 0; i < syncRounds && !status; ++i) {
        work();
        if (sync)
          status |= braid_rt_all_reduce_sum_f32(world, a.data(), 256,
                                                nullptr) != BRAID_RT_OK;
      }
      MPI_Barrier(MPI_COMM_WORLD);
      double elapsed = now() - t0, slowest = 0;
      MPI_Allreduce(&elapsed, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      return slowest;
    };
    double allReduce = timings.front().best; // 1 KiB
    for (int i = 0; i < (quickMode ? 3 : 9) && !status; ++i) {
      double free, synced;
      if (i % 2) {
        synced = timed(true);
        free = timed(false);
      } else {
        free = timed(false);
        synced = timed(true);
      }
      waits.push_back((synced - free) / syncRounds - allReduce);
    }
  }
  if (rank == 0 && !status) {
    for (const Timing &t : timings)
      printf("%s %.0f %.9g\n", t.name, double(t.count * sizeof(float)), t.best);
    // Ranks sharing cores: the median round too (see the parent).
    for (Timing &t : timings)
      if (sharedCores && !t.runs.empty()) {
        std::sort(t.runs.begin(), t.runs.end());
        printf("median:%s %.0f %.9g\n", t.name, double(t.count * sizeof(float)),
               t.runs[t.runs.size() / 2]);
      }
    // One line a pair: the parent takes the median and reports the spread.
    for (double w : waits)
      printf("descheduled_wait 0 %.9g\n", w);
  }
  if (status)
    fprintf(stderr, "braid-plan: rank %d: %s\n", rank,
            braid_rt_context_last_error(ctx));
  fflush(stdout);
  braid_rt_context_destroy(ctx);
  return status;
}
