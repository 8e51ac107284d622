//===- CostModel.h - Pass times, transfer times and memory ------*- C++ -*-===//
//
// What the simulator and the automatic scheduler need to know about the
// model: how long F, B and W take on each stage, how long one point-to-point
// transfer between neighbouring stages takes, and how much activation memory
// each pass allocates or frees.
//
// Times are in any unit (the profiles in bench/ use milliseconds). Transfers
// are latencies: a send does not occupy the compute stream, the receiving
// pass simply cannot start before the data arrives. This is the model of Qi
// et al., "Zero Bubble Pipeline Parallelism" (ICLR 2024), whose Table 5 the
// benchmark reproduces.
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_SCHEDULE_COSTMODEL_H
#define BRAID_SCHEDULE_COSTMODEL_H

#include "braid/Schedule/Schedule.h"

#include "llvm/Support/Error.h"

#include <vector>

namespace mlir::braid::sched {

/// Per-stage pass times. Indexed by model stage (0 .. p*v - 1); a stage is
/// one chunk, so with v chunks per rank each entry is the time for 1/v of a
/// rank's layers.
struct CostModel {
  std::vector<double> forward;
  std::vector<double> backward;
  std::vector<double> weight;
  /// comm[s]: latency of one transfer between stage s and stage s + 1 (either
  /// direction); size p*v - 1. Transfers between two stages on the same rank
  /// (the bottom of ZB-V's V) cost nothing.
  std::vector<double> comm;

  /// Every stage alike. `tf`, `tb`, `tw` are the times of one micro-batch
  /// through a whole rank (all of its chunks), as profiles report them; each
  /// of the v chunks gets 1/v of that.
  static CostModel uniform(int numRanks, int numChunks, double tf, double tb,
                           double tw, double tcomm);

  int getNumStages() const { return forward.size(); }
  /// Duration of a compute action on `stage` (FullBackward = B + W; zero for
  /// Send and Recv).
  double getDuration(ActionKind kind, int stage) const;
  /// Latency of a transfer between neighbouring stages `a` and `b`.
  double getCommTime(int a, int b) const;

  /// Checks sizes against a schedule's stage count and that no time is
  /// negative or not finite.
  llvm::Error validate(int numStages) const;
};

/// Activation memory, in units of one micro-batch's activation for a whole
/// rank (M_B in the paper). F of one chunk allocates 1/v of a unit; W, or a
/// full backward, frees it.
///
/// By default B frees nothing: the activation stays until W (the conservative
/// model, and the definition Braid's memory limits use). The zero-bubble
/// paper counts more finely: after B only the part W needs is left (the
/// inputs of the weight matmuls, M_W), so B frees M_B - M_W. Setting
/// `weightFraction` to M_W / M_B selects that accounting; for a transformer
/// layer (Korthikanti et al.) M_B = 34sbh + 5as^2b and M_W = 32sbh.
struct MemoryModel {
  /// Share of a chunk's activation that is still held between its B and its
  /// W, in [0, 1].
  double weightFraction = 1.0;

  /// Memory change of `kind` on a schedule with `numChunks` chunks per rank.
  double getDelta(ActionKind kind, int numChunks) const;

  /// M_W / M_B of a transformer layer with hidden size `hidden`, `heads`
  /// attention heads and sequence length `seq`: 32h / (34h + 5as).
  static double transformerWeightFraction(double hidden, double heads,
                                          double seq);
};

} // namespace mlir::braid::sched

#endif // BRAID_SCHEDULE_COSTMODEL_H
