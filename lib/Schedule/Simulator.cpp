//===- Simulator.cpp - Timeline, makespan, bubble rate, memory ------------===//

#include "braid/Schedule/Simulator.h"

#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <cmath>
#include <limits>

using namespace mlir::braid::sched;

static llvm::Error makeError(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

double SimulationResult::getBubbleTime() const {
  double work = 0;
  for (double w : rankWork)
    work = std::max(work, w);
  return cost - work;
}

double SimulationResult::getMaxPeakMemory() const {
  double peak = 0;
  for (double m : peakMemory)
    peak = std::max(peak, m);
  return peak;
}

namespace {
/// End times of the F and of the B (or full backward) of every micro-batch
/// on every stage; NaN until simulated.
class EndTimes {
public:
  EndTimes(int numStages, int numMicrobatches)
      : numMicrobatches(numMicrobatches),
        forward(numStages * numMicrobatches, kUnknown),
        backward(numStages * numMicrobatches, kUnknown) {}

  double &getForward(int stage, int mb) {
    return forward[stage * numMicrobatches + mb];
  }
  double &getBackward(int stage, int mb) {
    return backward[stage * numMicrobatches + mb];
  }
  static bool isKnown(double t) { return !std::isnan(t); }

private:
  static constexpr double kUnknown = std::numeric_limits<double>::quiet_NaN();
  int numMicrobatches;
  std::vector<double> forward, backward;
};

/// The step's cost (the longest rank), makespan and bubble rate, over the
/// ranks that ran an action.
void summarize(SimulationResult &result, const std::vector<bool> &started) {
  double first = std::numeric_limits<double>::infinity(), last = 0;
  double maxWork = 0;
  result.cost = 0;
  for (int r = 0, e = started.size(); r < e; ++r) {
    if (!started[r])
      continue;
    first = std::min(first, result.rankStart[r]);
    last = std::max(last, result.rankEnd[r]);
    result.cost = std::max(result.cost, result.getRankTime(r));
    maxWork = std::max(maxWork, result.rankWork[r]);
  }
  result.makespan = std::isfinite(first) ? last - first : 0;
  result.bubbleRate =
      result.cost > 0 ? (result.cost - maxWork) / result.cost : 0;
}
} // namespace

llvm::Expected<SimulationResult>
mlir::braid::sched::simulate(const Schedule &schedule, const CostModel &costs,
                             const MemoryModel &memory) {
  int p = schedule.numRanks, m = schedule.numMicrobatches,
      v = schedule.numChunks, numStages = schedule.getNumStages();
  if (p < 1 || m < 1 || v < 1 || static_cast<int>(schedule.ranks.size()) != p)
    return makeError("malformed schedule: rank, micro-batch or chunk count");
  if (llvm::Error err = costs.validate(numStages))
    return std::move(err);
  for (int r = 0; r < p; ++r)
    for (const Action &a : schedule.ranks[r])
      if (a.microbatch < 0 || a.microbatch >= m || a.chunk < 0 || a.chunk >= v)
        return makeError(llvm::formatv(
            "rank {0}: {1} is outside {2} micro-batches and {3} chunks", r,
            formatAction(a), m, v));

  SimulationResult result;
  result.timeline.resize(p);
  result.rankStart.assign(p, 0);
  result.rankEnd.assign(p, 0);
  result.rankWork.assign(p, 0);
  result.peakMemory.assign(p, 0);
  for (int r = 0; r < p; ++r)
    result.timeline[r].resize(schedule.ranks[r].size());

  EndTimes ends(numStages, m);
  std::vector<size_t> next(p, 0);
  std::vector<double> freeAt(p, 0), memoryNow(p, 0);
  std::vector<bool> started(p, false);

  // Runs rank r until it needs data that another rank has not produced yet.
  // Returns an error if it needs data that it should have produced itself
  // earlier (that never arrives).
  auto advance = [&](int r, bool &progressed) -> llvm::Error {
    const std::vector<Action> &actions = schedule.ranks[r];
    while (next[r] < actions.size()) {
      const Action &a = actions[next[r]];
      TimedAction &timed = result.timeline[r][next[r]];
      if (a.isCommunication()) {
        timed.start = timed.end = freeAt[r];
        ++next[r];
        progressed = true;
        continue;
      }
      int stage = schedule.getStage(r, a.chunk);
      double ready = 0;
      // Data from stage `from`: local data must already exist; remote data
      // may still be on its way.
      auto needs = [&](int from, double end, bool &wait) -> llvm::Error {
        int fromRank = schedule.getRankAndChunk(from).first;
        if (!EndTimes::isKnown(end)) {
          if (fromRank == r)
            return makeError(llvm::formatv(
                "rank {0} action {1} ({2}) needs the output of stage {3} on "
                "the same rank, which comes later or never",
                r, next[r], formatAction(a), from));
          wait = true;
          return llvm::Error::success();
        }
        ready = std::max(
            ready,
            end + (fromRank == r ? 0.0 : costs.getCommTime(from, stage)));
        return llvm::Error::success();
      };
      bool wait = false;
      switch (a.kind) {
      case ActionKind::Forward:
        if (stage > 0)
          if (llvm::Error err = needs(
                  stage - 1, ends.getForward(stage - 1, a.microbatch), wait))
            return err;
        break;
      case ActionKind::Backward:
      case ActionKind::FullBackward:
        if (llvm::Error err =
                needs(stage, ends.getForward(stage, a.microbatch), wait))
          return err;
        if (stage + 1 < numStages)
          if (llvm::Error err = needs(
                  stage + 1, ends.getBackward(stage + 1, a.microbatch), wait))
            return err;
        break;
      case ActionKind::Weight:
        if (llvm::Error err =
                needs(stage, ends.getBackward(stage, a.microbatch), wait))
          return err;
        break;
      default:
        break;
      }
      if (wait)
        return llvm::Error::success();

      double duration = costs.getDuration(a.kind, stage);
      timed.start = std::max(freeAt[r], ready);
      timed.end = timed.start + duration;
      freeAt[r] = timed.end;
      if (!started[r]) {
        started[r] = true;
        result.rankStart[r] = timed.start;
      }
      result.rankEnd[r] = timed.end;
      result.rankWork[r] += duration;
      if (a.kind == ActionKind::Forward)
        ends.getForward(stage, a.microbatch) = timed.end;
      else if (a.kind != ActionKind::Weight)
        ends.getBackward(stage, a.microbatch) = timed.end;
      memoryNow[r] += memory.getDelta(a.kind, v);
      result.peakMemory[r] = std::max(result.peakMemory[r], memoryNow[r]);
      ++next[r];
      progressed = true;
    }
    return llvm::Error::success();
  };

  // Sweeps alternate direction: forwards flow to higher ranks, gradients
  // to lower ones, so each chain advances through every rank in one sweep
  // (one direction only would take p sweeps of p ranks for a backward).
  for (bool down = false;; down = !down) {
    bool progressed = false;
    for (int i = 0; i < p; ++i)
      if (llvm::Error err = advance(down ? p - 1 - i : i, progressed))
        return std::move(err);
    bool done = true;
    for (int r = 0; r < p; ++r)
      done &= next[r] == schedule.ranks[r].size();
    if (done)
      break;
    if (!progressed) {
      for (int r = 0; r < p; ++r)
        if (next[r] < schedule.ranks[r].size())
          return makeError(llvm::formatv(
              "rank {0} action {1} ({2}) waits for data that no rank ever "
              "produces (the ranks wait for each other)",
              r, next[r], formatAction(schedule.ranks[r][next[r]])));
    }
  }

  summarize(result, started);
  return result;
}

llvm::Expected<SimulationResult>
mlir::braid::sched::simulate(const Schedule &schedule, const CostModel &costs,
                             const MemoryModel &memory,
                             const CoreSharing &sharing) {
  // The plain simulation checks the schedule and gives the work and the
  // memory, which sharing the cores does not change.
  llvm::Expected<SimulationResult> plain = simulate(schedule, costs, memory);
  if (!plain || !sharing.isShared(schedule.numRanks))
    return plain;
  int p = schedule.numRanks, numStages = schedule.getNumStages();
  for (const std::vector<double> *idle :
       {&sharing.forwardIdle, &sharing.backwardIdle, &sharing.weightIdle})
    if (!idle->empty() && static_cast<int>(idle->size()) != numStages)
      return makeError(llvm::formatv("core sharing has {0} idle times, the "
                                     "schedule needs {1}",
                                     idle->size(), numStages));
  auto idleOf = [&](ActionKind kind, int stage) {
    auto at = [&](const std::vector<double> &v) {
      return v.empty() ? 0.0 : v[stage];
    };
    switch (kind) {
    case ActionKind::Forward:
      return at(sharing.forwardIdle);
    case ActionKind::Backward:
      return at(sharing.backwardIdle);
    case ActionKind::Weight:
      return at(sharing.weightIdle);
    case ActionKind::FullBackward:
      return at(sharing.backwardIdle) + at(sharing.weightIdle);
    default:
      return 0.0;
    }
  };

  SimulationResult result = std::move(*plain);
  EndTimes ends(numStages, schedule.numMicrobatches);
  std::vector<size_t> next(p, 0);
  // The action each rank runs: what is left of its compute (at full speed)
  // and of its idle part, which follows the compute.
  struct Running {
    bool active = false;
    double compute = 0, idle = 0;
  };
  std::vector<Running> running(p);
  std::vector<bool> started(p, false);
  double now = 0;
  constexpr double kInf = std::numeric_limits<double>::infinity();
  for (;;) {
    // Start what can start now; the earliest later arrival of data.
    double arrival = kInf;
    bool done = true;
    for (int r = 0; r < p; ++r) {
      const std::vector<Action> &actions = schedule.ranks[r];
      while (!running[r].active && next[r] < actions.size()) {
        const Action &a = actions[next[r]];
        TimedAction &timed = result.timeline[r][next[r]];
        if (a.isCommunication()) {
          timed.start = timed.end = now;
          ++next[r];
          continue;
        }
        int stage = schedule.getStage(r, a.chunk);
        double ready = 0;
        bool known = true;
        auto needs = [&](int from, double end) {
          if (!EndTimes::isKnown(end)) {
            known = false;
            return;
          }
          int fromRank = schedule.getRankAndChunk(from).first;
          ready = std::max(
              ready,
              end + (fromRank == r ? 0.0 : costs.getCommTime(from, stage)));
        };
        if (a.kind == ActionKind::Forward && stage > 0)
          needs(stage - 1, ends.getForward(stage - 1, a.microbatch));
        if (a.kind == ActionKind::Backward ||
            a.kind == ActionKind::FullBackward) {
          needs(stage, ends.getForward(stage, a.microbatch));
          if (stage + 1 < numStages)
            needs(stage + 1, ends.getBackward(stage + 1, a.microbatch));
        }
        if (a.kind == ActionKind::Weight)
          needs(stage, ends.getBackward(stage, a.microbatch));
        if (!known)
          break;
        if (ready > now) {
          arrival = std::min(arrival, ready);
          break;
        }
        double duration = costs.getDuration(a.kind, stage);
        double idle = std::min(duration, idleOf(a.kind, stage));
        running[r] = {true, duration - idle, idle};
        timed.start = now;
        if (!started[r]) {
          started[r] = true;
          result.rankStart[r] = now;
        }
      }
      done &= !running[r].active && next[r] == actions.size();
    }
    if (done)
      break;
    // Ranks computing share the cores; those in an idle part do not.
    int computing = 0;
    for (const Running &run : running)
      computing += run.active && run.compute > 0;
    double rate = computing ? std::min(1.0, sharing.cores / (double(computing) *
                                                             sharing.replicas))
                            : 1.0;
    double step = arrival - now;
    for (const Running &run : running)
      if (run.active)
        step = std::min(step, run.compute > 0 ? run.compute / rate : run.idle);
    if (!std::isfinite(step))
      return makeError("the ranks wait for each other under core sharing");
    now += step;
    for (int r = 0; r < p; ++r) {
      Running &run = running[r];
      if (!run.active)
        continue;
      if (run.compute > 0) {
        run.compute -= step * rate;
        // Rounding: an action finishing in this step finishes exactly.
        if (run.compute <= 1e-12 * std::max(1.0, now))
          run.compute = 0;
      } else {
        run.idle -= step;
        if (run.idle <= 1e-12 * std::max(1.0, now))
          run.idle = 0;
      }
      if (run.compute > 0 || run.idle > 0)
        continue;
      const Action &a = schedule.ranks[r][next[r]];
      int stage = schedule.getStage(r, a.chunk);
      result.timeline[r][next[r]].end = now;
      result.rankEnd[r] = now;
      if (a.kind == ActionKind::Forward)
        ends.getForward(stage, a.microbatch) = now;
      else if (a.kind != ActionKind::Weight)
        ends.getBackward(stage, a.microbatch) = now;
      run.active = false;
      ++next[r];
    }
  }

  summarize(result, started);
  return result;
}
