//===- ShardingUtils.h - Shardings as values for the passes -----*- C++ -*-===//
//
// A mutable view of #braid.sharding used by propagation and partitioning,
// and how ops carry the shardings propagation chose.
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_DIALECT_BRAID_TRANSFORMS_SHARDINGUTILS_H
#define BRAID_DIALECT_BRAID_TRANSFORMS_SHARDINGUTILS_H

#include "braid/Dialect/Braid/IR/BraidOps.h"
#include "braid/Dialect/Braid/Utils/ShardingTransparent.h"

namespace mlir::braid {

/// The attribute on an op listing its results' shardings.
constexpr StringLiteral kShardingsAttrName = "braid.shardings";

/// On a braid.param and the braid.store_param of the same state tensor: it
/// holds a sum that each device stores as its own share (pending over the
/// axes the stored value is pending over) and that is reduced where it is
/// read. braid-train-step's defer-validation keeps a step's gradient sum
/// of squares so, so that its all_reduce runs during the next step.
constexpr StringLiteral kPendingSumAttrName = "braid.pending_sum";

struct Sharding {
  /// Per dimension, the mesh axes it is split over (major to minor).
  SmallVector<SmallVector<StringRef>> dims;
  /// Axes over which the value is a pending partial sum.
  SmallVector<StringRef> partial;
  /// Per dimension, the blocks a split is strided over (#braid.sharding's
  /// `blocks`); empty when every count is 1.
  SmallVector<int64_t> blocks;

  static Sharding replicated(int64_t rank) {
    Sharding s;
    s.dims.resize(rank);
    return s;
  }
  static Sharding fromAttr(ShardingAttr attr);
  ShardingAttr toAttr(MeshOp mesh) const;

  bool isReplicated() const;
  bool operator==(const Sharding &other) const {
    if (dims != other.dims || partial != other.partial)
      return false;
    for (unsigned d = 0; d < dims.size(); ++d)
      if (getBlocks(d) != other.getBlocks(d))
        return false;
    return true;
  }
  bool operator!=(const Sharding &other) const { return !(*this == other); }
  /// The product of the sizes of the axes dimension `d` is split over.
  int64_t splitCount(MeshOp mesh, unsigned d) const;
  /// The local shape of a tensor of `type` under this sharding.
  RankedTensorType localType(MeshOp mesh, RankedTensorType type) const;

  /// The blocks dimension `d` is split in (1 where not strided).
  int64_t getBlocks(unsigned d) const {
    return d < blocks.size() ? blocks[d] : 1;
  }
  /// Sets dimension `d`'s split: `axes` over `count` blocks.
  void setDim(unsigned d, ArrayRef<StringRef> axes, int64_t count = 1);
  /// Inserts an unsplit dimension at `d` (a stacked one), or removes one.
  void insertDim(unsigned d);
  void eraseDim(unsigned d);
};

/// The product of the sizes of `axes` of `mesh`.
int64_t axesSize(MeshOp mesh, ArrayRef<StringRef> axes);

/// The shardings of `op`'s results recorded by propagation, if any.
std::optional<SmallVector<Sharding>> getResultShardings(Operation *op);

} // namespace mlir::braid

#endif // BRAID_DIALECT_BRAID_TRANSFORMS_SHARDINGUTILS_H
