//===- MemoryPlan.cpp - Buffer offsets in a function's arena
//---------------===//
//
// Part of braid-lower-to-emitc; see MemoryPlan.h.
//
// Every buffer has a static size and the lowered code is straight-line in
// the order of the braid ops (a repeat or a pipeline is one op of its
// function, and a layer or piece it calls has its own arena), so the plan
// is an interval packing solved once at compile time: greedy by size with
// best fit, the usual heuristic for static plans (TFLite's and XLA's
// greedy by size). It costs nothing at run time (an offset is a constant)
// and, unlike free lists of size classes, lets buffers of different sizes
// share memory.
//
//===----------------------------------------------------------------------===//

#include "MemoryPlan.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"

#include <algorithm>
#include <map>
#include <numeric>

using namespace mlir::braid::lowering;

void mlir::braid::lowering::assignOffsets(
    llvm::MutableArrayRef<PlannedBuffer> buffers) {
  llvm::SmallVector<unsigned> order(buffers.size());
  std::iota(order.begin(), order.end(), 0);
  // Every rank's buffers first: each pipeline stage's then pack above
  // them on their own, so a stage's arena ends at its own highest buffer.
  // Ties go to the buffer planned first: a total order, so the order is
  // the stable sort's (std::stable_sort warns with libstdc++ 12 and
  // clang: it uses the deprecated std::get_temporary_buffer).
  llvm::sort(order, [&](unsigned a, unsigned b) {
    if ((buffers[a].stage < 0) != (buffers[b].stage < 0))
      return buffers[a].stage < 0;
    if (buffers[a].bytes != buffers[b].bytes)
      return buffers[a].bytes > buffers[b].bytes;
    if (buffers[a].start != buffers[b].start)
      return buffers[a].start < buffers[b].start;
    return a < b;
  });
  llvm::SmallVector<unsigned> placed;
  for (unsigned i : order) {
    PlannedBuffer &buffer = buffers[i];
    // The ranges taken by interfering buffers, in address order.
    llvm::SmallVector<std::pair<int64_t, int64_t>> taken;
    for (unsigned j : placed)
      if (PlannedBuffer::interfere(buffer, buffers[j]))
        taken.push_back(
            {buffers[j].offset, buffers[j].offset + buffers[j].bytes});
    llvm::sort(taken);
    int64_t best = -1, bestGap = INT64_MAX, top = 0;
    for (auto [begin, end] : taken) {
      int64_t gap = begin - top;
      if (gap >= buffer.bytes && gap < bestGap) {
        best = top;
        bestGap = gap;
      }
      top = std::max(top, end);
    }
    buffer.offset = best >= 0 ? best : top;
    placed.push_back(i);
  }
}

int64_t
mlir::braid::lowering::getArenaBytes(llvm::ArrayRef<PlannedBuffer> buffers,
                                     int64_t stage) {
  int64_t bytes = 0;
  for (const PlannedBuffer &b : buffers) {
    if (b.stage >= 0 && b.stage != stage)
      continue;
    bytes =
        b.offset >= 0 ? std::max(bytes, b.offset + b.bytes) : bytes + b.bytes;
  }
  return bytes;
}

LivePeak
mlir::braid::lowering::getLivePeak(llvm::ArrayRef<PlannedBuffer> buffers,
                                   int64_t stage) {
  // Live bytes change only where a buffer starts or ends: sweep the ops.
  std::map<int64_t, std::pair<int64_t, int64_t>> delta; // op -> (grad, other)
  for (const PlannedBuffer &b : buffers) {
    if (b.stage >= 0 && b.stage != stage)
      continue;
    auto &in = delta[b.start];
    auto &out = delta[b.end + 1];
    (b.gradient ? in.first : in.second) += b.bytes;
    (b.gradient ? out.first : out.second) -= b.bytes;
  }
  LivePeak peak, live;
  for (auto &[op, d] : delta) {
    live.gradients += d.first;
    live.others += d.second;
    if (live.gradients + live.others > peak.gradients + peak.others)
      peak = live;
  }
  return peak;
}
