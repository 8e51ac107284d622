//===- Params.cpp - Parameters and layer repeats ----------------------------===//
//
// Part of braid-lower-to-emitc; see Lowering.h.
//
//===----------------------------------------------------------------------===//

#include "Lowering.h"

using namespace mlir;
using namespace mlir::braid;
using namespace mlir::braid::lowering;

/// The parameter buffer of slot `slot` (an i64 value) or of a constant slot.
static Value loadParam(FunctionLowering &l, Value slot) {
  OpBuilder &b = l.b;
  Value table = l.module.getParamTable(b, l.loc);
  Value element = emitc::SubscriptOp::create(
      b, l.loc, cast<TypedValue<emitc::ArrayType>>(table), ValueRange{slot});
  return emitc::LoadOp::create(b, l.loc,
                               emitc::PointerType::get(b.getF32Type()),
                               element);
}

/// The slot value of parameter `name` as seen from the current function:
/// a constant outside layers, the instance's slot table entry inside.
static FailureOr<Value> getParamSlot(Operation *op, StringRef name,
                                     RankedTensorType type, InitAttr init,
                                     FunctionLowering &l) {
  if (!l.layerSlots) {
    FailureOr<int64_t> slot = l.module.getSlot(op, name, type, init);
    if (failed(slot))
      return failure();
    return l.index(*slot);
  }
  auto layer = op->getParentOfType<LayerOp>();
  auto &params = l.module.layerParams[layer];
  int64_t j = std::distance(params.begin(), params.find(name));
  // braid-zero3-prefetch reads the next instance's share ahead of it.
  Value slots =
      op->hasAttr("braid.next_instance") ? l.nextLayerSlots : l.layerSlots;
  Value entry = emitc::SubscriptOp::create(
      l.b, l.loc, cast<TypedValue<emitc::PointerType>>(slots), l.index(j));
  return emitc::LoadOp::create(l.b, l.loc, l.b.getI64Type(), entry)
      .getResult();
}

/// Whether `op` may write parameter `name`: a store of it, or a repeat
/// whose layer stores any parameter (its instances' names are computed).
static bool mayWriteParam(Operation *op, StringRef name) {
  if (auto store = dyn_cast<StoreParamOp>(op))
    return store.getName() == name;
  auto repeat = dyn_cast<RepeatOp>(op);
  if (!repeat)
    return false;
  auto layer =
      SymbolTable::lookupNearestSymbolFrom<LayerOp>(op, repeat.getLayerAttr());
  // Any store in the layer, or in the layers it repeats, may write it.
  return layer && layer.walk([&](Operation *inner) {
                        return isa<StoreParamOp>(inner) ||
                                       (isa<RepeatOp>(inner) &&
                                        mayWriteParam(inner, name))
                                   ? WalkResult::interrupt()
                                   : WalkResult::advance();
                      }).wasInterrupted();
}

/// Whether the value `read` gives may be overwritten (by a store of the same
/// parameter) before its last use. A read aliases the parameter's buffer,
/// which is right only when it is not.
bool mlir::braid::lowering::isOverwrittenWhileLive(ParamOp read) {
  Block *block = read->getBlock();
  Operation *lastUse = nullptr;
  for (Operation *user : read->getUsers()) {
    Operation *inBlock = block->findAncestorOpInBlock(*user);
    if (inBlock && (!lastUse || lastUse->isBeforeInBlock(inBlock)))
      lastUse = inBlock;
  }
  if (!lastUse)
    return false;
  // A terminator copies its operands out before anything else runs.
  for (Operation *op = read->getNextNode(); op && op != lastUse;
       op = op->getNextNode())
    if (mayWriteParam(op, read.getName()))
      return true;
  return false;
}

bool mlir::braid::lowering::readsNextInstance(LayerOp layer) {
  return llvm::any_of(layer.getBody().front().getOps<ParamOp>(), [](ParamOp p) {
    return p->hasAttr("braid.next_instance");
  });
}

static LogicalResult lowerRepeat(RepeatOp op, FunctionLowering &l) {
  OpBuilder &b = l.b;
  Location loc = l.loc;
  auto layer = SymbolTable::lookupNearestSymbolFrom<LayerOp>(op, op.getLayerAttr());
  int64_t count = op.getCount();
  unsigned carried = op.getNumCarried();
  int64_t perInstance = l.module.layerParams[layer].size();
  auto pendingType = emitc::PointerType::get(
      emitc::OpaqueType::get(b.getContext(), "braid_rt_program_pending_t"));

  // Carried values live in two buffers, the result's (`current`) and one
  // more (`next`): instance n reads the one in `n % 2` and writes the other
  // (its operands and results must not overlap), and after an odd count
  // the last result is copied into the result's buffer; a copy back after
  // every instance moved the carried values twice as often (the gradient
  // accumulation loop's sums: docs/planner.md).
  // A carried future (braid-zero3-prefetch across-repeats) is in flight
  // across the instances likewise: two buffers and sites, the operand's and
  // one more, of which instance n waits on the one in `n % 2` and starts
  // the next instance's collective on the other.
  SmallVector<Value> current, next, stacked, carriedPairs;
  SmallVector<std::pair<Value, Value>> carriedFutures; // buffers, sites
  // A two-element array of `a` and `b2`, of `element` type.
  auto pair = [&](Type element, Value a, Value b2) {
    Value list = emitc::VariableOp::create(
        b, loc, emitc::ArrayType::get({2}, element),
        emitc::OpaqueAttr::get(b.getContext(), ""));
    SmallVector<Value, 2> values = {a, b2};
    for (auto [k, v] : llvm::enumerate(values))
      emitc::AssignOp::create(
          b, loc,
          emitc::SubscriptOp::create(b, loc,
                                     cast<TypedValue<emitc::ArrayType>>(list),
                                     ValueRange{l.i64(k)}),
          v);
    return list;
  };
  for (unsigned i = 0; i < carried; ++i) {
    Value input = op.getInputs()[i];
    if (isa<FutureType>(input.getType())) {
      Value pending = l.pendingOf.lookup(input);
      if (!pending || l.pendingCount.lookup(input))
        return op.emitOpError() << "carries in a future not started in this "
                                   "function; generated code starts it here";
      auto bufferType =
          cast<emitc::PointerType>(getBufferType(input.getType()));
      Value other = l.allocate(cast<RankedTensorType>(
          cast<FutureType>(input.getType()).getValueType()));
      carriedFutures.push_back(
          {pair(bufferType, l.get(input), other),
           pair(pendingType, pending, l.module.getPendingSite(b, loc))});
      l.alias(op.getResult(i), other); // dropped: nothing waits for it
      current.push_back(Value());
      next.push_back(Value());
      carriedPairs.push_back(Value());
      continue;
    }
    Value cur = l.result(op.getResult(i));
    l.copy(l.typeOf(input).getElementType(), l.get(input), cur,
           l.countOf(input));
    current.push_back(cur);
    next.push_back(l.allocate(l.typeOf(input)));
    carriedPairs.push_back(
        pair(getBufferType(input.getType()), current.back(), next.back()));
  }
  for (unsigned i = 0; i < op.getResults().size(); ++i)
    if (i >= carried)
      stacked.push_back(l.result(op.getResult(i)));

  for (Value r : op.getResults().drop_front(carried))
    if (isa<FutureType>(r.getType())) {
      l.pendingOf[r] = l.module.getPendingSites(b, loc, count);
      l.pendingCount[r] = count;
    }

  Value slotTable =
      l.module.getSlotTable(b, loc, l.module.repeatSlots[op.getOperation()]);
  // The instance counter is an int64_t: pointer offsets need an integer.
  Value zero = l.i64(0), one = l.i64(1), upper = l.i64(count);
  auto loop = emitc::ForOp::create(b, loc, zero, upper, one);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(loop.getBody()->getTerminator());
  Value iv = loop.getInductionVar();
  Value instance = iv;
  if (op.getReverse())
    instance = emitc::SubOp::create(b, loc, b.getI64Type(), l.i64(count - 1),
                                    iv);
  Value slotEntry = emitc::SubscriptOp::create(
      b, loc, cast<TypedValue<emitc::ArrayType>>(slotTable),
      ValueRange{emitc::MulOp::create(b, loc, b.getI64Type(), instance,
                                      l.i64(perInstance))
                     .getResult()});
  Value slots = emitc::AddressOfOp::create(
      b, loc, emitc::PointerType::get(b.getI64Type()), slotEntry);
  // The instance run next (the last one's own): its slots, and whether
  // there is one.
  bool readsNext = readsNextInstance(layer);
  Value hasNext;
  if (readsNext || !carriedFutures.empty())
    hasNext = emitc::CmpOp::create(
        b, loc, b.getI1Type(), emitc::CmpPredicate::lt,
        emitc::AddOp::create(b, loc, b.getI64Type(), iv, one).getResult(),
        upper);
  Value nextSlots;
  if (readsNext) {
    Value step = op.getReverse() ? l.i64(-1) : one;
    Value nextInstance = emitc::ConditionalOp::create(
        b, loc, b.getI64Type(), hasNext,
        emitc::AddOp::create(b, loc, b.getI64Type(), instance, step)
            .getResult(),
        instance);
    Value nextEntry = emitc::SubscriptOp::create(
        b, loc, cast<TypedValue<emitc::ArrayType>>(slotTable),
        ValueRange{emitc::MulOp::create(b, loc, b.getI64Type(), nextInstance,
                                        l.i64(perInstance))
                       .getResult()});
    nextSlots = emitc::AddressOfOp::create(
        b, loc, emitc::PointerType::get(b.getI64Type()), nextEntry);
  }
  // Carried values: this instance's side (`n % 2`) and the next's.
  Value mine, theirs;
  if (!carriedFutures.empty() ||
      llvm::any_of(carriedPairs, [](Value v) { return bool(v); })) {
    Value two = l.i64(2);
    mine = emitc::RemOp::create(b, loc, b.getI64Type(), iv, two);
    theirs = emitc::RemOp::create(
        b, loc, b.getI64Type(),
        emitc::AddOp::create(b, loc, b.getI64Type(), iv, one).getResult(), two);
  }
  auto pick = [&](Value list, Value index) -> Value {
    auto array = cast<TypedValue<emitc::ArrayType>>(list);
    Value element =
        emitc::SubscriptOp::create(b, loc, array, ValueRange{index});
    return emitc::LoadOp::create(b, loc, array.getType().getElementType(),
                                 element);
  };
  SmallVector<Value> futureIns, futureOuts, sitesIn, sitesOut;
  for (auto [buffers, sites] : carriedFutures) {
    futureIns.push_back(pick(buffers, mine));
    futureOuts.push_back(pick(buffers, theirs));
    sitesIn.push_back(pick(sites, mine));
    // The last instance starts nothing: there is no next one to wait.
    sitesOut.push_back(emitc::ConditionalOp::create(
        b, loc, pendingType, hasNext, pick(sites, theirs),
        emitc::LiteralOp::create(b, loc, pendingType, "nullptr")));
  }

  // The instance's slice of a stacked buffer: `instance` times the slice's
  // element count past its start.
  auto slice = [&](Value buffer, Value stackedValue) -> Value {
    Type type = stackedValue.getType();
    if (auto future = dyn_cast<FutureType>(type))
      type = future.getValueType();
    int64_t sliceCount = cast<RankedTensorType>(type).getNumElements() / count;
    Value offset = emitc::MulOp::create(b, loc, b.getI64Type(), instance,
                                        l.i64(sliceCount));
    return emitc::AddOp::create(b, loc, buffer.getType(), buffer, offset);
  };
  SmallVector<Value> args;
  unsigned f = 0;
  for (Value list : carriedPairs)
    args.push_back(list ? pick(list, mine) : futureIns[f++]);
  for (Value input : op.getInputs().drop_front(carried))
    args.push_back(slice(l.get(input), input));
  args.push_back(slots);
  if (nextSlots)
    args.push_back(nextSlots);
  f = 0;
  for (Value list : carriedPairs)
    args.push_back(list ? pick(list, theirs) : futureOuts[f++]);
  for (auto [buffer, value] :
       llvm::zip(stacked, op.getResults().drop_front(carried)))
    args.push_back(slice(buffer, value));
  // The sites of the futures yielded, in result order: the carried ones
  // first.
  args.append(sitesOut);
  // A stacked future: each instance starts its collective on its own site
  // (its request and staging stay until the wait after the loop).
  for (Value r : op.getResults().drop_front(carried)) {
    if (!isa<FutureType>(r.getType()))
      continue;
    Value sites = l.pendingOf.lookup(r);
    Value site = emitc::SubscriptOp::create(
        b, loc, cast<TypedValue<emitc::ArrayType>>(sites),
        ValueRange{instance});
    args.push_back(emitc::AddressOfOp::create(
        b, loc,
        emitc::PointerType::get(
            cast<emitc::LValueType>(site.getType()).getValueType()),
        site));
  }
  args.append(sitesIn);
  l.call(getEmittedFunctionName(layer.getSymName()), args);
  // After an odd count the last instance wrote `next`.
  b.setInsertionPointAfter(loop);
  if (count % 2)
    for (unsigned i = 0; i < carried; ++i)
      if (current[i])
        l.copy(l.typeOf(op.getResult(i)).getElementType(), next[i],
               current[i], l.countOf(op.getResult(i)));
  return success();
}

void mlir::braid::lowering::populateParamLowerings(LoweringTable &t) {
  t.add<ParamOp>([](ParamOp op, FunctionLowering &l) -> LogicalResult {
    FailureOr<Value> slot =
        getParamSlot(op, op.getName(), cast<RankedTensorType>(op.getType()),
                     op.getInit(), l);
    if (failed(slot))
      return failure();
    Value buffer = loadParam(l, *slot);
    if (!isOverwrittenWhileLive(op)) {
      l.alias(op.getResult(), buffer);
      return success();
    }
    l.copy(l.typeOf(op.getResult()).getElementType(), buffer,
           l.result(op.getResult()), l.countOf(op.getResult()));
    return success();
  });
  t.add<StoreParamOp>([](StoreParamOp op, FunctionLowering &l) -> LogicalResult {
    auto type = l.typeOf(op.getValue());
    FailureOr<Value> slot = getParamSlot(op, op.getName(), type, InitAttr(), l);
    if (failed(slot))
      return failure();
    if (l.writtenInPlace.contains(op.getValue()))
      return success(); // the update wrote the slot
    l.copy(type.getElementType(), l.get(op.getValue()), loadParam(l, *slot),
           type.getNumElements());
    return success();
  });
  t.add<RepeatOp>(lowerRepeat);
}
