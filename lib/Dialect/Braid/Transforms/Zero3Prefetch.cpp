//===- Zero3Prefetch.cpp - Gather ZeRO-3 parameters ahead of use ----------===//
//
// ZeRO-3 stores each parameter as a share and all_gathers it where the
// forward or the backward uses it, just in time: the transfer waits on
// nothing but also hides behind nothing. This pass starts the gathers of
// the next `depth` groups (the parameters one op consumes, e.g. a layer
// norm's weight and bias) before the current group's compute, so they move
// while it runs, with at most `depth` groups in flight beyond the one in use.
//
//===----------------------------------------------------------------------===//

#include "braid/Dialect/Braid/IR/BraidOps.h"
#include "braid/Dialect/Braid/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "braid-zero3-prefetch"

namespace mlir::braid {
#define GEN_PASS_DEF_ZERO3PREFETCHPASS
#include "braid/Dialect/Braid/Transforms/Passes.h.inc"
} // namespace mlir::braid

using namespace mlir;
using namespace mlir::braid;

namespace {

/// One parameter gather: the parameter read, its started all_gather and the
/// wait that hands the whole parameter to its users.
struct Gather {
  ParamOp param;
  Operation *start;
  WaitOp wait;
};

/// Whether `op` may write parameter `name`: a store of it, a repeat whose
/// layer (or a layer it repeats) stores any parameter, since instances'
/// names are computed, or a pipeline, conservatively.
static bool mayWrite(Operation *op, StringRef name) {
  if (auto store = dyn_cast<StoreParamOp>(op))
    return store.getName() == name;
  if (isa<PipelineOp>(op))
    return true;
  auto writes = [&](Operation *root) {
    return root
        ->walk([&](Operation *inner) {
          if (inner == root)
            return WalkResult::advance();
          return mayWrite(inner, name) ? WalkResult::interrupt()
                                       : WalkResult::advance();
        })
        .wasInterrupted();
  };
  if (auto repeat = dyn_cast<RepeatOp>(op)) {
    auto layer = SymbolTable::lookupNearestSymbolFrom<LayerOp>(
        op, repeat.getLayerAttr());
    return !layer || writes(layer);
  }
  return op->getNumRegions() > 0 && writes(op);
}

/// The all_gather of a parameter share in `block`, in started form with its
/// wait: a blocking gather is split (its wait where it was, so just in time
/// until moved).
static std::optional<Gather> asGather(Operation &op, OpBuilder &b) {
  auto collective = dyn_cast<CollectiveOpInterface>(&op);
  if (!collective ||
      collective.getCollectiveKind() != CollectiveKind::all_gather)
    return std::nullopt;
  auto param = collective.getInput().getDefiningOp<ParamOp>();
  if (!param || param->getBlock() != op.getBlock())
    return std::nullopt;
  if (collective.isStarted()) {
    Value future = op.getResult(0);
    if (!future.hasOneUse())
      return std::nullopt;
    auto wait = dyn_cast<WaitOp>(*future.getUsers().begin());
    if (!wait || wait->getBlock() != op.getBlock())
      return std::nullopt;
    return Gather{param, &op, wait};
  }
  b.setInsertionPoint(&op);
  Operation *start = collective.createStart(b);
  if (!start)
    return std::nullopt;
  // Waited for right before the first op of the block that needs it.
  Block *block = op.getBlock();
  Operation *first = block->getTerminator();
  for (Operation *user : op.getResult(0).getUsers())
    if (Operation *ancestor = block->findAncestorOpInBlock(*user))
      if (ancestor->isBeforeInBlock(first))
        first = ancestor;
  b.setInsertionPoint(first);
  auto wait = WaitOp::create(b, op.getLoc(), start->getResult(0));
  wait->setDiscardableAttrs(op.getDiscardableAttrDictionary());
  op.getResult(0).replaceAllUsesWith(wait.getResult());
  op.erase();
  return Gather{param, start, wait};
}

static void prefetch(Block &block, int64_t depth) {
  OpBuilder b(block.getParentOp()->getContext());
  SmallVector<Gather> gathers;
  for (Operation &op : llvm::make_early_inc_range(block))
    if (std::optional<Gather> g = asGather(op, b))
      gathers.push_back(*g);
  if (gathers.empty())
    return;
  // Each wait sits where its value is first needed: a group is the gathers
  // waited for before one op, in order of need.
  auto needer = [](const Gather &g) {
    Operation *op = g.wait->getNextNode();
    while (isa<WaitOp, ParamOp>(op))
      op = op->getNextNode();
    return op;
  };
  llvm::sort(gathers, [](const Gather &a, const Gather &b) {
    return a.wait->isBeforeInBlock(b.wait);
  });
  SmallVector<SmallVector<Gather>> groups;
  SmallVector<Operation *> needers;
  for (const Gather &g : gathers) {
    Operation *n = needer(g);
    if (needers.empty() || n != needers.back()) {
      groups.emplace_back();
      needers.push_back(n);
    }
    groups.back().push_back(g);
  }
  // The top: after the leading parameter reads (they have no operands).
  Operation *top = &block.front();
  while (isa<ParamOp>(top))
    top = top->getNextNode();
  // The first `depth` groups start at the top of the block; group k >= depth
  // right before the op that consumes group k - depth (after its waits), so
  // it moves while that op and the ones up to group k's consumer compute,
  // and at most `depth` gathers are in flight at any point.
  for (int64_t k = 0, e = groups.size(); k < e; ++k) {
    Operation *anchor = k < depth ? top : needers[k - depth];
    for (Gather &g : groups[k]) {
      if (anchor == g.start)
        continue;
      // A start placed earlier (by braid-schedule-collectives) moves down
      // to the anchor, so the bound holds; its read stays.
      if (g.start->isBeforeInBlock(anchor)) {
        g.start->moveBefore(anchor);
        continue;
      }
      // A parameter stored between the new and the old place of its read
      // is read where it was.
      bool blocked = false;
      for (Operation *op = anchor; op != g.param && op != g.start;
           op = op->getNextNode())
        blocked |= mayWrite(op, g.param.getName());
      if (blocked)
        continue;
      if (anchor->isBeforeInBlock(g.param))
        g.param->moveBefore(anchor);
      g.start->moveBefore(anchor);
      LLVM_DEBUG(llvm::dbgs()
                 << "braid-zero3-prefetch: '" << g.param.getName()
                 << "' (group " << k << ") starts before " << *anchor << "\n");
    }
  }
}

struct Zero3PrefetchPass
    : public braid::impl::Zero3PrefetchPassBase<Zero3PrefetchPass> {
  using Zero3PrefetchPassBase::Zero3PrefetchPassBase;

  void runOnOperation() override {
    if (depth < 0) {
      getOperation().emitError()
          << "braid-zero3-prefetch: depth must be >= 0, got "
          << static_cast<int64_t>(depth);
      return signalPassFailure();
    }
    if (depth == 0)
      return;
    SmallVector<Block *> blocks;
    getOperation().walk([&](Operation *op) {
      if (isa<LayerOp, FunctionOpInterface>(op))
        for (Region &r : op->getRegions())
          for (Block &blk : r)
            blocks.push_back(&blk);
    });
    for (Block *blk : blocks)
      prefetch(*blk, depth);
  }
};

} // namespace
