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
  Value entry = emitc::SubscriptOp::create(
      l.b, l.loc, cast<TypedValue<emitc::PointerType>>(l.layerSlots),
      l.index(j));
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

static LogicalResult lowerRepeat(RepeatOp op, FunctionLowering &l) {
  OpBuilder &b = l.b;
  Location loc = l.loc;
  auto layer = SymbolTable::lookupNearestSymbolFrom<LayerOp>(op, op.getLayerAttr());
  int64_t count = op.getCount();
  unsigned carried = op.getNumCarried();
  int64_t perInstance = l.module.layerParams[layer].size();

  // Carried values live in `current`; each instance writes `next`, which is
  // copied back (the instance's operands and results must not overlap).
  SmallVector<Value> current, next, stacked;
  for (unsigned i = 0; i < carried; ++i) {
    Value input = op.getInputs()[i];
    Value cur = l.result(op.getResult(i));
    l.copy(l.typeOf(input).getElementType(), l.get(input), cur,
           l.countOf(input));
    current.push_back(cur);
    next.push_back(l.allocate(l.typeOf(input)));
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
  SmallVector<Value> args(current);
  for (Value input : op.getInputs().drop_front(carried))
    args.push_back(slice(l.get(input), input));
  args.push_back(slots);
  args.append(next);
  for (auto [buffer, value] :
       llvm::zip(stacked, op.getResults().drop_front(carried)))
    args.push_back(slice(buffer, value));
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
  l.call(getEmittedFunctionName(layer.getSymName()), args);
  for (unsigned i = 0; i < carried; ++i)
    l.copy(l.typeOf(op.getResult(i)).getElementType(), next[i], current[i],
           l.countOf(op.getResult(i)));
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
