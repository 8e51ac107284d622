//===- PhaseUtils.h - Training phases and layer construction ----*- C++ -*-===//
//
// Shared by the passes that build and reorganise training steps: the F/B/W
// phase tag braid-autodiff puts on every op, and building a layer from a
// slice of another block's ops.
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_DIALECT_BRAID_TRANSFORMS_PHASEUTILS_H
#define BRAID_DIALECT_BRAID_TRANSFORMS_PHASEUTILS_H

#include "braid/Dialect/Braid/IR/BraidOps.h"

#include "mlir/IR/Builders.h"

#include <optional>

namespace mlir::braid {

/// The phases of a training step: forward, input gradients, weight
/// gradients.
enum class Phase { F, B, W };

/// The name of the attribute holding an op's phase.
constexpr StringLiteral kPhaseAttrName = "braid.phase";
/// The name of the attribute holding the pipeline chunk an op belongs to.
constexpr StringLiteral kChunkAttrName = "braid.chunk";

StringRef stringifyPhase(Phase phase);
/// The phase an op is tagged with, if any.
std::optional<Phase> getPhase(Operation *op);
void setPhase(Operation *op, Phase phase);

/// Parameter reads and constants are free to recompute: they are cloned
/// into whichever layer uses them rather than passed between layers.
bool isRecomputable(Operation *op);

/// Builds a layer named `name` before the builder's insertion point whose
/// body clones `ops` (in order), with `args` mapped to its arguments and
/// recomputable values cloned where used, yielding `yields`. Every op of
/// the body is tagged `phase`, if given. Every value `ops` and `yields` use
/// must be in `args`, produced by `ops`, or recomputable.
LayerOp buildLayer(OpBuilder &b, Location loc, StringRef name,
                   std::optional<Phase> phase, ArrayRef<Value> args,
                   ArrayRef<Operation *> ops, ArrayRef<Value> yields);

/// The type of `count` stacked values of `type` (a leading dimension).
RankedTensorType stackedType(Type type, int64_t count);

/// The braid.repeat ops that instantiate `layer`, or nothing when anything
/// else uses it too (then its signature must not change).
std::optional<SmallVector<RepeatOp>> getRepeatsOnlyUsing(LayerOp layer,
                                                         ModuleOp module);

} // namespace mlir::braid

#endif // BRAID_DIALECT_BRAID_TRANSFORMS_PHASEUTILS_H
