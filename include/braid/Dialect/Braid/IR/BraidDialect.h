//===- BraidDialect.h - The braid dialect -----------------------*- C++ -*-===//

#ifndef BRAID_DIALECT_BRAID_IR_BRAIDDIALECT_H
#define BRAID_DIALECT_BRAID_IR_BRAIDDIALECT_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Dialect.h"

#include "braid/Dialect/Braid/IR/BraidDialect.h.inc"

namespace mlir::braid {

/// On a braid.param {state}: state held from one call of the step to the
/// next only (braid-train-step's defer-validation: the pending update).
/// It starts as zeros, and checkpoints and saved optimizer state leave it
/// out.
constexpr llvm::StringLiteral kTransientAttrName = "braid.transient";

} // namespace mlir::braid

#endif // BRAID_DIALECT_BRAID_IR_BRAIDDIALECT_H
