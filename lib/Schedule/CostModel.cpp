//===- CostModel.cpp - Pass times, transfer times and memory --------------===//

#include "braid/Schedule/CostModel.h"

#include "llvm/Support/ErrorHandling.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>
#include <cstdlib>

using namespace mlir::braid::sched;

CostModel CostModel::uniform(int numRanks, int numChunks, double tf, double tb,
                             double tw, double tcomm) {
  int stages = numRanks * numChunks;
  CostModel costs;
  costs.forward.assign(stages, tf / numChunks);
  costs.backward.assign(stages, tb / numChunks);
  costs.weight.assign(stages, tw / numChunks);
  costs.comm.assign(stages > 0 ? stages - 1 : 0, tcomm);
  return costs;
}

double CostModel::getDuration(ActionKind kind, int stage) const {
  switch (kind) {
  case ActionKind::Forward:
    return forward[stage];
  case ActionKind::Backward:
    return backward[stage];
  case ActionKind::Weight:
    return weight[stage];
  case ActionKind::FullBackward:
    return backward[stage] + weight[stage];
  case ActionKind::Send:
  case ActionKind::Recv:
    return 0;
  }
  llvm_unreachable("unknown action kind");
}

double CostModel::getCommTime(int a, int b) const {
  int lo = std::min(a, b);
  if (std::abs(a - b) != 1 || lo < 0 || lo >= static_cast<int>(comm.size()))
    return 0;
  return comm[lo];
}

llvm::Error CostModel::validate(int numStages) const {
  auto check = [&](const std::vector<double> &times, llvm::StringRef what,
                   size_t expected) -> llvm::Error {
    if (times.size() != expected)
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          llvm::formatv("cost model has {0} {1} times, the schedule needs {2}",
                        times.size(), what, expected));
    for (size_t i = 0; i < times.size(); ++i)
      if (!std::isfinite(times[i]) || times[i] < 0)
        return llvm::createStringError(
            llvm::inconvertibleErrorCode(),
            llvm::formatv("{0} time of stage {1} is {2}; times must be "
                          "finite and not negative",
                          what, i, formatNumber(times[i])));
    return llvm::Error::success();
  };
  if (llvm::Error err = check(forward, "forward", numStages))
    return err;
  if (llvm::Error err = check(backward, "backward", numStages))
    return err;
  if (llvm::Error err = check(weight, "weight", numStages))
    return err;
  return check(comm, "transfer", numStages > 0 ? numStages - 1 : 0);
}

double MemoryModel::getDelta(ActionKind kind, int numChunks) const {
  double unit = 1.0 / numChunks;
  switch (kind) {
  case ActionKind::Forward:
    return unit;
  case ActionKind::Backward:
    return -(1.0 - weightFraction) * unit;
  case ActionKind::Weight:
    return -weightFraction * unit;
  case ActionKind::FullBackward:
    return -unit;
  case ActionKind::Send:
  case ActionKind::Recv:
    return 0;
  }
  llvm_unreachable("unknown action kind");
}

double MemoryModel::transformerWeightFraction(double hidden, double heads,
                                              double seq) {
  return 32 * hidden / (34 * hidden + 5 * heads * seq);
}
