//===- PipelineExecutor.h - Running a schedule on simulated ranks -*- C++ -*-===//
//
// Runs an outlined gradient function (braid-pipeline-outline) that carries a
// schedule (braid-pipeline-schedule) the way pipeline ranks would: each rank
// executes its actions in schedule order with values of its own, so a piece
// may use only what its rank computed or received.
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_EVAL_PIPELINEEXECUTOR_H
#define BRAID_EVAL_PIPELINEEXECUTOR_H

#include "braid/Eval/Evaluator.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace mlir::braid {

/// Runs `driver` on each of `microbatches` (its arguments per micro-batch)
/// in the order of its braid.schedule and appends the mean of each of its
/// results over the micro-batches to `results`. Ranks take turns; a rank
/// waits at a recv until the matching send has run. Fails with a
/// diagnostic on a deadlock, a missing transfer or a malformed action.
LogicalResult runScheduledPipeline(Evaluator &evaluator, func::FuncOp driver,
                                   ArrayRef<SmallVector<Tensor>> microbatches,
                                   SmallVectorImpl<Tensor> &results);

} // namespace mlir::braid

#endif // BRAID_EVAL_PIPELINEEXECUTOR_H
