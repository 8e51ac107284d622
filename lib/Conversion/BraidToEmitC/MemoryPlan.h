//===- MemoryPlan.h - Buffer offsets in a function's arena ------*- C++ -*-===//
//
// Part of braid-lower-to-emitc; see Lowering.h. The buffers of a lowered
// function, each with the ops (indices in the function's body) between
// which it holds a value, and their offsets in one arena per function.
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_LIB_CONVERSION_BRAIDTOEMITC_MEMORYPLAN_H
#define BRAID_LIB_CONVERSION_BRAIDTOEMITC_MEMORYPLAN_H

#include "llvm/ADT/ArrayRef.h"

#include <algorithm>
#include <cstdint>

namespace mlir::braid::lowering {

/// Every buffer starts at a multiple of this many bytes (the runtime's
/// BRAID_RT_MEMORY_ALIGNMENT, which braid_rt_program_alloc rounds to).
constexpr int64_t kBufferAlignment = 64;

inline int64_t alignBytes(int64_t bytes) {
  return std::max<int64_t>(1,
                           (bytes + kBufferAlignment - 1) / kBufferAlignment) *
         kBufferAlignment;
}

/// One buffer of a function: live from op `start` to op `end` of its body
/// (inclusive: an op's operands and results never share memory unless the
/// lowering made the result reuse an operand).
struct PlannedBuffer {
  int64_t bytes = 0; // a multiple of kBufferAlignment
  int64_t start = 0, end = 0;
  /// The pipeline stage whose code alone uses it, or -1 (every rank): two
  /// stages' buffers never exist on the same rank.
  int64_t stage = -1;
  /// Whether it holds a parameter gradient (for the report).
  bool gradient = false;
  /// Its offset in the arena, once assigned.
  int64_t offset = -1;

  /// Whether `a` and `b` may be in memory at the same time.
  static bool interfere(const PlannedBuffer &a, const PlannedBuffer &b) {
    if (a.stage >= 0 && b.stage >= 0 && a.stage != b.stage)
      return false;
    return a.start <= b.end && b.start <= a.end;
  }
};

/// Assigns each buffer an offset such that interfering buffers do not
/// overlap: largest first, each in the smallest gap between the buffers
/// already placed that interfere with it (best fit), else above them.
void assignOffsets(llvm::MutableArrayRef<PlannedBuffer> buffers);

/// The bytes of the arena on a rank of pipeline stage `stage` (-1: a rank
/// outside pipelines): the end of the highest buffer it uses. Without
/// offsets (no reuse), the sum of the buffers it uses.
int64_t getArenaBytes(llvm::ArrayRef<PlannedBuffer> buffers, int64_t stage);

/// The live bytes at the op where they peak on a rank of `stage`, split into
/// gradients and the rest.
struct LivePeak {
  int64_t gradients = 0, others = 0;
};
LivePeak getLivePeak(llvm::ArrayRef<PlannedBuffer> buffers, int64_t stage);

} // namespace mlir::braid::lowering

#endif // BRAID_LIB_CONVERSION_BRAIDTOEMITC_MEMORYPLAN_H
