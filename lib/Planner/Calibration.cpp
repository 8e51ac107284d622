//===- Calibration.cpp - Fitting alpha and beta to timings ----------------===//

#include "braid/Planner/Calibration.h"

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
