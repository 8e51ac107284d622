//===- Schedule.h - Pipeline schedules as data ------------------*- C++ -*-===//
//
// A pipeline-parallel schedule is, for each rank, the ordered list of what
// that rank does: forward (F), input-gradient backward (B), weight-gradient
// backward (W) or full backward (BW = B then W) of one micro-batch on one of
// its model chunks, and the point-to-point sends and receives that carry
// activations forward and gradients backward between ranks.
//
// The model is cut into S = p * v stages. Rank r holds v chunks; which stage
// chunk c of rank r is depends on the placement:
//   - Interleaved (GPipe, 1F1B, interleaved 1F1B, ZB-H1/H2, automatic):
//     stage = c * p + r, so activations go round the ranks v times.
//   - VShape (ZB-V, v = 2): chunk 0 is stage r and chunk 1 is stage
//     2p - 1 - r, so the turn at the bottom of the V stays on rank p - 1 and
//     the loss is computed on rank 0.
//
// This library has no MLIR dependency: the pipeline passes, braid-sched and
// the unit tests all use the same data and the same verifier.
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_SCHEDULE_SCHEDULE_H
#define BRAID_SCHEDULE_SCHEDULE_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/raw_ostream.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace mlir::braid::sched {

/// What one action of a rank does.
enum class ActionKind {
  /// Forward of one micro-batch through one chunk. Allocates its activation.
  Forward,
  /// Input-gradient backward: the gradient that the previous stage needs.
  /// Keeps the part of the activation that W still needs.
  Backward,
  /// Weight-gradient backward; needs the B of the same micro-batch and chunk
  /// and frees what is left of the activation.
  Weight,
  /// B and W together, as one action (GPipe, 1F1B, interleaved 1F1B).
  FullBackward,
  /// Point-to-point send of `payload` to rank `peer`.
  Send,
  /// Point-to-point receive of `payload` from rank `peer`.
  Recv,
};

/// What a send or receive carries.
enum class Payload {
  /// The output of a stage's F, consumed by the next stage's F.
  Activation,
  /// The input gradient computed by a stage's B, consumed by the previous
  /// stage's B (or full backward).
  Gradient,
};

/// One step of a rank's program. For Send and Recv, `chunk` is the chunk on
/// *this* rank whose F or B produces (send) or consumes (recv) the payload.
struct Action {
  ActionKind kind = ActionKind::Forward;
  int microbatch = 0;
  int chunk = 0;
  /// Send/Recv only: the other rank.
  int peer = -1;
  /// Send/Recv only.
  Payload payload = Payload::Activation;

  static Action forward(int microbatch, int chunk = 0) {
    return {ActionKind::Forward, microbatch, chunk};
  }
  static Action backward(int microbatch, int chunk = 0) {
    return {ActionKind::Backward, microbatch, chunk};
  }
  static Action weight(int microbatch, int chunk = 0) {
    return {ActionKind::Weight, microbatch, chunk};
  }
  static Action fullBackward(int microbatch, int chunk = 0) {
    return {ActionKind::FullBackward, microbatch, chunk};
  }
  static Action send(Payload payload, int microbatch, int chunk, int peer) {
    return {ActionKind::Send, microbatch, chunk, peer, payload};
  }
  static Action recv(Payload payload, int microbatch, int chunk, int peer) {
    return {ActionKind::Recv, microbatch, chunk, peer, payload};
  }

  bool isCompute() const {
    return kind != ActionKind::Send && kind != ActionKind::Recv;
  }
  bool isCommunication() const { return !isCompute(); }

  bool operator==(const Action &other) const {
    return kind == other.kind && microbatch == other.microbatch &&
           chunk == other.chunk && peer == other.peer &&
           payload == other.payload;
  }
  bool operator!=(const Action &other) const { return !(*this == other); }
};

/// How chunks map to model stages.
enum class Placement { Interleaved, VShape };

/// A complete schedule: one ordered action list per rank.
struct Schedule {
  /// The generator's name ("1f1b", "zb-h1", ...), for reports.
  std::string name;
  int numRanks = 1;
  int numMicrobatches = 1;
  int numChunks = 1;
  Placement placement = Placement::Interleaved;
  /// ranks[r] is the program of rank r.
  std::vector<std::vector<Action>> ranks;

  Schedule() = default;
  Schedule(llvm::StringRef name, int numRanks, int numMicrobatches,
           int numChunks = 1, Placement placement = Placement::Interleaved)
      : name(name.str()), numRanks(numRanks), numMicrobatches(numMicrobatches),
        numChunks(numChunks), placement(placement), ranks(numRanks) {}

  int getNumStages() const { return numRanks * numChunks; }
  /// The model stage that chunk `chunk` of rank `rank` computes.
  int getStage(int rank, int chunk) const;
  /// The (rank, chunk) that computes model stage `stage`.
  std::pair<int, int> getRankAndChunk(int stage) const;
  /// True if any rank has a send or a receive.
  bool hasCommunication() const;
  /// A copy without sends and receives.
  Schedule withoutCommunication() const;
};

llvm::StringRef getActionKindName(ActionKind kind);
llvm::StringRef getPayloadName(Payload payload);

/// Short form used in diagnostics and dumps: "F3", "B3.1" (micro-batch 3,
/// chunk 1), "send activation 3.0 to rank 2".
std::string formatAction(const Action &action);

/// The action `text` names in formatAction's form ("F3.1", "BW0.0",
/// "recv gradient 2.0 from rank 1"), or nothing if it is not one.
std::optional<Action> parseAction(llvm::StringRef text);

/// `value` with at most `digits` significant digits and no trailing zeros
/// ("30", "0.1585", "1.5e+06"), for tables and pictures.
std::string formatNumber(double value, int digits = 6);

/// Prints every rank's program, one rank per line.
void printSchedule(llvm::raw_ostream &os, const Schedule &schedule);

} // namespace mlir::braid::sched

#endif // BRAID_SCHEDULE_SCHEDULE_H
