//===- BraidTraits.h - braid op traits --------------------------*- C++ -*-===//

#ifndef BRAID_DIALECT_BRAID_IR_BRAIDTRAITS_H
#define BRAID_DIALECT_BRAID_IR_BRAIDTRAITS_H

#include "mlir/IR/OpDefinition.h"

namespace mlir::OpTrait::braid {

/// Rejects dynamic dimensions: the evaluator, the partitioner and the cost
/// model all need every shape at compile time.
LogicalResult verifyStaticShapes(Operation *op);

template <typename ConcreteType>
class StaticShapes : public TraitBase<ConcreteType, StaticShapes> {
public:
  static LogicalResult verifyTrait(Operation *op) {
    return verifyStaticShapes(op);
  }
};

/// Rejects inherent-looking attributes (names without a dialect prefix) that
/// the op does not define.
LogicalResult verifyNoUnknownAttributes(Operation *op);

template <typename ConcreteType>
class NoUnknownAttributes
    : public TraitBase<ConcreteType, NoUnknownAttributes> {
public:
  static LogicalResult verifyTrait(Operation *op) {
    return verifyNoUnknownAttributes(op);
  }
};

} // namespace mlir::OpTrait::braid

#endif // BRAID_DIALECT_BRAID_IR_BRAIDTRAITS_H
