//===- ShardingRule.h - How an op's dimensions map to factors ---*- C++ -*-===//
//
// After Shardy's OpShardingRule: an op's iteration space is a list of
// factors; every dimension of every operand and result maps to at most one
// factor. Sharding a factor over mesh axes shards every dimension mapped to
// it. A factor that appears in operands but in no result is a reduction:
// sharding it leaves the result a pending partial sum (or, for a mean, a
// partial sum after scaling).
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_DIALECT_BRAID_IR_SHARDINGRULE_H
#define BRAID_DIALECT_BRAID_IR_SHARDINGRULE_H

#include "llvm/ADT/SmallVector.h"

#include <cstdint>

namespace mlir::braid {

struct ShardingRule {
  enum class Kind {
    /// Appears in results: sharding it shards the results.
    Parallel,
    /// Parallel, but the op divides by the factor's whole extent (the
    /// gradient of a mean): each device's result is scaled by its share.
    ParallelMean,
    /// Summed over: sharding it makes the results partial sums.
    Sum,
    /// Averaged over: like Sum, after scaling each device's result by its
    /// share.
    Mean,
    /// In no result, and not a plain sum: sharding it makes the op
    /// exchange data with the devices sharing the factor (the vocabulary of
    /// a cross-entropy all-reduces its max, its sum of exponentials and the
    /// label's logit). Its results are complete, not partial.
    Cooperative,
    /// Must stay whole (a softmax or normalisation axis, a head
    /// dimension).
    Blocked,
  };

  struct Factor {
    int64_t size;
    Kind kind;
  };

  llvm::SmallVector<Factor> factors;
  /// For each operand and result, for each dimension, the factor it maps to
  /// or -1 (a broadcast dimension, or an integer operand's dimension the
  /// rule leaves free).
  llvm::SmallVector<llvm::SmallVector<int64_t>> operands, results;
  /// For each operand and result, for each dimension, the blocks b it is
  /// viewed as ([b, n / b]) with the factor indexing the minor part: a
  /// slice taking block j of b along a dimension maps it to a factor of
  /// size n / b. A tensor whose dimension is split over b * c blocks
  /// (#braid.sharding's `blocks`) gives its factor c blocks. Empty, or a
  /// dimension missing: 1.
  llvm::SmallVector<llvm::SmallVector<int64_t>> operandBlocks, resultBlocks;

  int64_t getOperandBlocks(unsigned i, unsigned d) const {
    return i < operandBlocks.size() && d < operandBlocks[i].size()
               ? operandBlocks[i][d]
               : 1;
  }
  int64_t getResultBlocks(unsigned i, unsigned d) const {
    return i < resultBlocks.size() && d < resultBlocks[i].size()
               ? resultBlocks[i][d]
               : 1;
  }

  /// Whether every dimension mapped to factor `f` (sizes from `operandShapes`
  /// and `resultShapes`) is divisible by `n`: a factor can only be split n
  /// ways if every tensor it indexes can.
  bool isDivisible(int64_t f, int64_t n,
                   llvm::ArrayRef<llvm::ArrayRef<int64_t>> operandShapes,
                   llvm::ArrayRef<llvm::ArrayRef<int64_t>> resultShapes) const {
    if (factors[f].size % n != 0)
      return false;
    auto check = [&](llvm::ArrayRef<llvm::SmallVector<int64_t>> maps,
                     llvm::ArrayRef<llvm::ArrayRef<int64_t>> shapes) {
      for (size_t t = 0; t < maps.size() && t < shapes.size(); ++t)
        for (size_t d = 0; d < maps[t].size(); ++d)
          if (maps[t][d] == f && shapes[t][d] % n != 0)
            return false;
      return true;
    };
    return check(operands, operandShapes) && check(results, resultShapes);
  }

  /// Adds a factor, returning its index.
  int64_t addFactor(int64_t size, Kind kind) {
    factors.push_back({size, kind});
    return factors.size() - 1;
  }
};

} // namespace mlir::braid

#endif // BRAID_DIALECT_BRAID_IR_SHARDINGRULE_H
