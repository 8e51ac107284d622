//===- TensorParallelPlan.h - Megatron splits from structure ----*- C++ -*-===//
//
// Which parameters tensor parallelism splits, and along which dimension,
// decided from the dataflow of the forward program through the ops'
// sharding rules, never from parameter names: Megatron-LM's column- and
// row-parallel matmul pairs (attention heads and MLPs), the biases of the
// column-parallel ones, the vocabulary-parallel embedding table and LM head.
// Used by braid-shard; a planner can ask it the same questions.
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_DIALECT_BRAID_TRANSFORMS_TENSORPARALLELPLAN_H
#define BRAID_DIALECT_BRAID_TRANSFORMS_TENSORPARALLELPLAN_H

#include "braid/Dialect/Braid/IR/BraidOps.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

#include <string>

namespace mlir::braid {

/// What tensor parallelism does with one parameter.
struct TensorParallelDecision {
  enum class Role {
    /// Kept whole.
    None,
    /// The first matmul of a pair: its output features are split.
    Column,
    /// A parameter applied elementwise along a Column weight's split
    /// dimension (its bias): split the same way.
    ColumnBias,
    /// The second matmul of a pair: its contracted dimension is split and
    /// its output becomes a partial sum.
    Row,
    /// Rows looked up by ids (an embedding table): split the vocabulary.
    Vocabulary,
    /// A matmul whose output is the vocabulary of a loss that can split it
    /// (an untied LM head), or a bias on that path.
    Head,
  };
  Role role = Role::None;
  /// The dimension split over the tensor-parallel axis; -1 for None.
  int64_t dim = -1;
  /// Whether the split is dropped (not an error) where the tensor-parallel
  /// degree does not divide the dimension: the vocabulary.
  bool optional = false;
  /// Why, in words (braid-shard's `explain`).
  std::string reason;
  /// The blocks the split is strided over: a fused projection whose output
  /// braid.slice cuts into b equal parts (q, k and v) is split within each
  /// part, so every device gets its heads of each (#braid.sharding's
  /// `blocks`).
  int64_t blocks = 1;
};

/// One word for a role: "column", "row", ...
StringRef stringifyRole(TensorParallelDecision::Role role);

/// The tensor-parallel plan of a module. Parameters are identified by their
/// full names (a layer's local name under each prefix its repeats give it),
/// so every `braid.param` of one parameter (forward, backward and update
/// layers, tied uses) gets one decision; only forward ops (no phase, or
/// phase F) are analysed.
class TensorParallelPlan {
public:
  explicit TensorParallelPlan(ModuleOp module);

  /// The decision for `param`. Optimizer state follows the parameter it is
  /// updated with (the non-state parameter that the update op combines
  /// with it elementwise).
  const TensorParallelDecision &lookup(ParamOp param);

  /// The parameter `state` is the optimizer state of, if found.
  ParamOp getOwner(ParamOp state) const { return owners.lookup(state); }

  /// The full names `param` reads: inside a layer applied by a repeat with
  /// prefix `h`, `h.*.<local name>` (every instance at once).
  SmallVector<std::string> fullNames(ParamOp param);

private:
  void analyse(Block &block);
  void record(ParamOp param, TensorParallelDecision decision);
  SmallVector<std::string> scopesOf(LayerOp layer);

  /// Decisions by full name.
  llvm::StringMap<TensorParallelDecision> decisions;
  /// Names whose uses disagree on the dimension: kept whole.
  llvm::StringSet<> conflicts;
  /// For each layer, the name prefixes its parameters take ("h.*." under a
  /// repeat with prefix "h"; "" where names are global).
  llvm::DenseMap<Operation *, SmallVector<std::string>> scopes;
  llvm::DenseMap<Operation *, SmallVector<RepeatOp>> repeatsOf;
  llvm::DenseMap<ParamOp, ParamOp> owners;
  TensorParallelDecision none;
};

} // namespace mlir::braid

#endif // BRAID_DIALECT_BRAID_TRANSFORMS_TENSORPARALLELPLAN_H
