//===- AutoSchedule.cpp - Automatic zero-bubble scheduling ----------------===//
//
// The heuristic of Qi et al., "Zero Bubble Pipeline Parallelism" (ICLR 2024,
// Section 3.1), written from the paper and the facts of its reference
// implementation:
//
//   1. Warm-up: after micro-batch 0's forward, each stage runs as many extra
//      forwards as fit (memory permitting) before micro-batch 0's gradient
//      comes back to it. Walking from the last stage to the first gives the
//      time that gradient arrives on each stage. Counts are made strictly
//      decreasing along the pipeline, since a stage cannot run forwards its
//      predecessor has not produced.
//   2. Steady state, one micro-batch per round: every stage runs one F
//      (stage 0 first) and then one B (last stage first), 1F1B-style. Before
//      each, W passes are inserted while they end before the pass's input
//      arrives (they fill the bubble for free), and when memory is full.
//   3. The remaining W passes close each stage.
//
// Three choices have no clear winner, so all eight combinations are built and
// the shortest kept:
//   - warm-up: a forward may start before the gradient arrives and end after
//     it (delaying the first B), or must end before it;
//   - prioritise B: a stage two or more forwards ahead of its successor may
//     skip a forward when the time is better spent waiting for the next B;
//   - small gaps: a gap shorter than one W is filled with a W (delaying the
//     next pass slightly) or left idle, unless this stage is already the
//     least idle one, in which case it is always filled.
//
// All eight are also built under lower memory limits than the one given
// (integers down to half of it, at most 16 of them): the heuristic is not
// monotonic in the limit, and among equally short schedules Braid prefers
// the shorter makespan and then the smaller peak memory.
//
// Times in this construction are exactly the simulator's (transfer latency
// between stages, no overlap on a rank), so the cost compared is the
// simulated one.
//
//===----------------------------------------------------------------------===//

#include "braid/Schedule/Generators.h"
#include "braid/Schedule/Simulator.h"

#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <cmath>
#include <limits>

using namespace mlir::braid::sched;

namespace {
enum Pass { F = 0, B = 1, W = 2 };

/// How many limits below the requested one the search also tries.
constexpr int kMaxLowerLimits = 16;

struct Variant {
  bool allowBubbleBeforeFirstB;
  bool prioritizeB;
  bool fillSmallGaps;
};

/// Builds one schedule for one variant, placing passes one at a time and
/// tracking when each would run.
class GreedyBuilder {
public:
  GreedyBuilder(const CostModel &costs, int numMicrobatches,
                const AutoScheduleOptions &options)
      : costs(costs), p(costs.getNumStages()), m(numMicrobatches),
        limit(options.memoryLimit), memory(options.memory) {}

  /// The compute order of every stage, or nothing if the variant cannot keep
  /// memory under the limit.
  std::optional<std::vector<std::vector<Action>>> build(Variant variant);

private:
  double getCost(Pass pass, int stage) const {
    return pass == F   ? costs.forward[stage]
           : pass == B ? costs.backward[stage]
                       : costs.weight[stage];
  }
  double getMemoryDelta(Pass pass) const {
    return memory.getDelta(pass == F   ? ActionKind::Forward
                           : pass == B ? ActionKind::Backward
                                       : ActionKind::Weight,
                           /*numChunks=*/1);
  }
  bool fits(int stage, Pass pass) const {
    return memoryNow[stage] + getMemoryDelta(pass) <= limit + kEpsilon;
  }
  double getComm(int stage) const {
    return costs.getCommTime(stage, stage + 1);
  }
  /// When the input of the next `pass` of `stage` is available.
  double getReady(int stage, Pass pass) const;
  /// Appends the next pass of kind `pass` to `stage`; false if memory would
  /// exceed the limit.
  bool place(int stage, Pass pass);
  bool hasPendingW(int stage) const {
    return count[W][stage] < count[B][stage];
  }
  /// Runs W passes that fit before `arrival` (see the file comment).
  bool fillBefore(int stage, double arrival, const Variant &variant);
  /// Runs W passes until `pass` fits in memory.
  bool makeRoomFor(int stage, Pass pass);
  /// The largest idle time of any stage, kept as passes are placed (idle
  /// times only grow), so that asking costs O(1) rather than O(p).
  double getMaxIdle() const { return maxIdle; }

  static constexpr double kEpsilon = 1e-9;
  const CostModel &costs;
  int p, m;
  double limit;
  MemoryModel memory;

  std::vector<int> count[3];
  std::vector<std::vector<double>> end[3];
  std::vector<double> freeAt, memoryNow, idle;
  double maxIdle = 0;
  std::vector<std::vector<Action>> order;
};
} // namespace

double GreedyBuilder::getReady(int stage, Pass pass) const {
  int mb = count[pass][stage];
  if (pass == F)
    return stage == 0 ? 0 : end[F][stage - 1][mb] + getComm(stage - 1);
  if (pass == B)
    return stage == p - 1 ? end[F][stage][mb]
                          : end[B][stage + 1][mb] + getComm(stage);
  return end[B][stage][mb];
}

bool GreedyBuilder::place(int stage, Pass pass) {
  if (!fits(stage, pass))
    return false;
  int mb = count[pass][stage];
  double start = std::max(freeAt[stage], getReady(stage, pass));
  // The wait before a stage's first forward is its start offset, not a
  // bubble.
  if (count[F][stage] > 0) {
    idle[stage] += start - freeAt[stage];
    maxIdle = std::max(maxIdle, idle[stage]);
  }
  freeAt[stage] = start + getCost(pass, stage);
  end[pass][stage][mb] = freeAt[stage];
  memoryNow[stage] += getMemoryDelta(pass);
  ++count[pass][stage];
  order[stage].push_back(pass == F   ? Action::forward(mb)
                         : pass == B ? Action::backward(mb)
                                     : Action::weight(mb));
  return true;
}

bool GreedyBuilder::makeRoomFor(int stage, Pass pass) {
  while (!fits(stage, pass)) {
    if (!hasPendingW(stage))
      return false;
    place(stage, W);
  }
  return true;
}

bool GreedyBuilder::fillBefore(int stage, double arrival,
                               const Variant &variant) {
  while (hasPendingW(stage) && freeAt[stage] + getCost(W, stage) <= arrival)
    place(stage, W);
  if (!hasPendingW(stage) || freeAt[stage] >= arrival)
    return true;
  // A gap shorter than a W. Leaving it idle makes this stage the least
  // efficient one if it already idles almost as much as the worst; then a W
  // that delays the next pass a little is the better use of it.
  double gap = arrival - freeAt[stage];
  if (gap > getMaxIdle() - idle[stage] || variant.fillSmallGaps)
    place(stage, W);
  return true;
}

std::optional<std::vector<std::vector<Action>>>
GreedyBuilder::build(Variant variant) {
  for (int pass = 0; pass < 3; ++pass) {
    count[pass].assign(p, 0);
    end[pass].assign(p, std::vector<double>(m, 0));
  }
  freeAt.assign(p, 0);
  memoryNow.assign(p, 0);
  idle.assign(p, 0);
  maxIdle = 0;
  order.assign(p, {});

  // Micro-batch 0 goes down the pipeline.
  for (int s = 0; s < p; ++s)
    if (!place(s, F))
      return std::nullopt;

  // Warm-up forwards: as many as fit before micro-batch 0's gradient is
  // back, found from the last stage up.
  std::vector<int> extra(p, 0);
  double backwardEnd = end[F][p - 1][0] + getCost(B, p - 1);
  for (int s = p - 2; s >= 0; --s) {
    double arrival = backwardEnd + getComm(s);
    double t = freeAt[s], mem = memoryNow[s];
    while (count[F][s] + extra[s] < m &&
           mem + getMemoryDelta(F) <= limit + kEpsilon) {
      if (variant.allowBubbleBeforeFirstB ? t + getCost(F, s) > arrival
                                          : t >= arrival)
        break;
      mem += getMemoryDelta(F);
      t += getCost(F, s);
      ++extra[s];
    }
    backwardEnd = std::max(t, arrival) + getCost(B, s);
  }
  for (int s = 1; s < p; ++s) {
    // Fewer than the predecessor: it feeds them, one F ahead.
    while (extra[s] > 0 && extra[s] >= extra[s - 1] &&
           count[F][s] + extra[s] < m)
      --extra[s];
    extra[s] = std::min(extra[s], count[F][s - 1] + extra[s - 1] - count[F][s]);
  }
  for (int s = 0; s < p; ++s)
    for (int i = 0; i < extra[s]; ++i)
      if (!place(s, F))
        return std::nullopt;
  for (int s = p - 1; s >= 0; --s)
    if (!place(s, B))
      return std::nullopt;

  for (int mb = 1; mb < m; ++mb) {
    std::vector<int> wantF(p, 0);
    for (int s = 0; s < p; ++s) {
      if (count[F][s] >= m)
        continue;
      wantF[s] = 1;
      if (!variant.prioritizeB || s + 1 == p ||
          count[F][s] < count[F][s + 1] + 2)
        continue;
      // Far enough ahead: is a forward now worth delaying the successor's
      // next backward round trip?
      double successorNeeds =
          freeAt[s + 1] + getCost(F, s + 1) + getCost(B, s + 1) + getComm(s);
      if (freeAt[s] >= successorNeeds) {
        wantF[s] = 0;
        continue;
      }
      double wTime = 0, mem = memoryNow[s] + getMemoryDelta(F);
      for (int k = 0; mem > limit + kEpsilon && count[W][s] + k < count[B][s];
           ++k) {
        wTime += getCost(W, s);
        mem += getMemoryDelta(W);
      }
      if (freeAt[s] + getCost(F, s) + wTime <= successorNeeds)
        continue;
      if (successorNeeds - freeAt[s] <= getMaxIdle() - idle[s])
        wantF[s] = 0;
    }
    // A stage runs a forward only if every later stage does too.
    for (int s = p - 2; s >= 0; --s)
      wantF[s] = std::min(wantF[s], wantF[s + 1]);

    for (int s = 0; s < p; ++s) {
      if (!wantF[s])
        continue;
      if (!makeRoomFor(s, F))
        return std::nullopt;
      if (s > 0 && !fillBefore(s, getReady(s, F), variant))
        return std::nullopt;
      if (!makeRoomFor(s, F) || !place(s, F))
        return std::nullopt;
    }
    for (int s = p - 1; s >= 0; --s) {
      if (count[B][s] != mb || count[F][s] <= mb)
        return std::nullopt;
      if (!makeRoomFor(s, B))
        return std::nullopt;
      if (s + 1 < p && !fillBefore(s, getReady(s, B), variant))
        return std::nullopt;
      // Stage 0's B feeds nobody; once it has no forwards left, its pending
      // W passes can go first without delaying anything.
      if (s == 0 && count[F][0] == m)
        while (hasPendingW(0))
          place(0, W);
      if (!place(s, B))
        return std::nullopt;
    }
  }
  for (int s = 0; s < p; ++s)
    while (hasPendingW(s))
      place(s, W);
  return order;
}

llvm::Expected<Schedule>
mlir::braid::sched::buildAutoZeroBubble(const CostModel &costs,
                                        int numMicrobatches,
                                        const AutoScheduleOptions &options) {
  int p = costs.getNumStages();
  if (p < 1 || numMicrobatches < 1)
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        "the automatic scheduler needs p >= 1 and m >= 1");
  if (llvm::Error err = costs.validate(p))
    return std::move(err);
  // One forward must fit, or nothing can run.
  if (options.memoryLimit < 1)
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        llvm::formatv("memory limit {0} is below one micro-batch activation; "
                      "no forward can run",
                      formatNumber(options.memoryLimit)));

  // Lower limits than the one given are tried too: the heuristic is not
  // monotonic in the limit, and among equally short schedules the one that
  // needs the least memory is preferred.
  std::vector<double> limits = {options.memoryLimit};
  int top = static_cast<int>(std::ceil(options.memoryLimit)) - 1;
  int bottom =
      std::max(1, static_cast<int>(std::ceil(options.memoryLimit / 2)));
  int numLower = std::min(top - bottom + 1, kMaxLowerLimits);
  for (int i = 0; i < numLower; ++i)
    limits.push_back(std::round(top - static_cast<double>(i) * (top - bottom) /
                                          std::max(1, numLower - 1)));

  std::optional<Schedule> best;
  double bestCost = std::numeric_limits<double>::infinity();
  double bestMakespan = bestCost, bestMemory = bestCost;
  for (double limit : limits) {
    AutoScheduleOptions limited = options;
    limited.memoryLimit = std::floor(limit * 1e9) / 1e9;
    GreedyBuilder builder(costs, numMicrobatches, limited);
    for (int bits = 0; bits < 8; ++bits) {
      Variant variant{(bits & 1) != 0, (bits & 2) != 0, (bits & 4) != 0};
      std::optional<std::vector<std::vector<Action>>> order =
          builder.build(variant);
      if (!order)
        continue;
      Schedule candidate("auto", p, numMicrobatches);
      candidate.ranks = std::move(*order);
      llvm::Expected<SimulationResult> sim =
          simulate(candidate, costs, options.memory);
      if (!sim) {
        llvm::consumeError(sim.takeError());
        continue;
      }
      // Shortest cost, then makespan, then peak memory; ties go to the first
      // tried, so the result is deterministic.
      auto compare = [](double a, double b) {
        return a < b - 1e-9 ? -1 : a > b + 1e-9 ? 1 : 0;
      };
      int byCost = compare(sim->cost, bestCost);
      int byMakespan = compare(sim->makespan, bestMakespan);
      int byMemory = compare(sim->getMaxPeakMemory(), bestMemory);
      if (byCost < 0 || (byCost == 0 && byMakespan < 0) ||
          (byCost == 0 && byMakespan == 0 && byMemory < 0)) {
        bestCost = sim->cost;
        bestMakespan = sim->makespan;
        bestMemory = sim->getMaxPeakMemory();
        best = std::move(candidate);
      }
    }
  }
  if (!best)
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        llvm::formatv("no schedule keeps activation memory within {0} "
                      "micro-batches on every stage",
                      formatNumber(options.memoryLimit)));
  return std::move(*best);
}
