//===- Passes.h - braid conversion passes -----------------------*- C++ -*-===//

#ifndef BRAID_CONVERSION_PASSES_H
#define BRAID_CONVERSION_PASSES_H

#include "braid/Conversion/BraidToEmitC/BraidToEmitC.h"
#include "mlir/Dialect/EmitC/IR/EmitC.h"
#include "mlir/Pass/Pass.h"

namespace mlir::braid {

#define GEN_PASS_DECL
#include "braid/Conversion/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "braid/Conversion/Passes.h.inc"

} // namespace mlir::braid

#endif // BRAID_CONVERSION_PASSES_H
