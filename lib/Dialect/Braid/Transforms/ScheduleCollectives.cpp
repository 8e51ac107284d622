//===- ScheduleCollectives.cpp - Start collectives early, wait late -------===//
//
// Reorders each block so that every started collective begins as soon as
// its operand is computed and is waited for only when a result is needed.
// braid-async-collectives leaves a start where the blocking collective was,
// usually right after a long stretch of compute it does not depend on; this
// pass is the scheduler that turns the start/wait split into overlap.
//
// The order is a list schedule of the block's dataflow graph:
//   - ops are visited in their original order and placed, each after its
//     unplaced dependences (SSA values, also those used in nested regions,
//     and the order of ops that touch parameters);
//   - a start is placed as soon as what it still needs is cheap to pull
//     ahead: pure ops and parameter reads (never a braid.repeat, a pipeline
//     or another wait), and fewer than `max-in-flight` collectives are
//     already started and not yet waited for;
//   - a wait, and the pure ops that depend on it, are placed only when a
//     later op that stays in place (a repeat, a store, the terminator, a
//     collective) needs them.
// Collectives are recognised through CollectiveOpInterface. Only the order
// changes: every op computes what it did, so results are bit-identical.
//
//===----------------------------------------------------------------------===//

#include "braid/Dialect/Braid/IR/BraidOps.h"
#include "braid/Dialect/Braid/Transforms/Passes.h"

#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "braid-schedule-collectives"

namespace mlir::braid {
#define GEN_PASS_DEF_SCHEDULECOLLECTIVESPASS
#include "braid/Dialect/Braid/Transforms/Passes.h.inc"
} // namespace mlir::braid

using namespace mlir;
using namespace mlir::braid;

namespace {

static bool isStart(Operation *op) {
  auto collective = dyn_cast<CollectiveOpInterface>(op);
  return collective && collective.isStarted();
}

/// Whether `op` may write a parameter: a store, or an op whose effects are
/// unknown (a repeat whose layer stores, a pipeline, anything unmodelled).
/// Collectives and waits only move their operands.
static bool mayWriteParameters(Operation *op) {
  if (isa<StoreParamOp>(op))
    return true;
  if (isa<ParamOp, WaitOp, CollectiveOpInterface>(op) || isPure(op))
    return false;
  if (auto repeat = dyn_cast<RepeatOp>(op)) {
    auto layer = SymbolTable::lookupNearestSymbolFrom<LayerOp>(
        op, repeat.getLayerAttr());
    return !layer || layer.getBody()
                         .walk([](Operation *inner) {
                           return mayWriteParameters(inner)
                                      ? WalkResult::interrupt()
                                      : WalkResult::advance();
                         })
                         .wasInterrupted();
  }
  if (auto effects = dyn_cast<MemoryEffectOpInterface>(op))
    return effects.hasEffect<MemoryEffects::Write>();
  return true;
}

/// Whether `op` may be pulled ahead of where it was to let a start begin
/// earlier: cheap to move and free of ordering constraints of its own.
static bool isPullable(Operation *op) {
  return isa<ParamOp>(op) ||
         (isPure(op) && op->getNumRegions() == 0 && !isa<WaitOp>(op));
}

/// The schedule of one block.
class BlockScheduler {
public:
  BlockScheduler(Block &block, int64_t maxInFlight)
      : block(block), maxInFlight(maxInFlight) {}

  /// Reorders the block; returns whether anything moved.
  bool run();

private:
  void computeDependences();
  /// Places `op` after its unplaced dependences.
  void place(Operation *op);
  /// Places every start whose remaining dependences may be pulled ahead.
  void placeReadyStarts();
  /// Collects the unplaced dependences of `op` into `cone`; false if one of
  /// them may not be pulled ahead.
  bool collectCone(Operation *op, llvm::SetVector<Operation *> &cone);

  Block &block;
  int64_t maxInFlight;
  SmallVector<Operation *> original;
  DenseMap<Operation *, unsigned> position;
  DenseMap<Operation *, SmallVector<Operation *>> deps;
  /// Waits and the pure ops depending on them: placed on demand.
  DenseSet<Operation *> deferred;
  DenseSet<Operation *> placed;
  SmallVector<Operation *> order;
  SmallVector<Operation *> pendingStarts;
  DenseSet<Operation *> inFlight;
};

void BlockScheduler::computeDependences() {
  for (Operation &op : block.without_terminator()) {
    position[&op] = original.size();
    original.push_back(&op);
  }
  // Ordering around parameters: a read stays after the last op that may
  // write before it; a writer stays after everything that reads or writes
  // before it (collectives count as readers: a started all_gather reads its
  // operand, which may be a parameter's buffer, until its wait).
  Operation *lastWriter = nullptr;
  SmallVector<Operation *> sinceWriter;
  for (Operation *op : original) {
    llvm::SetVector<Operation *> d;
    op->walk([&](Operation *inner) {
      for (Value v : inner->getOperands()) {
        Operation *def = v.getDefiningOp();
        if (!def)
          continue;
        if (Operation *ancestor = block.findAncestorOpInBlock(*def);
            ancestor && ancestor != op && position.count(ancestor))
          d.insert(ancestor);
      }
    });
    bool writes = mayWriteParameters(op);
    bool reads = isa<ParamOp, WaitOp, CollectiveOpInterface>(op) || writes ||
                 !isPure(op);
    if (writes) {
      d.insert(sinceWriter.begin(), sinceWriter.end());
      if (lastWriter)
        d.insert(lastWriter);
      lastWriter = op;
      sinceWriter.clear();
    } else if (reads) {
      if (lastWriter)
        d.insert(lastWriter);
      sinceWriter.push_back(op);
    }
    // Other ops with unknown effects keep their order among themselves.
    deps[op] = SmallVector<Operation *>(d.begin(), d.end());
    llvm::sort(deps[op], [&](Operation *a, Operation *b) {
      return position[a] < position[b];
    });
  }
  // Ops that are neither pure nor collectives nor parameter reads stay in
  // their relative order.
  Operation *lastPinned = nullptr;
  for (Operation *op : original) {
    if (isPure(op) || isa<ParamOp, WaitOp, CollectiveOpInterface>(op))
      continue;
    if (lastPinned && !llvm::is_contained(deps[op], lastPinned))
      deps[op].insert(llvm::upper_bound(deps[op], lastPinned,
                                        [&](Operation *a, Operation *b) {
                                          return position[a] < position[b];
                                        }),
                      lastPinned);
    lastPinned = op;
  }
  // Deferred: waits and the pure ops that (transitively) use them.
  for (Operation *op : original) {
    if (isa<WaitOp>(op) ||
        (isPure(op) && llvm::any_of(deps[op], [&](Operation *d) {
           return deferred.contains(d);
         })))
      deferred.insert(op);
    if (isStart(op))
      pendingStarts.push_back(op);
  }
}

void BlockScheduler::place(Operation *op) {
  if (placed.contains(op))
    return;
  // Iteratively, so that long chains of deferred ops need no deep recursion.
  SmallVector<std::pair<Operation *, unsigned>> stack = {{op, 0}};
  while (!stack.empty()) {
    auto &[current, next] = stack.back();
    ArrayRef<Operation *> ds = deps[current];
    while (next < ds.size() && placed.contains(ds[next]))
      ++next;
    if (next < ds.size()) {
      Operation *d = ds[next];
      stack.push_back({d, 0});
      continue;
    }
    Operation *done = current;
    stack.pop_back();
    if (placed.contains(done))
      continue;
    placed.insert(done);
    order.push_back(done);
    if (isStart(done))
      inFlight.insert(done);
    if (auto wait = dyn_cast<WaitOp>(done))
      inFlight.erase(wait.getFuture().getDefiningOp());
  }
}

bool BlockScheduler::collectCone(Operation *op,
                                 llvm::SetVector<Operation *> &cone) {
  SmallVector<Operation *> work(deps[op].begin(), deps[op].end());
  while (!work.empty()) {
    Operation *d = work.pop_back_val();
    if (placed.contains(d) || cone.contains(d))
      continue;
    if (!isPullable(d))
      return false;
    cone.insert(d);
    llvm::append_range(work, deps[d]);
  }
  return true;
}

void BlockScheduler::placeReadyStarts() {
  bool progress = true;
  while (progress) {
    progress = false;
    for (Operation *start : pendingStarts) {
      if (placed.contains(start))
        continue;
      if ((int64_t)inFlight.size() >= maxInFlight)
        return;
      llvm::SetVector<Operation *> cone;
      if (!collectCone(start, cone))
        continue;
      LLVM_DEBUG(llvm::dbgs() << "start early (pulling " << cone.size()
                              << " ops): " << *start << "\n");
      place(start);
      progress = true;
    }
  }
}

bool BlockScheduler::run() {
  computeDependences();
  if (pendingStarts.empty() && deferred.empty())
    return false;
  placeReadyStarts();
  for (Operation *op : original) {
    if (placed.contains(op) || deferred.contains(op))
      continue;
    place(op);
    placeReadyStarts();
  }
  // What only the terminator (or nothing) needs, in its original order.
  for (Operation *op : original)
    if (!placed.contains(op)) {
      place(op);
      placeReadyStarts();
    }
  assert(order.size() == original.size() && "every op is placed once");
  if (order == original)
    return false;
  Operation *terminator = block.getTerminator();
  for (Operation *op : order)
    op->moveBefore(terminator);
  return true;
}

struct ScheduleCollectivesPass
    : public braid::impl::ScheduleCollectivesPassBase<ScheduleCollectivesPass> {
  using ScheduleCollectivesPassBase::ScheduleCollectivesPassBase;

  void runOnOperation() override {
    if (maxInFlight < 1) {
      getOperation().emitError()
          << "braid-schedule-collectives: max-in-flight must be at least 1, "
             "got "
          << static_cast<int64_t>(maxInFlight);
      return signalPassFailure();
    }
    SmallVector<Block *> blocks;
    getOperation().walk([&](Block *block) {
      if (!block->empty() && block->back().hasTrait<OpTrait::IsTerminator>() &&
          llvm::any_of(*block, [](Operation &op) {
            return isa<WaitOp>(op) || isStart(&op);
          }))
        blocks.push_back(block);
    });
    for (Block *block : blocks)
      BlockScheduler(*block, maxInFlight).run();
  }
};

} // namespace
