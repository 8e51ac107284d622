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
//     the order of ops that touch parameters, and a PowerSGD reduction
//     after the reads of the state it updates); a collective, and its wait,
//     touches parameters only when its operand may share a parameter's
//     buffer, so the all_reduce of a gradient norm's sum of squares crosses
//     the parameter stores of post-validate's optimistic updates;
//   - a start is placed as soon as what it still needs is cheap to pull
//     ahead: pure ops, parameter reads and repeats of layers that only
//     compute (never an optimizer update, another braid.repeat, a pipeline
//     or a wait), and fewer than `max-in-flight` collectives are already
//     started and not yet waited for; this is checked again each time an op
//     it could not pull is placed (a wait, a repeat), so it goes before the
//     ops that needed that one;
//   - starts ready at the same point go in the order their results are
//     first needed (earliest deadline first), not in program order;
//   - a wait, and the pure ops that depend on it, are placed only when a
//     later op that stays in place (a repeat, a store, the terminator, a
//     collective) needs them.
// Collectives are recognised through CollectiveOpInterface.
//
// A future cannot cross a layer's yield by rescheduling alone, yet the
// gradient reduction of a layer body (braid.repeat's `@block.W`) is what
// should overlap the next instances. So, first, each layer is split at the
// waits of its reductions whose results only its stacked results need: the
// wait and the pure ops after it move to a new layer `<name>.waited`; the
// layer yields the future, the repeat returns the future of the stack (one
// collective per instance), and after it come the wait and a repeat of
// `<name>.waited` (loop fission at the wait). Only the order changes:
// every op computes what it did, so results are bit-identical.
//
// Likewise a future cannot start inside a braid.pipeline, whose results
// are all ready only when it ends, yet a stage's gradient reductions
// should overlap its remaining schedule actions. So, last, the starts
// placed right after a pipeline on its results are marked
// `braid.start_in_pipeline`, which the lowering honours (Pipelines.cpp).
//
//===----------------------------------------------------------------------===//

#include "braid/Dialect/Braid/IR/BraidOps.h"
#include "braid/Dialect/Braid/Transforms/Passes.h"
#include "braid/Dialect/Braid/Transforms/PhaseUtils.h"

#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"
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

/// Whether `op` computes its results from its operands alone and may move
/// freely: pure, without regions, not a wait.
static bool isMovablePure(Operation *op) {
  return isPure(op) && op->getNumRegions() == 0 && !isa<WaitOp>(op);
}

/// Whether `op` is pure, or a repeat of a layer whose body only computes
/// (no parameters, collectives or effects), such as a `<name>.waited`
/// layer: it may then wait for its operands like a pure op.
static bool computesOnly(Operation *op) {
  if (isPure(op))
    return true;
  auto repeat = dyn_cast<RepeatOp>(op);
  if (!repeat)
    return false;
  auto layer =
      SymbolTable::lookupNearestSymbolFrom<LayerOp>(op, repeat.getLayerAttr());
  return layer &&
         llvm::all_of(layer.getBody().front().without_terminator(),
                      [](Operation &inner) { return isMovablePure(&inner); });
}

/// Whether `op` may write a parameter: a store, or an op whose effects are
/// unknown (a repeat whose layer stores, a pipeline, anything unmodelled).
/// Collectives and waits only move their operands.
static bool mayWriteParameters(Operation *op) {
  if (isa<StoreParamOp>(op))
    return true;
  if (isa<ParamOp, WaitOp, CollectiveOpInterface>(op) || computesOnly(op))
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

/// Whether `v` may share a parameter's buffer. Code generation gives a
/// parameter read the parameter's buffer (when no store overwrites it while
/// it is live), and an op may give its result an operand's buffer when it
/// only moves data (MovesDataOnly: a reshape, a contiguous slice), computes
/// in place over an operand (InPlaceOpInterface, a blocking all_reduce over
/// its input), or has a result of an operand's type (an identity, such as
/// braid.shard); a wait gives its collective's. A block argument, or the
/// result of an op with regions or effects (a repeat, a pipeline), may be
/// anything. Any other pure op computes its results into buffers of their
/// own: a sum of squares, a reduction, a matmul.
static bool mayShareParameterBuffer(Value v) {
  SmallVector<Value> work = {v};
  DenseSet<Value> seen;
  while (!work.empty()) {
    Value x = work.pop_back_val();
    if (!seen.insert(x).second)
      continue;
    Operation *def = x.getDefiningOp();
    if (!def || isa<ParamOp>(def))
      return true;
    if (auto wait = dyn_cast<WaitOp>(def)) {
      work.push_back(wait.getFuture());
      continue;
    }
    if (isa<CollectiveOpInterface>(def)) {
      llvm::append_range(work, def->getOperands());
      continue;
    }
    if (!isMovablePure(def))
      return true;
    if (def->hasTrait<OpTrait::braid::MovesDataOnly>() ||
        isa<InPlaceOpInterface>(def) ||
        llvm::any_of(def->getOperandTypes(), [&](Type t) {
          return llvm::is_contained(def->getResultTypes(), t);
        }))
      llvm::append_range(work, def->getOperands());
  }
  return false;
}

/// Whether `op` reads parameters, or may while it is in flight: a
/// parameter read; a collective whose operand may share a parameter's
/// buffer (a started all_gather of a parameter read reads the parameter's
/// buffer until its wait) or that updates state parameters in place
/// (PowerSGD's), and the wait of such a collective, or of a future whose
/// collective is not known. A collective of a value computed into a
/// buffer of its own (the sum of squares of the gradient norm) does not:
/// parameter stores may run while it is in flight. The collective of a
/// repeat's stacked future is the one its layer yields (a layer split at
/// its gradient bucket's wait: the bucket's reduction, started in the
/// body), judged by the same test within the body.
static bool mayReadParameters(Operation *op) {
  if (isa<ParamOp>(op))
    return true;
  if (auto wait = dyn_cast<WaitOp>(op)) {
    Value future = wait.getFuture();
    Operation *start = future.getDefiningOp();
    if (auto repeat = dyn_cast_or_null<RepeatOp>(start)) {
      auto layer = SymbolTable::lookupNearestSymbolFrom<LayerOp>(
          repeat, repeat.getLayerAttr());
      if (!layer)
        return true;
      Operation *yield = layer.getBody().front().getTerminator();
      unsigned k = cast<OpResult>(future).getResultNumber();
      if (k >= yield->getNumOperands())
        return true;
      start = yield->getOperand(k).getDefiningOp();
    }
    return !start || !isa<CollectiveOpInterface>(start) ||
           mayReadParameters(start);
  }
  if (isa<CollectiveOpInterface>(op))
    return op->hasAttr("braid.powersgd") ||
           llvm::any_of(op->getOperands(), mayShareParameterBuffer);
  return false;
}

/// Whether `op` may be pulled ahead of where it was to let a start begin
/// earlier: cheap to move and free of ordering constraints of its own: a
/// parameter read, a pure op, or a repeat of a layer that only computes
/// (the slices of a `<name>.waited` layer). An optimizer update is not:
/// code generation may write its results into the parameter slots it read
/// (InPlaceOpInterface::mayUpdateParameterSlot), so it runs where its
/// stores need it, and a start that needs the new parameter (a ZeRO
/// all_gather) starts after it.
static bool isPullable(Operation *op) {
  if (auto inPlace = dyn_cast<InPlaceOpInterface>(op);
      inPlace && inPlace.mayUpdateParameterSlot())
    return false;
  return isa<ParamOp>(op) || (isa<RepeatOp>(op) && computesOnly(op)) ||
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
  /// The futures placed and not yet waited for, with the collectives each
  /// stands for (a repeat's stacked future: one per instance).
  DenseMap<Value, int64_t> inFlight;
  int64_t numInFlight = 0;
  /// The collectives of the repeats not yet placed that return futures:
  /// they will be in flight too, and repeats keep their place, so early
  /// starts leave room for them.
  int64_t reserved = 0;
};

/// The collectives a repeat returning futures leaves in flight: one per
/// instance and future.
static int64_t getFuturesInFlight(Operation *op) {
  auto repeat = dyn_cast<RepeatOp>(op);
  if (!repeat)
    return 0;
  return static_cast<int64_t>(repeat.getCount()) *
         llvm::count_if(repeat.getResultTypes(),
                        [](Type t) { return isa<FutureType>(t); });
}

void BlockScheduler::computeDependences() {
  for (Operation &op : block.without_terminator()) {
    position[&op] = original.size();
    original.push_back(&op);
  }
  // Ordering around parameters: a read stays after the last op that may
  // write before it; a writer stays after everything that reads or writes
  // before it (collectives and their waits count as readers when their
  // operand may share a parameter's buffer: a started all_gather reads its
  // operand until its wait; mayReadParameters).
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
    // A PowerSGD reduction updates its state params, which it names, in
    // place: their reads come first (and are pulled ahead with it).
    if (auto psgd = op->getAttrOfType<DictionaryAttr>("braid.powersgd");
        psgd && isa<CollectiveOpInterface>(op))
      for (StringRef key : {"q", "error"})
        if (auto name = psgd.getAs<StringAttr>(key))
          for (Operation *other : original) {
            if (position[other] >= position[op])
              break;
            if (auto read = dyn_cast<ParamOp>(other);
                read && read.getName() == name.getValue())
              d.insert(read);
          }
    bool writes = mayWriteParameters(op);
    bool reads = mayReadParameters(op) || writes ||
                 !(computesOnly(op) || isa<WaitOp, CollectiveOpInterface>(op));
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
    if (computesOnly(op) || isa<ParamOp, WaitOp, CollectiveOpInterface>(op))
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
        (computesOnly(op) && llvm::any_of(deps[op], [&](Operation *d) {
           return deferred.contains(d);
         })))
      deferred.insert(op);
    if (isStart(op))
      pendingStarts.push_back(op);
    reserved += getFuturesInFlight(op);
  }
  // When a start's result is first needed: the original position of the
  // first op that uses it through deferred ops (its wait, the pure ops
  // using the wait) and is not deferred itself. A later start counts at
  // its own position: it is placed there at the latest and needs the wait
  // before it. Uses are SSA uses (in nested regions too); the terminator
  // counts as the end of the block.
  DenseMap<Operation *, unsigned> neededAt;
  for (Operation *op : llvm::reverse(original)) {
    unsigned at = original.size();
    for (Operation *user : op->getUsers()) {
      Operation *ancestor = block.findAncestorOpInBlock(*user);
      if (!ancestor || !position.count(ancestor))
        continue;
      at = std::min(at, deferred.contains(ancestor) ? neededAt.lookup(ancestor)
                                                    : position[ancestor]);
    }
    neededAt[op] = at;
  }
  // Earliest deadline first: starts ready at the same point are issued in
  // the order their results are needed, not in program order, so that a
  // collective needed soon does not queue behind one needed later (NCCL
  // runs a stream's collectives in issue order, MPI matches a group's in
  // issue order) and the in-flight limit goes to the most urgent. The
  // order follows from the block alone, so every rank of a group agrees.
  llvm::sort(pendingStarts, [&](Operation *a, Operation *b) {
    return std::make_pair(neededAt.lookup(a), position.lookup(a)) <
           std::make_pair(neededAt.lookup(b), position.lookup(b));
  });
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
    auto repeat = dyn_cast<RepeatOp>(done);
    reserved -= getFuturesInFlight(done);
    for (Value r : done->getResults())
      if (isa<FutureType>(r.getType())) {
        int64_t n = repeat ? static_cast<int64_t>(repeat.getCount()) : 1;
        inFlight[r] = n;
        numInFlight += n;
      }
    if (auto wait = dyn_cast<WaitOp>(done)) {
      auto it = inFlight.find(wait.getFuture());
      if (it != inFlight.end()) {
        numInFlight -= it->second;
        inFlight.erase(it);
      }
    }
    // What a start may not pull ahead (a wait, a repeat, a store) is now
    // placed: the starts it held back go here, before the ops that needed
    // it (the updates after the wait of their gradients), not after them.
    if (!isPullable(done) && !isStart(done))
      placeReadyStarts();
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
      if (numInFlight + reserved >= maxInFlight)
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

//===----------------------------------------------------------------------===//
// Splitting layers at their waits
//===----------------------------------------------------------------------===//

/// The wait and the ops of its block that depend on it, in block order, when
/// they can run after the layer's repeat instead: pure ops whose other
/// operands are constants (operand-less pure ops, cloned), used outside only
/// by the terminator at stacked positions (`firstStacked` on).
static FailureOr<SmallVector<Operation *>> getWaitCone(WaitOp wait,
                                                       unsigned firstStacked) {
  Block *block = wait->getBlock();
  llvm::SetVector<Operation *> cone;
  cone.insert(wait);
  SmallVector<Operation *> work = {wait};
  while (!work.empty()) {
    Operation *op = work.pop_back_val();
    for (OpOperand &use : op->getUses()) {
      Operation *user = use.getOwner();
      if (user->getBlock() != block)
        return failure();
      if (user == block->getTerminator()) {
        if (use.getOperandNumber() < firstStacked)
          return failure(); // a carried value feeds the next instance
        continue;
      }
      if (!isMovablePure(user))
        return failure();
      if (cone.insert(user))
        work.push_back(user);
    }
  }
  for (Operation *op : cone)
    for (Value v : op == wait ? ValueRange() : ValueRange(op->getOperands())) {
      Operation *def = v.getDefiningOp();
      if (!def || (!cone.contains(def) &&
                   !(def->getNumOperands() == 0 && isMovablePure(def))))
        return failure();
    }
  SmallVector<Operation *> ordered(cone.begin(), cone.end());
  llvm::sort(ordered,
             [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
  return ordered;
}

/// Splits `layer`, repeated by `repeats` (its only users), at the waits of
/// its reductions that only its stacked results need; at most as many as
/// keep `maxInFlight` collectives in flight with one per instance.
static void splitAtWaits(LayerOp layer, ArrayRef<RepeatOp> repeats,
                         int64_t maxInFlight, SymbolTable &symbols) {
  Block &body = layer.getBody().front();
  auto yield = cast<YieldOp>(body.getTerminator());
  unsigned firstStacked = 0;
  int64_t maxCount = 1;
  for (RepeatOp repeat : repeats) {
    firstStacked = std::max(firstStacked, repeat.getNumCarried());
    maxCount = std::max(maxCount, static_cast<int64_t>(repeat.getCount()));
  }
  // Every wait moved out leaves one collective per instance in flight.
  int64_t budget = maxInFlight / maxCount;
  SmallVector<WaitOp> waits;
  DenseSet<Operation *> moved;
  for (WaitOp wait : body.getOps<WaitOp>()) {
    if (static_cast<int64_t>(waits.size()) >= budget)
      break;
    // Gradient reductions; a started all_gather would also read its
    // operand while the next instances run.
    auto start = wait.getFuture().getDefiningOp<CollectiveOpInterface>();
    if (!start || start->getBlock() != &body || !wait.getFuture().hasOneUse() ||
        (start.getCollectiveKind() != CollectiveKind::all_reduce &&
         start.getCollectiveKind() != CollectiveKind::reduce_scatter))
      continue;
    FailureOr<SmallVector<Operation *>> cone = getWaitCone(wait, firstStacked);
    if (failed(cone))
      continue;
    waits.push_back(wait);
    moved.insert(cone->begin(), cone->end());
  }
  if (waits.empty())
    return;
  LLVM_DEBUG(llvm::dbgs() << "split @" << layer.getSymName() << " at "
                          << waits.size() << " wait(s)\n");

  // The layer `<name>.waited`: the ops after the waits, per instance.
  SmallVector<unsigned> headPositions, tailPositions;
  for (auto [i, v] : llvm::enumerate(yield.getOperands()))
    (moved.contains(v.getDefiningOp()) ? tailPositions : headPositions)
        .push_back(i);
  MLIRContext *ctx = layer.getContext();
  // What the waits after each repeat copy (the waits here are erased).
  struct Waited {
    RankedTensorType type;
    Location loc;
    DictionaryAttr attrs;
  };
  SmallVector<Waited> waitedInfo;
  for (WaitOp wait : waits)
    waitedInfo.push_back({cast<RankedTensorType>(wait.getResult().getType()),
                          wait.getLoc(), wait->getDiscardableAttrDictionary()});
  SmallVector<Type> tailArgs, tailResults;
  for (WaitOp wait : waits)
    tailArgs.push_back(wait.getResult().getType());
  for (unsigned p : tailPositions)
    tailResults.push_back(yield.getOperand(p).getType());
  OpBuilder b(ctx);
  b.setInsertionPointAfter(layer);
  auto tail =
      LayerOp::create(b, layer.getLoc(), (layer.getSymName() + ".waited").str(),
                      FunctionType::get(ctx, tailArgs, tailResults),
                      /*arg_attrs=*/nullptr, /*res_attrs=*/nullptr);
  symbols.insert(tail); // renamed if the name is taken
  Block *tailBody = b.createBlock(&tail.getBody());
  IRMapping mapping;
  for (WaitOp wait : waits)
    mapping.map(
        wait.getResult(),
        tailBody->addArgument(wait.getResult().getType(), wait.getLoc()));
  SmallVector<Operation *> erase;
  llvm::SetVector<Operation *> constants;
  for (Operation &op : body) {
    if (!moved.contains(&op))
      continue;
    erase.push_back(&op);
    if (isa<WaitOp>(op))
      continue;
    for (Value v : op.getOperands())
      if (!mapping.contains(v)) {
        constants.insert(v.getDefiningOp());
        b.clone(*v.getDefiningOp(), mapping);
      }
    b.clone(op, mapping);
  }
  SmallVector<Value> tailYields;
  for (unsigned p : tailPositions)
    tailYields.push_back(mapping.lookup(yield.getOperand(p)));
  YieldOp::create(b, yield.getLoc(), tailYields);

  // The layer itself yields the futures instead.
  SmallVector<Value> headYields;
  for (unsigned p : headPositions)
    headYields.push_back(yield.getOperand(p));
  for (WaitOp wait : waits)
    headYields.push_back(wait.getFuture());
  b.setInsertionPoint(yield);
  YieldOp::create(b, yield.getLoc(), headYields);
  yield.erase();
  for (Operation *op : llvm::reverse(erase))
    op->erase();
  for (Operation *op : constants)
    if (op->use_empty())
      op->erase();
  layer.setFunctionTypeAttr(TypeAttr::get(FunctionType::get(
      ctx, layer.getArgumentTypes(), ValueRange(headYields).getTypes())));
  layer.removeResAttrsAttr();

  // Each repeat: the futures of its stacks, their waits, then the rest.
  for (RepeatOp repeat : repeats) {
    b.setInsertionPoint(repeat);
    int64_t count = repeat.getCount();
    SmallVector<Type> headTypes, tailTypes;
    for (unsigned p : headPositions)
      headTypes.push_back(repeat.getResult(p).getType());
    for (const Waited &w : waitedInfo) {
      SmallVector<int64_t> shape = {count};
      llvm::append_range(shape, w.type.getShape());
      headTypes.push_back(FutureType::get(
          ctx, RankedTensorType::get(shape, w.type.getElementType())));
    }
    for (unsigned p : tailPositions)
      tailTypes.push_back(repeat.getResult(p).getType());
    auto head = RepeatOp::create(b, repeat.getLoc(), headTypes,
                                 repeat.getInputs(), repeat->getAttrs());
    SmallVector<Value> waited;
    for (auto [k, w] : llvm::enumerate(waitedInfo)) {
      auto stacked =
          WaitOp::create(b, w.loc, head.getResult(headPositions.size() + k));
      stacked->setDiscardableAttrs(w.attrs);
      waited.push_back(stacked);
    }
    auto rest = RepeatOp::create(b, repeat.getLoc(), tailTypes,
                                 tail.getSymName(), waited, /*prefix=*/"",
                                 count, /*first=*/0, b.getI64IntegerAttr(0),
                                 /*reverse=*/false, /*instance_names=*/nullptr);
    rest->setDiscardableAttrs(repeat->getDiscardableAttrDictionary());
    for (auto [j, p] : llvm::enumerate(headPositions))
      repeat.getResult(p).replaceAllUsesWith(head.getResult(j));
    for (auto [j, p] : llvm::enumerate(tailPositions))
      repeat.getResult(p).replaceAllUsesWith(rest.getResult(j));
    repeat.erase();
  }
}

//===----------------------------------------------------------------------===//
// Starting inside pipelines
//===----------------------------------------------------------------------===//

/// Marks the starts that the schedule placed right after `pipeline` and
/// that read its results through pure ops only (a bucket's reshapes and
/// concat): they may be issued inside it, once those results are final on
/// their stage. Stops at the first other op, so the marked starts are
/// those that were already in flight from the pipeline's end.
static void markStartsInPipeline(PipelineOp pipeline) {
  DenseSet<Value> fromPipeline(pipeline->result_begin(),
                               pipeline->result_end());
  auto onPipeline = [&](Operation *op) {
    return op->getNumOperands() > 0 &&
           llvm::all_of(op->getOperands(),
                        [&](Value v) { return fromPipeline.contains(v); });
  };
  for (Operation *op = pipeline->getNextNode();
       op && !op->hasTrait<OpTrait::IsTerminator>(); op = op->getNextNode()) {
    if (!onPipeline(op))
      break;
    if (isStart(op)) {
      op->setAttr("braid.start_in_pipeline", UnitAttr::get(op->getContext()));
      continue;
    }
    if (!isMovablePure(op))
      break;
    fromPipeline.insert(op->result_begin(), op->result_end());
  }
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
    if (acrossRepeats) {
      ModuleOp module = getOperation();
      SymbolTable symbols(module);
      SmallVector<LayerOp> layers(module.getOps<LayerOp>());
      for (LayerOp layer : layers) {
        // Only layers that nothing but repeats use change signature.
        std::optional<SmallVector<RepeatOp>> found =
            getRepeatsOnlyUsing(layer, module);
        if (!found)
          continue;
        SmallVector<RepeatOp> &repeats = *found;
        if (!repeats.empty())
          splitAtWaits(layer, repeats, maxInFlight, symbols);
      }
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
    if (intoPipelines)
      getOperation().walk(markStartsInPipeline);
  }
};

} // namespace
