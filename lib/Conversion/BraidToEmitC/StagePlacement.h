//===- StagePlacement.h - Which pipeline stages run each op -----*- C++ -*-===//
//
// In a pipelined program every stage runs the code around braid.pipeline
// (gradient norm, clipping, the optimizer). The pipeline leaves each result
// on the stage that computed it; this analysis places every later op on the
// stage that holds most of its operands' elements, or on every stage when
// all of them are everywhere, and says which operands to move there first.
// An operand from another stage that no later op reads goes to the op's
// stage alone, point to point (the first stage's partial gradient of a tied
// weight, summed on the last; the gradient norm's running sum); the others
// are broadcast over the pipeline: an operand read again later (the
// clipping coefficient), a value stored to a parameter that pieces on other
// stages read (a tied weight), and the function's results. Placement
// follows the data: a stage updates only the parameters whose gradients it
// computed. A sum the caller marks as summing shares (a pending sum's terms,
// stored for the next step to reduce) moves nothing: every stage sums its
// own share of it, reading the terms of other stages as zeros.
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_LIB_CONVERSION_BRAIDTOEMITC_STAGEPLACEMENT_H
#define BRAID_LIB_CONVERSION_BRAIDTOEMITC_STAGEPLACEMENT_H

#include "mlir/IR/Block.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/SmallVector.h"

namespace mlir::braid {

class StagePlacement {
public:
  /// Every stage (a replicated value, or an op all stages run).
  static constexpr int64_t kAll = -1;
  /// A transfer's destination for an operand of an op summing shares: each
  /// stage takes its share of the operand (the value on stage `from`,
  /// zeros on the others).
  static constexpr int64_t kShare = -2;

  /// Places the ops of `body`. `initial` gives the stage of the values that
  /// start on one stage (braid.pipeline results; kAll for others);
  /// `stagesOnly(op, s)` says whether a stage-`s` op with side effects on
  /// parameters (a store, a repeat of an update layer) leaves every
  /// parameter it writes read only on stage `s`; if not, it runs on every
  /// stage (its operands broadcast). `sumsShares(op)` says whether `op`
  /// runs on every stage on its share of the operands (an add of a pending
  /// sum's terms, the store of such a sum): its operands on one stage, and
  /// those on every stage, which count as stage 0's, are read as shares
  /// (kShare), unless an op summing shares computed them.
  StagePlacement(Block &body, llvm::function_ref<int64_t(Value)> initial,
                 llvm::function_ref<bool(Operation *, int64_t)> stagesOnly,
                 llvm::function_ref<bool(Operation *)> sumsShares);

  /// The stage that runs `op`, or kAll.
  int64_t getStage(Operation *op) const {
    auto it = stages.find(op);
    return it == stages.end() ? kAll : it->second;
  }
  /// An operand of an op that moves from stage `from` before the op runs:
  /// to stage `to` alone, (kAll) broadcast to every stage, or (kShare) each
  /// stage's share.
  struct Transfer {
    unsigned operand;
    int64_t from, to;
  };
  /// The operands of `op` to move before it runs.
  llvm::ArrayRef<Transfer> getTransfers(Operation *op) const {
    auto it = transfers.find(op);
    return it == transfers.end() ? llvm::ArrayRef<Transfer>()
                                 : llvm::ArrayRef<Transfer>(it->second);
  }

private:
  llvm::DenseMap<Operation *, int64_t> stages;
  llvm::DenseMap<Operation *, llvm::SmallVector<Transfer>> transfers;
};

} // namespace mlir::braid

#endif // BRAID_LIB_CONVERSION_BRAIDTOEMITC_STAGEPLACEMENT_H
