//===- Passes.h - braid transformation passes -------------------*- C++ -*-===//

#ifndef BRAID_DIALECT_BRAID_TRANSFORMS_PASSES_H
#define BRAID_DIALECT_BRAID_TRANSFORMS_PASSES_H

#include "braid/Dialect/Braid/IR/BraidDialect.h"
#include "mlir/Pass/Pass.h"

namespace mlir::braid {

#define GEN_PASS_DECL
#include "braid/Dialect/Braid/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "braid/Dialect/Braid/Transforms/Passes.h.inc"

} // namespace mlir::braid

#endif // BRAID_DIALECT_BRAID_TRANSFORMS_PASSES_H
