//===- CostUtils.h - FLOP counts over repeats -------------------*- C++ -*-===//

#ifndef BRAID_DIALECT_BRAID_TRANSFORMS_COSTUTILS_H
#define BRAID_DIALECT_BRAID_TRANSFORMS_COSTUTILS_H

#include "mlir/IR/Operation.h"

namespace mlir::braid {

/// All FLOPs of `op` (CostOpInterface); a repeat counts its layer's body once
/// per instance, recursively. Ops without the interface count zero.
double getTotalFlops(Operation *op);

} // namespace mlir::braid

#endif // BRAID_DIALECT_BRAID_TRANSFORMS_COSTUTILS_H
