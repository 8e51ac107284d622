//===- BraidOps.h - braid ops, attributes and interfaces --------*- C++ -*-===//

#ifndef BRAID_DIALECT_BRAID_IR_BRAIDOPS_H
#define BRAID_DIALECT_BRAID_IR_BRAIDOPS_H

#include "braid/Dialect/Braid/IR/BraidDialect.h"
#include "braid/Dialect/Braid/IR/BraidTraits.h"
#include "braid/Dialect/Braid/IR/ShardingRule.h"
#include "braid/Support/Tensor.h"

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/CallInterfaces.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace mlir::braid {
/// The named tensors (parameters, optimizer state) that braid.param reads
/// and braid.store_param writes.
struct ParameterResource
    : public SideEffects::Resource::Base<ParameterResource> {
  StringRef getName() final { return "braid.parameters"; }
};
} // namespace mlir::braid

#include "braid/Dialect/Braid/IR/BraidEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "braid/Dialect/Braid/IR/BraidAttrs.h.inc"

#define GET_TYPEDEF_CLASSES
#include "braid/Dialect/Braid/IR/BraidTypes.h.inc"

namespace mlir::braid {
class MeshOp;
} // namespace mlir::braid

#include "braid/Dialect/Braid/IR/BraidInterfaces.h.inc"

#define GET_OP_CLASSES
#include "braid/Dialect/Braid/IR/BraidOps.h.inc"

namespace mlir::braid {
/// Checks `sharding` against the mesh it names and against `type`: known
/// axes, each used once, and matching rank; for a whole tensor (`local`
/// false), also every split dimension divisible by its axes. With `local`,
/// `type` is one device's block. Diagnostics go to `op` and name the value
/// as `what`.
LogicalResult verifyShardingFor(Operation *op, ShardingAttr sharding,
                                Type type, StringRef what, bool local = false);
} // namespace mlir::braid

#endif // BRAID_DIALECT_BRAID_IR_BRAIDOPS_H
