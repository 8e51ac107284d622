//===- Verifier.h - Dependencies, matching, deadlock, memory ----*- C++ -*-===//
//
// A schedule is checked before any code is generated from it:
//
//   1. Completeness: every (micro-batch, chunk) of every rank has exactly one
//      F and either one full backward or one B and one W; indices are in
//      range.
//   2. Matching: every send has a receive on its peer, and between each
//      ordered pair of ranks the sends and the receives carry the same
//      payloads in the same order (point-to-point messages do not overtake).
//      Each payload goes to the rank that consumes it.
//   3. Order and deadlock: the ranks are executed with blocking semantics
//      (a send waits until its peer reaches the matching receive and the
//      other way round, the strictest an MPI or NCCL implementation may be).
//      On each rank F comes before B before W of the same micro-batch and
//      chunk, an F or B only uses data that was computed on this rank or
//      received earlier, a send only sends what was computed, and every
//      rank runs to its end.
//   4. Memory: the activation memory of every rank (MemoryModel) never
//      exceeds the limit, if one is given.
//
// The first violated condition is reported as an error naming the rank, the
// action's index in that rank's list, the action and what is wrong.
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_SCHEDULE_VERIFIER_H
#define BRAID_SCHEDULE_VERIFIER_H

#include "braid/Schedule/CostModel.h"
#include "braid/Schedule/Schedule.h"

#include "llvm/Support/Error.h"

#include <optional>

namespace mlir::braid::sched {

struct VerifyOptions {
  /// Peak activation memory allowed on every rank, in micro-batch
  /// activations (M_B). No check if empty.
  std::optional<double> memoryLimit;
  MemoryModel memory;
  /// A schedule without any send or receive is accepted as a compute order
  /// (cross-rank data is then assumed to arrive by itself) when true; when
  /// false, every cross-rank dependency must be carried by a send/recv pair.
  bool allowImplicitCommunication = false;
};

/// Returns success or the first violated condition.
llvm::Error verifySchedule(const Schedule &schedule,
                           const VerifyOptions &options = {});

} // namespace mlir::braid::sched

#endif // BRAID_SCHEDULE_VERIFIER_H
