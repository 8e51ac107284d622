//===- Calibration.cpp - Fitting alpha and beta to timings ----------------===//

#include "braid/Planner/Calibration.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <vector>

using namespace mlir::braid::plan;

llvm::Expected<LinkCost>
mlir::braid::plan::fitLinkCost(CollectiveKind kind, int n,
                               llvm::ArrayRef<TimingSample> samples) {
  std::set<double> sizes;
  for (const TimingSample &s : samples) {
    if (!(s.seconds > 0) || !(s.bytes >= 0))
      return llvm::createStringError(
          "fitting %s: a timing of %g bytes took %g s (expected a positive "
          "time)",
          getCollectiveKindName(kind).str().c_str(), s.bytes, s.seconds);
    sizes.insert(s.bytes);
  }
  if (sizes.size() < 2)
    return llvm::createStringError(
        "fitting %s: need timings of at least two sizes, got %zu",
        getCollectiveKindName(kind).str().c_str(), sizes.size());
  if (n < 2 && kind != CollectiveKind::SendRecv)
    return llvm::createStringError("fitting %s: need at least 2 ranks",
                                   getCollectiveKindName(kind).str().c_str());
  // A message is never faster than a larger one, so the fastest time of
  // any larger size bounds each size's: on a busy machine one slow small
  // size would otherwise tilt the fit (even to a negative slope).
  std::map<double, double> fastest;
  for (const TimingSample &s : samples) {
    auto [it, inserted] = fastest.try_emplace(s.bytes, s.seconds);
    if (!inserted)
      it->second = std::min(it->second, s.seconds);
  }
  std::vector<TimingSample> bounded;
  double bound = INFINITY;
  for (auto it = fastest.rbegin(); it != fastest.rend(); ++it) {
    bound = std::min(bound, it->second);
    bounded.push_back({it->first, bound});
  }
  samples = bounded;
  // t = a + slope * bytes, least squares in relative error (weights
  // 1 / t^2): timings span four orders of magnitude, and plain least
  // squares would let the largest sizes (and their noise) decide the
  // latency too.
  double sw = 0, mx = 0, my = 0;
  for (const TimingSample &s : samples) {
    double w = 1 / (s.seconds * s.seconds);
    sw += w;
    mx += w * s.bytes;
    my += w * s.seconds;
  }
  mx /= sw;
  my /= sw;
  double sxy = 0, sxx = 0;
  for (const TimingSample &s : samples) {
    double w = 1 / (s.seconds * s.seconds);
    sxy += w * (s.bytes - mx) * (s.seconds - my);
    sxx += w * (s.bytes - mx) * (s.bytes - mx);
  }
  double slope = sxy / sxx;
  if (!(slope > 0) || !std::isfinite(slope))
    return llvm::createStringError(
        "fitting %s: time does not grow with size (slope %g s/byte)",
        getCollectiveKindName(kind).str().c_str(), slope);
  double intercept = std::max(0.0, my - slope * mx);
  double steps = 1, share = 1;
  if (kind != CollectiveKind::SendRecv) {
    steps = n - 1;
    share = double(n - 1) / n;
    if (kind == CollectiveKind::AllReduce) {
      steps *= 2;
      share *= 2;
    }
  }
  return LinkCost{intercept / steps, share / slope};
}

static std::string plural(int n, llvm::StringRef word) {
  return llvm::formatv("{0} {1}{2}", n, word, n == 1 ? "" : "s").str();
}

llvm::Expected<RankPlacement> mlir::braid::plan::chooseRankPlacement(
    int ranks, int cores, int threadsFlag,
    std::optional<std::string> ompNumThreads) {
  RankPlacement p;
  p.ranks = std::max(1, ranks);
  p.cores = std::max(1, cores);
  if (threadsFlag > 0) {
    p.threads = threadsFlag;
    p.threadsFrom = "--threads";
  } else if (ompNumThreads) {
    int n = 0;
    if (llvm::StringRef(*ompNumThreads).trim().getAsInteger(10, n) || n < 1)
      return llvm::createStringError(
          "$OMP_NUM_THREADS must be a positive number of threads, got '%s'",
          ompNumThreads->c_str());
    p.threads = n;
    p.threadsFrom = "$OMP_NUM_THREADS";
  } else {
    p.threads = std::max(1, p.cores / p.ranks);
    p.threadsFrom = "cores / ranks";
  }
  p.bound = p.ranks > 1 && p.ranks * p.threads <= p.cores;
  return p;
}

std::vector<std::string> RankPlacement::getMpirunArgs() const {
  std::string t = std::to_string(threads);
  std::vector<std::string> args = {"-x", "OMP_NUM_THREADS=" + t, "-x",
                                   "OPENBLAS_NUM_THREADS=" + t};
  // Waiting ranks give their core away instead of spinning.
  if (oversubscribed())
    args.insert(args.end(), {"--mca", "mpi_yield_when_idle", "1"});
  // Hardware threads as the unit, so that the count matches the cores
  // counted here on machines with SMT too.
  if (bound)
    args.insert(args.end(), {"--use-hwthread-cpus", "--map-by", "slot:PE=" + t,
                             "--bind-to", "hwthread"});
  else
    args.insert(args.end(), {"--bind-to", "none"});
  return args;
}

std::string RankPlacement::describe() const {
  std::string text =
      llvm::formatv("{0} x {1} on {2}{3}, {4}", plural(ranks, "rank"),
                    plural(threads, "thread"), plural(cores, "core"),
                    ranks * threads > cores ? " (oversubscribed)" : "",
                    bound ? "each bound to " + plural(threads, "core")
                          : std::string("not bound"))
          .str();
  return text + " (threads from " + threadsFrom + ")";
}
