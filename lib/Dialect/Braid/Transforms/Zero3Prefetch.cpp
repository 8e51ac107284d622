//===- Zero3Prefetch.cpp - Gather ZeRO-3 parameters ahead of use ----------===//
//
// ZeRO-3 stores each parameter as a share and all_gathers it where the
// forward or the backward uses it, just in time: the transfer waits on
// nothing but also hides behind nothing. This pass starts the gathers of
// the next `depth` groups (the parameters one op consumes, e.g. a layer
// norm's weight and bias) before the current group's compute, so they move
// while it runs, with at most `depth` groups in flight beyond the one in use.
//
// With `across-repeats`, the gathers do not stop at a layer's block: a
// repeated layer's first `depth` groups are started by the instance before
// (the read of the next instance's share is marked `braid.next_instance`)
// and carried into the next instance as futures, the first instance's
// before the repeat; so instance i + 1's first layer norm does not wait for
// its parameters, while still at most `depth` groups are in flight.
//
// What is gathered may be the read's value through sharding-transparent ops
// (bf16-mixed gathers a parameter's working copy, a braid.convert of the
// read): those ops move with the read. Such a gather does not cross into
// the next instance: its operand is a temporary of the instance, which
// the generated code does not keep alive past the instance's end. Nor
// does a bucket of braid-bucket-gathers (a gather of a concatenation of
// shares, one group here), which is said with a warning.
//
//===----------------------------------------------------------------------===//

#include "braid/Dialect/Braid/IR/BraidOps.h"
#include "braid/Dialect/Braid/Transforms/Passes.h"
#include "braid/Dialect/Braid/Transforms/PhaseUtils.h"
#include "braid/Dialect/Braid/Transforms/ShardingUtils.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "braid-zero3-prefetch"

namespace mlir::braid {
#define GEN_PASS_DEF_ZERO3PREFETCHPASS
#include "braid/Dialect/Braid/Transforms/Passes.h.inc"
} // namespace mlir::braid

using namespace mlir;
using namespace mlir::braid;

namespace {

/// One parameter gather: the parameter reads (one, or a bucket's,
/// braid-bucket-gathers), the ops from the reads to the gathered value
/// (sharding-transparent ones; a bucket's reshapes and concatenation), its
/// started all_gather and what consumes its future: the wait that hands
/// the whole parameters to their users, or a repeat that carries it into
/// its first instance.
struct Gather {
  SmallVector<ParamOp, 1> params;
  SmallVector<Operation *> chain;
  Operation *start;
  Operation *use;
};

/// Whether `op` is part of reading a share: a parameter read, a
/// sharding-transparent op computing from one (a working copy's convert),
/// or a bucketed gather's flattening and concatenation of shares.
static bool isShareRead(Operation *op) {
  if (isa<ParamOp>(op))
    return true;
  SmallVector<Operation *> chain;
  SmallVector<ParamOp> reads;
  if (auto concat = dyn_cast<ConcatOp>(op))
    return getBucketShareReads(concat.getResult(), op->getBlock(), reads,
                               chain);
  if (auto reshape = dyn_cast<ReshapeOp>(op))
    return reshape->hasOneUse() &&
           llvm::any_of(reshape->getUsers(), [&](Operation *user) {
             return isa<ConcatOp>(user) &&
                    getBucketShareReads(user->getResult(0), op->getBlock(),
                                        reads, chain);
           });
  if (op->getNumResults() != 1 || !isShardingTransparent(op))
    return false;
  return static_cast<bool>(
      getShareRead(op->getResult(0), op->getBlock(), chain));
}

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
  SmallVector<Operation *> chain;
  SmallVector<ParamOp, 1> params;
  if (ParamOp param = getShareRead(collective.getInput(), op.getBlock(), chain))
    params.push_back(param);
  else if (!getBucketShareReads(collective.getInput(), op.getBlock(), params,
                                chain))
    return std::nullopt;
  if (collective.isStarted()) {
    Value future = op.getResult(0);
    if (!future.hasOneUse())
      return std::nullopt;
    Operation *use = *future.getUsers().begin();
    if (!isa<WaitOp, RepeatOp>(use) || use->getBlock() != op.getBlock())
      return std::nullopt;
    return Gather{params, chain, &op, use};
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
  return Gather{params, chain, start, wait};
}

/// The op that first needs what `wait` gives: the next one that is not a
/// wait or part of a share's read.
static Operation *getNeeder(Operation *wait) {
  Operation *op = wait->getNextNode();
  while (isa<WaitOp>(op) || isShareRead(op))
    op = op->getNextNode();
  return op;
}

/// The wait in `repeat`'s layer of the future it carries in as operand
/// `index`, if there is exactly one.
static WaitOp getCarriedWait(RepeatOp repeat, unsigned index) {
  auto layer = SymbolTable::lookupNearestSymbolFrom<LayerOp>(
      repeat, repeat.getLayerAttr());
  if (!layer || index >= layer.getBody().getNumArguments())
    return {};
  Value arg = layer.getBody().getArgument(index);
  return arg.hasOneUse() ? dyn_cast<WaitOp>(*arg.getUsers().begin()) : WaitOp();
}

/// The parameter gathers of `block`, all started, grouped by the op that
/// first needs them, in order of need: `groups[k]` is started before
/// `anchors[k]` at the latest. Gathers a repeat carries into its layer form
/// one group per op of the layer that needs them, all anchored at the
/// repeat.
static void collectGroups(Block &block, OpBuilder &b,
                          SmallVectorImpl<SmallVector<Gather>> &groups,
                          SmallVectorImpl<Operation *> &anchors) {
  SmallVector<Gather> gathers;
  for (Operation &op : llvm::make_early_inc_range(block))
    if (std::optional<Gather> g = asGather(op, b))
      gathers.push_back(*g);
  // Sorted by the use, then (for a repeat) by the wait in its layer, then
  // in block order (`order`: llvm::sort with a total order, the stable
  // sort's, without libstdc++ 12's deprecated get_temporary_buffer that
  // std::stable_sort uses); the key tells groups apart.
  struct Need {
    Gather gather;
    unsigned position, inner, order;
    // The repeat (or null) and the op that needs the parameters.
    std::pair<Operation *, Operation *> key;
  };
  DenseMap<Operation *, unsigned> position;
  for (auto [i, op] : llvm::enumerate(block))
    position[&op] = i;
  SmallVector<Need> needs;
  for (auto [i, g] : llvm::enumerate(gathers)) {
    Need n{g, position.lookup(g.use), 0, unsigned(i), {nullptr, nullptr}};
    if (auto repeat = dyn_cast<RepeatOp>(g.use)) {
      n.key = {repeat, nullptr};
      unsigned index =
          g.start->getResult(0).getUses().begin()->getOperandNumber();
      if (WaitOp wait = getCarriedWait(repeat, index)) {
        n.key.second = getNeeder(wait);
        for (Operation *op = wait; op; op = op->getPrevNode())
          ++n.inner;
      }
    } else {
      n.key = {nullptr, getNeeder(g.use)};
    }
    needs.push_back(n);
  }
  llvm::sort(needs, [](const Need &a, const Need &b) {
    return std::tie(a.position, a.inner, a.order) <
           std::tie(b.position, b.inner, b.order);
  });
  std::pair<Operation *, Operation *> lastKey;
  for (const Need &n : needs) {
    if (groups.empty() || n.key != lastKey) {
      groups.emplace_back();
      anchors.push_back(n.key.first ? n.key.first : n.key.second);
      lastKey = n.key;
    }
    groups.back().push_back(n.gather);
  }
}

/// The top of `block`: after the leading reads of shares (their parameter
/// reads have no operands).
static Operation *getTop(Block &block) {
  Operation *top = &block.front();
  while (isShareRead(top))
    top = top->getNextNode();
  return top;
}

static void prefetch(Block &block, int64_t depth) {
  OpBuilder b(block.getParentOp()->getContext());
  SmallVector<SmallVector<Gather>> groups;
  SmallVector<Operation *> needers;
  collectGroups(block, b, groups, needers);
  if (groups.empty())
    return;
  Operation *top = getTop(block);
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
      // is read where it was (a bucket's all where they were).
      bool blocked = false;
      for (ParamOp param : g.params)
        for (Operation *op = anchor; op != param && op != g.start;
             op = op->getNextNode())
          blocked |= mayWrite(op, param.getName());
      if (blocked)
        continue;
      // The reads and the ops from them to the gathered value, in order.
      for (ParamOp param : g.params)
        if (anchor->isBeforeInBlock(param))
          param->moveBefore(anchor);
      for (Operation *op : g.chain)
        if (anchor->isBeforeInBlock(op))
          op->moveBefore(anchor);
      g.start->moveBefore(anchor);
      LLVM_DEBUG(llvm::dbgs()
                 << "braid-zero3-prefetch: '" << g.params.front().getName()
                 << "' (group " << k << ") starts before " << *anchor << "\n");
    }
  }
}

/// Starts the first `depth` groups of `layer`'s body (already prefetched)
/// in the instance before: each gather reads the next instance's share
/// (`braid.next_instance`) right before the op that consumes group
/// `m + j - depth` of the `m` groups, and its future is carried into the
/// next instance, which waits for it where it waited before; each of
/// `repeats` (all of `layer`'s uses) starts its first instance's gathers
/// before itself. Returns whether the layer changed.
static bool prefetchAcross(LayerOp layer, ArrayRef<RepeatOp> repeats,
                           int64_t depth) {
  Block &body = layer.getBody().front();
  OpBuilder b(layer.getContext());
  SmallVector<SmallVector<Gather>> groups;
  SmallVector<Operation *> needers;
  collectGroups(body, b, groups, needers);
  int64_t m = groups.size();
  if (m == 0)
    return false;
  unsigned carried = RepeatOp(repeats.front()).getNumCarried();
  if (llvm::any_of(repeats,
                   [&](RepeatOp r) { return r.getNumCarried() != carried; }))
    return false;
  int64_t crossing = std::min(depth, m);
  // The next instance's parameters are read while this one runs: nothing
  // this body runs may write them (instances without a prefix share theirs).
  // A working copy gathered would be a temporary of this instance still
  // read by the gather while the next one runs (braid-lower-to-emitc
  // refuses it): such a layer keeps its gathers in its block. So does a
  // layer whose first groups are bucketed (braid-bucket-gathers), a
  // concatenation of shares: said, since braidc keeps those single
  // (leave-first) and another pipeline would lose the prefetch unawares.
  for (int64_t j = 0; j < crossing; ++j)
    for (Gather &g : groups[j]) {
      bool workingCopies = llvm::any_of(g.chain, [](Operation *op) {
        return !isa<ReshapeOp, ConcatOp>(op);
      });
      if (g.params.size() > 1 && !workingCopies) {
        g.start->emitWarning()
            << "braid-zero3-prefetch: a bucket of " << g.params.size()
            << " parameter gathers is among @" << layer.getSymName()
            << "'s first " << crossing
            << " group(s), which across-repeats would start in the "
               "instance before; a bucket gathers a concatenation, a "
               "temporary of the instance, so the layer's gathers stay in "
               "it (run braid-bucket-gathers with leave-first=" << depth
            << ")";
        return false;
      }
      if (!isa<WaitOp>(g.use) || !g.chain.empty() ||
          getNextInstanceShareRead(
              cast<CollectiveOpInterface>(g.start).getInput()))
        return false;
      for (Operation &op : body)
        if (mayWrite(&op, g.params.front().getName()))
          return false;
    }
  LLVM_DEBUG(llvm::dbgs() << "braid-zero3-prefetch: @" << layer.getSymName()
                          << " starts " << crossing
                          << " group(s) of the next instance\n");

  // With fewer groups than `depth`, some start at the top of the instance
  // before: after its parameter reads and the starts that move.
  DenseSet<Operation *> moving;
  for (int64_t j = 0; j < crossing; ++j)
    for (const Gather &g : groups[j])
      moving.insert(g.start);
  Operation *top = &body.front();
  while (isShareRead(top) || moving.contains(top))
    top = top->getNextNode();
  auto yield = cast<YieldOp>(body.getTerminator());
  SmallVector<Value> futures;
  SmallVector<ParamOp> reads;
  SmallVector<Operation *> starts;
  for (int64_t j = 0; j < crossing; ++j) {
    Operation *anchor = m + j - depth >= 0 ? needers[m + j - depth] : top;
    for (Gather &g : groups[j]) {
      // The wait takes the future the instance before started.
      Value arg = body.insertArgument(carried + futures.size(),
                                      g.start->getResult(0).getType(),
                                      g.start->getLoc());
      g.use->setOperand(0, arg);
      b.setInsertionPoint(anchor);
      ParamOp param = g.params.front();
      auto next = cast<ParamOp>(b.clone(*param));
      next->setAttr(kNextInstanceAttrName, b.getUnitAttr());
      g.start->moveBefore(anchor);
      g.start->replaceUsesOfWith(param.getResult(), next.getResult());
      if (param->use_empty())
        param->erase();
      futures.push_back(g.start->getResult(0));
      reads.push_back(next);
      starts.push_back(g.start);
    }
  }
  SmallVector<Value> yields(yield.getOperands());
  yields.insert(yields.begin() + carried, futures.begin(), futures.end());
  yield->setOperands(yields);
  MLIRContext *ctx = layer.getContext();
  layer.setFunctionTypeAttr(TypeAttr::get(FunctionType::get(
      ctx, body.getArgumentTypes(), ValueRange(yields).getTypes())));
  // No attributes on the carried futures.
  auto widen = [&](ArrayAttr attrs) {
    SmallVector<Attribute> list(attrs.begin(), attrs.end());
    list.insert(list.begin() + carried, futures.size(),
                DictionaryAttr::get(ctx));
    return ArrayAttr::get(ctx, list);
  };
  if (ArrayAttr attrs = layer.getArgAttrsAttr())
    layer.setArgAttrsAttr(widen(attrs));
  if (ArrayAttr attrs = layer.getResAttrsAttr())
    layer.setResAttrsAttr(widen(attrs));

  // Each repeat starts its first instance's gathers before itself.
  for (RepeatOp repeat : repeats) {
    b.setInsertionPoint(repeat);
    int64_t firstRun =
        static_cast<int64_t>(repeat.getFirst()) +
        (repeat.getReverse() ? static_cast<int64_t>(repeat.getCount()) - 1 : 0);
    std::string prefix = repeat.getParamPrefix(firstRun);
    SmallVector<Value> inputs(repeat.getInputs());
    SmallVector<Value> before;
    for (auto [read, start] : llvm::zip(reads, starts)) {
      auto param = cast<ParamOp>(b.clone(*read));
      param->removeAttr(kNextInstanceAttrName);
      param.setName(prefix + read.getName().str());
      IRMapping mapping;
      mapping.map(read.getResult(), param.getResult());
      before.push_back(b.clone(*start, mapping)->getResult(0));
    }
    inputs.insert(inputs.begin() + carried, before.begin(), before.end());
    SmallVector<Type> types(repeat.getResultTypes());
    SmallVector<Type> futureTypes(ValueRange(before).getTypes());
    types.insert(types.begin() + carried, futureTypes.begin(),
                 futureTypes.end());
    auto wider =
        RepeatOp::create(b, repeat.getLoc(), types, inputs, repeat->getAttrs());
    if (repeat.getCarried())
      wider.setCarried(carried + before.size());
    for (auto [i, r] : llvm::enumerate(repeat.getResults()))
      r.replaceAllUsesWith(
          wider.getResult(i < carried ? i : i + before.size()));
    repeat.erase();
  }
  return true;
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
    // Layer bodies first: their groups decide what crosses the repeats;
    // then the blocks that run repeats, whose gathers include the ones
    // carried into them.
    SmallVector<Block *> layerBlocks, blocks;
    getOperation().walk([&](Operation *op) {
      if (isa<LayerOp, FunctionOpInterface>(op))
        for (Region &r : op->getRegions())
          for (Block &blk : r)
            (isa<LayerOp>(op) ? layerBlocks : blocks).push_back(&blk);
    });
    for (Block *blk : layerBlocks)
      prefetch(*blk, depth);
    if (acrossRepeats) {
      ModuleOp module = getOperation();
      llvm::SetVector<Block *> again;
      for (LayerOp layer : llvm::to_vector(module.getOps<LayerOp>())) {
        // Only layers that nothing but repeats use change signature.
        std::optional<SmallVector<RepeatOp>> found =
            getRepeatsOnlyUsing(layer, module);
        if (!found)
          continue;
        SmallVector<RepeatOp> &repeats = *found;
        SmallVector<Block *> parents;
        for (RepeatOp repeat : repeats)
          parents.push_back(repeat->getBlock());
        if (!repeats.empty() && prefetchAcross(layer, repeats, depth))
          again.insert(parents.begin(), parents.end());
      }
      // A layer running a repeat is placed again with the new gathers.
      for (Block *blk : again)
        if (isa<LayerOp>(blk->getParentOp()))
          prefetch(*blk, depth);
    }
    for (Block *blk : blocks)
      prefetch(*blk, depth);
  }
};

} // namespace
