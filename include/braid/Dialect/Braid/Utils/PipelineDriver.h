//===- PipelineDriver.h - A scheduled gradient function, read --*- C++ -*-===//
//
// braid-pipeline-outline turns a gradient function @f_grad into a driver
// that calls one piece per (model chunk, phase F/B/W), and
// braid-pipeline-schedule attaches each rank's actions as text. Whoever
// runs such a driver (braid-eval's executor, the EmitC lowering) needs the
// same facts: which call computes each piece, which piece produces each
// value, which stage holds each chunk, and each rank's actions. This reads
// them once, with located errors.
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_DIALECT_BRAID_UTILS_PIPELINEDRIVER_H
#define BRAID_DIALECT_BRAID_UTILS_PIPELINEDRIVER_H

#include "braid/Schedule/Schedule.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"

#include <map>
#include <vector>

namespace mlir::braid {

struct PipelineDriver {
  /// (model chunk, phase 'F', 'B' or 'W').
  using Piece = std::pair<int64_t, char>;

  /// Reads `fn` (a driver with a braid.schedule) and the stages of its
  /// chunks (braid.chunk_stages on the forward function @f); errors on `fn`
  /// or its ops.
  static FailureOr<PipelineDriver> read(func::FuncOp fn);

  int64_t getNumRanks() const { return actions.size(); }
  /// The model chunk that local chunk `local` of `rank` is.
  int64_t getChunk(int64_t rank, int64_t local) const {
    return localChunks[rank][local];
  }
  /// The stage (rank of the schedule) computing the piece that produces
  /// `v`, a result of one of the driver's calls.
  int64_t getStage(Value v) const {
    return stages[producer.lookup(v).first];
  }
  /// Whether a piece of a chunk on `rank` uses `v`.
  bool isUsedOn(Value v, int64_t rank) const;
  /// Whether a W piece (a weight gradient) produces `v`.
  bool isProducedByW(Value v) const;

  func::FuncOp fn;
  int64_t microbatches = 0;
  /// The call computing each piece.
  std::map<Piece, func::CallOp> pieces;
  /// The piece of each call's results, and of each call.
  DenseMap<Value, Piece> producer;
  DenseMap<Operation *, Piece> callPiece;
  /// The stage of each model chunk.
  SmallVector<int64_t> stages;
  /// The model chunks of each rank, in local-chunk order.
  std::vector<std::vector<int64_t>> localChunks;
  /// Each rank's actions, as braid.schedule lists them (`chunk` is the
  /// rank's local chunk; micro-batches, chunks and peers are in range).
  std::vector<std::vector<sched::Action>> actions;
};

} // namespace mlir::braid

#endif // BRAID_DIALECT_BRAID_UTILS_PIPELINEDRIVER_H
