//===- Simulator.h - Timeline, makespan, bubble rate, memory ----*- C++ -*-===//
//
// Runs a schedule under a cost model: every rank executes its compute
// actions in order, each as early as its rank is free and its input has
// arrived (the previous stage's F, the next stage's B, plus one transfer
// latency when that stage is on another rank). Sends and receives take no
// compute time; they are posted asynchronously, as NCCL/MPI non-blocking
// point-to-point runs beside compute. (The verifier separately proves that
// the same order also cannot deadlock when they block.)
//
// Reported, as defined by Qi et al. 2024:
//   - a rank's execution time runs from the start of its first action to the
//     end of its last; `cost` is the largest over ranks. Staggered start
//     offsets are not idle time: zero-bubble schedules drop the optimizer
//     synchronisation between iterations, so the next iteration's first
//     stage starts while later stages are still finishing.
//   - bubble rate = (cost - work) / cost, where work is the busiest rank's
//     total compute time, m (T_F + T_B + T_W) when all stages are alike.
//   - makespan = end of the last action - start of the first (with the
//     optimizer synchronisation).
//   - peak activation memory per rank (MemoryModel units: M_B).
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_SCHEDULE_SIMULATOR_H
#define BRAID_SCHEDULE_SIMULATOR_H

#include "braid/Schedule/CostModel.h"
#include "braid/Schedule/Schedule.h"

#include "llvm/Support/Error.h"

#include <vector>

namespace mlir::braid::sched {

/// When one action ran. For sends and receives start == end: the time the
/// rank posted it.
struct TimedAction {
  double start = 0;
  double end = 0;
};

struct SimulationResult {
  /// timeline[r][i] is action i of rank r.
  std::vector<std::vector<TimedAction>> timeline;
  /// Per rank: start of its first compute action, end of its last.
  std::vector<double> rankStart;
  std::vector<double> rankEnd;
  /// Per rank: summed compute time.
  std::vector<double> rankWork;
  /// Per rank: peak activation memory (M_B).
  std::vector<double> peakMemory;
  double makespan = 0;
  double cost = 0;
  double bubbleRate = 0;

  double getRankTime(int rank) const { return rankEnd[rank] - rankStart[rank]; }
  /// cost - work: the bubble of Table 2 of the paper.
  double getBubbleTime() const;
  double getMaxPeakMemory() const;
};

/// Simulates `schedule` under `costs` (which must have one entry per model
/// stage). Fails if a rank waits for data that is never produced (a
/// schedule that the verifier would reject).
llvm::Expected<SimulationResult> simulate(const Schedule &schedule,
                                          const CostModel &costs,
                                          const MemoryModel &memory = {});

/// Ranks that share cores: a CPU machine running more ranks than it has
/// cores. The ranks that compute at a moment share `cores` alike, each at
/// min(1, cores / (computing ranks x replicas)) of its own speed, where
/// `replicas` identical pipelines run in step beside this one (the dp x tp
/// copies of a plan). A rank waiting for data leaves its core to the
/// others, so a schedule's bubbles cost only while fewer ranks than cores
/// compute. Per stage, the idle times are the part of F, B and W that
/// occupies no core (a collective's waits; empty: none); that part takes
/// its own time whatever the others do.
struct CoreSharing {
  double cores = 0;
  int replicas = 1;
  std::vector<double> forwardIdle, backwardIdle, weightIdle;

  /// Whether the ranks of `replicas` pipelines of `numRanks` ranks can
  /// ever compute more at once than there are cores.
  bool isShared(int numRanks) const {
    return cores > 0 && double(numRanks) * replicas > cores;
  }
};

/// As above, with every rank's compute progressing at the share of the
/// cores that `sharing` gives it while it runs (an event-driven simulation:
/// the time of an action depends on which other ranks compute alongside).
/// rankWork and peakMemory are those of the plain simulation.
llvm::Expected<SimulationResult> simulate(const Schedule &schedule,
                                          const CostModel &costs,
                                          const MemoryModel &memory,
                                          const CoreSharing &sharing);

} // namespace mlir::braid::sched

#endif // BRAID_SCHEDULE_SIMULATOR_H
