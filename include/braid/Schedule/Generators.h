//===- Generators.h - GPipe, 1F1B, zero-bubble and automatic ----*- C++ -*-===//
//
// Each generator returns the compute order of every rank (F, B, W, BW; no
// sends or receives). `insertCommunication` then adds the point-to-point
// actions in an order that cannot deadlock, and `generateSchedule` does
// both for a schedule chosen by name.
//
// References:
//   GPipe: Huang et al. 2019. 1F1B: Narayanan et al. 2019 (PipeDream-Flush).
//   Interleaved 1F1B: Narayanan et al. 2021 (Megatron-LM).
//   ZB-H1, ZB-H2, automatic: Qi et al., "Zero Bubble Pipeline Parallelism",
//   ICLR 2024 (arXiv 2401.10241).
//   ZB-V: Qi et al., "Pipeline Parallelism with Controllable Memory", 2024
//   (arXiv 2405.15362).
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_SCHEDULE_GENERATORS_H
#define BRAID_SCHEDULE_GENERATORS_H

#include "braid/Schedule/CostModel.h"
#include "braid/Schedule/Schedule.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <optional>

namespace mlir::braid::sched {

enum class ScheduleKind {
  GPipe,
  OneFOneB,
  Interleaved1F1B,
  ZBH1,
  ZBH2,
  ZBV,
  Auto
};

/// Every kind, in the order `braid-sched --help` lists them.
llvm::ArrayRef<ScheduleKind> getAllScheduleKinds();
/// Canonical name: "gpipe", "1f1b", "interleaved-1f1b", "zb-h1", "zb-h2",
/// "zb-v", "auto".
llvm::StringRef getScheduleKindName(ScheduleKind kind);
/// One line on what the schedule is.
llvm::StringRef getScheduleKindSummary(ScheduleKind kind);
/// Accepts the canonical names and a few aliases ("1f1b-i", "zb", "zbv").
std::optional<ScheduleKind> parseScheduleKind(llvm::StringRef name);

/// All forwards, then all full backwards. Peak memory m.
Schedule buildGPipe(int numRanks, int numMicrobatches);

/// One forward, one full backward (PipeDream-Flush / Megatron 1F1B): rank r
/// runs p - 1 - r warm-up forwards. Peak memory min(p, m). Any m >= 1.
Schedule build1F1B(int numRanks, int numMicrobatches);

/// Megatron-LM's interleaved 1F1B over v chunks per rank (stage c*p + r).
/// Micro-batches go round in groups of p, so m must be a multiple of p.
llvm::Expected<Schedule> buildInterleaved1F1B(int numRanks, int numMicrobatches,
                                              int numChunks);

/// ZB-H1: 1F1B with B and W split and rank r's first r W passes deferred to
/// the end. Same peak memory as 1F1B (p), bubble (p-1)(T_F + T_B - T_W).
Schedule buildZBH1(int numRanks, int numMicrobatches);

/// ZB-H2: 2(p - r) - 1 warm-up forwards on rank r, W passes deferred while
/// memory allows (peak 2p - 1), zero bubble when T_F + T_B = 2 T_W.
Schedule buildZBH2(int numRanks, int numMicrobatches);

/// ZB-V: two chunks per rank in a V (chunk 0 = stage r, chunk 1 = stage
/// 2p-1-r). Peak memory p (as 1F1B), zero bubble when T_F = T_B = T_W.
Schedule buildZBV(int numRanks, int numMicrobatches);

/// Options of the automatic zero-bubble scheduler.
struct AutoScheduleOptions {
  /// Peak activation memory allowed on every rank, in micro-batch
  /// activations (M_B). At least 1.
  double memoryLimit = 0;
  MemoryModel memory;
};

/// The automatic zero-bubble scheduler of Qi et al. (Section 3.1): given the
/// pass and transfer times of every stage and a memory limit, searches for
/// the schedule with the smallest largest-stage execution time (the paper's
/// cost; ties go to the shorter makespan). One chunk per rank: `costs` must
/// have p stages. Fails if the limit is below one micro-batch.
llvm::Expected<Schedule>
buildAutoZeroBubble(const CostModel &costs, int numMicrobatches,
                    const AutoScheduleOptions &options);

/// Adds the sends and receives that a compute-only schedule needs: one send
/// after every F or B whose consumer is on another rank, one receive before
/// the consumer. They are ordered by the time each transfer starts when the
/// schedule runs under `costs` (or unit times), and every rank issues its
/// sends and receives in that one global order, so the schedule cannot
/// deadlock even if every send blocks until its receive is posted.
llvm::Error insertCommunication(Schedule &schedule,
                                const CostModel *costs = nullptr);

/// What to generate.
struct ScheduleRequest {
  ScheduleKind kind = ScheduleKind::OneFOneB;
  int numRanks = 1;
  int numMicrobatches = 1;
  /// Chunks per rank; 0 picks the schedule's default (2 for interleaved 1F1B
  /// and ZB-V, 1 otherwise).
  int numChunks = 0;
  /// Times used by the automatic scheduler and to order the sends and
  /// receives. Empty: unit times (T_F = T_B = T_W = 1, no transfer cost).
  std::optional<CostModel> costs;
  /// Automatic scheduler only: peak memory limit (default: p).
  std::optional<double> memoryLimit;
  MemoryModel memory;
};

/// The chunk count a request gets for `kind` when it leaves it to the
/// schedule, or an error if `numChunks` is not one `kind` supports.
llvm::Expected<int> resolveNumChunks(ScheduleKind kind, int numChunks);

/// The most (stage, micro-batch) pairs a schedule may have: generating,
/// verifying and simulating that many takes seconds (the automatic
/// scheduler, the slowest, at most about 5 s on one core, at p = 16384,
/// m = 4); far larger sizes would run for minutes or exhaust memory.
constexpr int64_t kMaxSchedulePairs = int64_t(1) << 16;

/// Checks the request (p >= 1, m >= 1, the schedule's own constraints, at
/// most kMaxSchedulePairs pairs), generates the compute order and inserts
/// the communication.
llvm::Expected<Schedule> generateSchedule(const ScheduleRequest &request);

} // namespace mlir::braid::sched

#endif // BRAID_SCHEDULE_GENERATORS_H
