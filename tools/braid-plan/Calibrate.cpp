//===- Calibrate.cpp - Measuring this machine for a hardware file ---------===//
//
// Compute: OpenBLAS sgemm through the runtime's matmul kernel on square
// matrices (the best rate is the f32 peak; the matmul efficiency is the
// rate at the sizes small models here use over that peak), the attention
// kernel (dense-counted FLOPs over the peak), memcpy (the memory bandwidth)
// and the add kernel (its bandwidth over memcpy's is the memory-bound
// efficiency). Network: all_reduce, all_gather, reduce_scatter and
// send/recv over a range of sizes on `ranks` MPI ranks of this machine,
// each fitted to the ring model (fitLinkCost). One machine has one link
// level, so both levels get the same figures.
//
//===----------------------------------------------------------------------===//

#include "Calibrate.h"

#include "braid/Planner/Calibration.h"
#include "braid/rt/collectives.h"
#include "braid/rt/context.h"
#include "braid/rt/kernels.h"
#include "braid/rt/mesh.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
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

llvm::Expected<Hardware> calibrateLocal(const CalibrationOptions &options,
                                        llvm::raw_ostream &log) {
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

  // Attention: batch 1, 4 heads of 64, causal, counted dense.
  int64_t s = options.quick ? 128 : 256, h = 4, d = 64;
  std::vector<float> q(s * h * d, 0.1f), y(s * h * d);
  auto attention = [&] {
    braid_rt_attention_f32(nullptr, q.data(), q.data(), q.data(), 1, s, s, h, h,
                           d, 1, 0.125, y.data());
  };
  attention();
  double attnRate = 4.0 * s * s * h * d / bestOf(reps, attention);
  double attnEff = std::min(1.0, attnRate / peak);
  log << formatv("calibrate: attention s={0} h={1} d={2}: {3:F2} GFLOP/s "
                 "({4:F3} of peak)\n",
                 s, h, d, attnRate / 1e9, attnEff);

  // Memory: memcpy and the add kernel over arrays far larger than caches.
  int64_t elems = options.quick ? (int64_t(1) << 22) : (int64_t(1) << 24);
  std::vector<float> x(elems, 1.0f), z(elems, 2.0f), out(elems);
  double copyTime = bestOf(
      reps, [&] { std::memcpy(out.data(), x.data(), elems * sizeof(float)); });
  double copyBw = 2.0 * elems * sizeof(float) / copyTime;
  // Memory-bound kernels of a training step over the same arrays: add,
  // GELU (tanh) and layer norm over rows of 128, each its bytes (inputs
  // and output) over its time; their (harmonic) mean over memcpy's
  // bandwidth.
  int64_t shape[1] = {elems};
  double addTime = bestOf(reps, [&] {
    braid_rt_add_f32(nullptr, x.data(), z.data(), 1, shape, 1, shape,
                     out.data());
  });
  double geluTime = bestOf(reps, [&] {
    braid_rt_gelu_f32(nullptr, x.data(), elems, BRAID_RT_GELU_TANH, out.data());
  });
  std::vector<float> ones(128, 1.0f), zeros(128, 0.0f);
  double normTime = bestOf(reps, [&] {
    braid_rt_layer_norm_f32(nullptr, x.data(), ones.data(), zeros.data(),
                            elems / 128, 128, 1e-5, out.data());
  });
  double bytes = elems * sizeof(float);
  double addBw = 3 * bytes / addTime, geluBw = 2 * bytes / geluTime,
         normBw = 2 * bytes / normTime;
  // Equal bytes through each kernel: the harmonic mean is their bandwidth.
  double memEff =
      std::min(1.0, 3 / (1 / addBw + 1 / geluBw + 1 / normBw) / copyBw);
  log << formatv("calibrate: memcpy {0:F2} GB/s; add {1:F2}, gelu {2:F2}, "
                 "layer_norm {3:F2} GB/s (memory efficiency {4:F3})\n",
                 copyBw / 1e9, addBw / 1e9, geluBw / 1e9, normBw / 1e9, memEff);

  hw.peakFlops["f32"] = peak;
  hw.efficiency[(int)OpClass::Matmul] = matmulEff;
  hw.efficiency[(int)OpClass::Attention] = std::max(1e-3, attnEff);
  hw.efficiency[(int)OpClass::Memory] = memEff;
  hw.memoryBandwidth = copyBw;
  // A device is one rank with the threads this process computed with:
  // OPENBLAS_NUM_THREADS, else OMP_NUM_THREADS, else every core.
  unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  unsigned threads = cores;
  for (const char *var : {"OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"})
    if (const char *v = getenv(var)) {
      int n = atoi(v);
      if (n > 0) {
        threads = n;
        break;
      }
    }
  // More ranks than that share the cores: the node holds --ranks devices,
  // of which cores / threads compute at once.
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
  hw.workspaceBytes = 64.0 * 1024 * 1024;

  // Collectives on `ranks` ranks.
  std::string mpirun = options.mpirun;
  if (mpirun.empty())
    mpirun = llvm::sys::Process::GetEnv("BRAID_MPIRUN").value_or("mpirun");
  llvm::ErrorOr<std::string> mpirunPath = llvm::sys::findProgramByName(mpirun);
  if (!mpirunPath)
    return llvm::createStringError(
        "calibrate: '%s' not found (install openmpi-bin or pass --mpirun)",
        mpirun.c_str());
  std::string ranks = std::to_string(options.ranks);
  std::vector<llvm::StringRef> args = {*mpirunPath, "-n", ranks};
  // Root in containers, and more ranks than cores where asked.
  args.push_back("--allow-run-as-root");
  args.push_back("--oversubscribe");
  args.push_back(options.self);
  args.push_back("--calibrate-comm-worker");
  if (options.quick)
    args.push_back("--quick");

  // Per kind and size, the fastest time of any attempt. On a busy machine
  // one run's timings can be noise (time falling with size); another run
  // of the workers then gives each size more chances.
  std::map<std::string, std::map<double, double>> best;
  LinkLevel level;
  std::string fitFailure;
  const int attempts = 3;
  for (int attempt = 1; attempt <= attempts; ++attempt) {
    fitFailure.clear();
    llvm::SmallString<128> outPath;
    if (std::error_code ec = llvm::sys::fs::createTemporaryFile(
            "braid-plan-comm", "txt", outPath))
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
          "calibrate: the collective timings failed (exit %d%s%s)", rc,
          errMsg.empty() ? "" : ": ", errMsg.c_str());
    if (!buffer)
      return llvm::createStringError("calibrate: no collective timings");
    llvm::SmallVector<llvm::StringRef> lines;
    (*buffer)->getBuffer().split(lines, '\n');
    for (llvm::StringRef line : lines) {
      llvm::SmallVector<llvm::StringRef> f;
      line.trim().split(f, ' ', -1, false);
      double bytes, seconds;
      if (f.size() != 3 || f[1].getAsDouble(bytes) || f[2].getAsDouble(seconds))
        continue;
      auto [it, inserted] = best[f[0].str()].try_emplace(bytes, seconds);
      if (!inserted)
        it->second = std::min(it->second, seconds);
    }
    for (int k = 0; k < kNumCollectiveKinds; ++k) {
      CollectiveKind kind = CollectiveKind(k);
      std::string name = getCollectiveKindName(kind).str();
      std::vector<TimingSample> samples;
      for (auto &[bytes, seconds] : best[name])
        samples.push_back({bytes, seconds});
      llvm::Expected<LinkCost> fit = fitLinkCost(kind, options.ranks, samples);
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
    log << formatv("calibrate: {0} on {1} ranks: alpha {2:F2} us, beta "
                   "{3:F2} GB/s ({4} sizes)\n",
                   name, options.ranks, level.costs[k].alpha * 1e6,
                   level.costs[k].beta / 1e9, best[name].size());
    // Say when the ring model does not explain the timings: on a busy
    // machine they are noise, and so is the fit.
    double worst = 0, worstBytes = 0;
    for (auto &[bytes, seconds] : best[name]) {
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
  hw.intraNode = level;
  hw.intraNode.name = "intra_node";
  hw.interNode = level;
  hw.interNode.name = "inter_node";
  hw.description =
      formatv("This machine, measured by braid-plan --calibrate{0}: {1} "
              "cores, {2} thread(s) per rank, so {3} device(s) (ranks) per "
              "node computing at once{4}",
              options.quick ? " --quick" : "", cores, threads, slots,
              hw.concurrentDevicesPerNode
                  ? formatv(", {0} ranks sharing them", hw.devicesPerNode).str()
                  : std::string())
          .str();
  hw.source =
      "peak_flops.f32: the best sgemm rate (runtime matmul kernel, square "
      "64..2048); efficiency.matmul: the mean rate of a training step's "
      "products (256 tokens, hidden 128, MLP 512; F, B and W forms) over "
      "it; efficiency.attention: the attention kernel's dense-counted rate "
      "over it; memory_bandwidth: memcpy (read + write); efficiency.memory: "
      "the harmonic mean bandwidth of the add, GELU and layer-norm kernels "
      "over memcpy's; links: least-squares fits "
      "of the ring model to MPI collectives on this machine (both levels "
      "alike); devices_per_node: cores / threads per rank, or --ranks if "
      "more (then concurrent_devices_per_node: cores / threads per rank); "
      "device_memory: MemTotal / devices_per_node; workspace: 64 MiB (an "
      "estimate)";
  return hw;
}

int runCommWorker(int argc, char **argv) {
  bool quickMode = false;
  for (int i = 2; i < argc; ++i)
    if (std::strcmp(argv[i], "--quick") == 0)
      quickMode = true;
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
    }
  if (rank == 0 && !status)
    for (const Timing &t : timings)
      printf("%s %.0f %.9g\n", t.name, double(t.count * sizeof(float)), t.best);
  if (status)
    fprintf(stderr, "braid-plan: rank %d: %s\n", rank,
            braid_rt_context_last_error(ctx));
  fflush(stdout);
  braid_rt_context_destroy(ctx);
  return status;
}
