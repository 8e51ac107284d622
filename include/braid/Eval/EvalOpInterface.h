//===- EvalOpInterface.h - Reference semantics of braid ops -----*- C++ -*-===//
//
// The interface braid-eval evaluates ops through, and the registration of its
// implementations for the braid dialect's ops. They live here, beside the
// evaluator, rather than in the dialect: the dialect library does not depend
// on the evaluator (scripts/check-layering.py keeps it so).
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_EVAL_EVALOPINTERFACE_H
#define BRAID_EVAL_EVALOPINTERFACE_H

#include "braid/Eval/EvalContext.h"
#include "braid/Support/Tensor.h"

#include "mlir/IR/OpDefinition.h"

#include "braid/Eval/EvalOpInterface.h.inc"

namespace mlir {
class DialectRegistry;
class MLIRContext;
namespace braid {

/// Attaches EvalOpInterface to every braid op that computes something (all
/// but braid.layer, braid.mesh and braid.yield). Every tool or test that
/// evaluates braid IR adds this to its registry.
void registerEvalInterfaceExternalModels(DialectRegistry &registry);

/// Whether `ctx` has the models above attached (the braid dialect loaded and
/// the registration applied), for a clear error where it has not.
bool hasEvalInterfaceExternalModels(MLIRContext *ctx);

} // namespace braid
} // namespace mlir

#endif // BRAID_EVAL_EVALOPINTERFACE_H
