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

/// Marks the ops that selective activation recomputation recomputes
/// instead of saving: the attention core, whose saved activations grow with
/// the square of the sequence length while its FLOPs are small (Korthikanti
/// et al. 2022).
template <typename ConcreteType>
class SelectivelyRecomputed
    : public TraitBase<ConcreteType, SelectivelyRecomputed> {};

/// Marks ops that only move data (reshape, transpose, ...): no arithmetic,
/// so recomputing them is free wherever their input is recomputed.
template <typename ConcreteType>
class MovesDataOnly : public TraitBase<ConcreteType, MovesDataOnly> {};

/// Marks the ops that compute in bf16 under bf16 mixed precision
/// (braid-mixed-precision): their float operands and results become bf16.
/// The matrix products among them (matmul, matmul_bias, attention) sum
/// their products in f32 and round once; ops without it (norms, softmax,
/// losses, reductions) compute in f32, and data movement follows its
/// operand.
template <typename ConcreteType>
class ComputesInBF16 : public TraitBase<ConcreteType, ComputesInBF16> {};

/// Marks elementwise ops that evaluate a transcendental function (exp,
/// tanh, erf, a sigmoid) per element: on a CPU several times slower per
/// byte than a streaming op such as add, so the planner's cost model gives
/// them their own efficiency (OpClass::Transcendental).
template <typename ConcreteType>
class Transcendental : public TraitBase<ConcreteType, Transcendental> {};

/// Marks ops linear in all their operands jointly (add, sub, neg and data
/// movement): applied to summands, they give a summand of the result, so
/// pending partial sums can pass through them unreduced when every operand
/// is a partial sum over the same axes.
template <typename ConcreteType>
class Linear : public TraitBase<ConcreteType, Linear> {};

} // namespace mlir::OpTrait::braid

#endif // BRAID_DIALECT_BRAID_IR_BRAIDTRAITS_H
