//===- PhaseUtils.cpp - Training phases and layer construction -------------===//

#include "braid/Dialect/Braid/Transforms/PhaseUtils.h"

#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"

using namespace mlir;
using namespace mlir::braid;

StringRef mlir::braid::stringifyPhase(Phase phase) {
  return phase == Phase::F ? "F" : phase == Phase::B ? "B" : "W";
}

std::optional<Phase> mlir::braid::getPhase(Operation *op) {
  auto attr = op->getAttrOfType<StringAttr>(kPhaseAttrName);
  if (!attr)
    return std::nullopt;
  StringRef p = attr.getValue();
  if (p == "F")
    return Phase::F;
  if (p == "B")
    return Phase::B;
  if (p == "W")
    return Phase::W;
  return std::nullopt;
}

void mlir::braid::setPhase(Operation *op, Phase phase) {
  op->setAttr(kPhaseAttrName,
              StringAttr::get(op->getContext(), stringifyPhase(phase)));
}

bool mlir::braid::isRecomputable(Operation *op) {
  return isa<ParamOp, ConstantOp>(op);
}

RankedTensorType mlir::braid::stackedType(Type type, int64_t count) {
  auto t = cast<RankedTensorType>(type);
  SmallVector<int64_t> shape{count};
  shape.append(t.getShape().begin(), t.getShape().end());
  return RankedTensorType::get(shape, t.getElementType());
}

LayerOp mlir::braid::buildLayer(OpBuilder &b, Location loc, StringRef name,
                                std::optional<Phase> phase,
                                ArrayRef<Value> args,
                                ArrayRef<Operation *> ops,
                                ArrayRef<Value> yields) {
  OpBuilder::InsertionGuard guard(b);
  SmallVector<Type> argTypes, resultTypes;
  for (Value v : args)
    argTypes.push_back(v.getType());
  for (Value v : yields)
    resultTypes.push_back(v.getType());
  auto layer = LayerOp::create(b, loc, name,
                               b.getFunctionType(argTypes, resultTypes),
                               /*arg_attrs=*/nullptr, /*res_attrs=*/nullptr);
  Block *body = b.createBlock(&layer.getBody());
  IRMapping mapping;
  for (Value v : args)
    mapping.map(v, body->addArgument(v.getType(), loc));
  OpBuilder inner = OpBuilder::atBlockEnd(body);
  auto tag = [&](Operation *op) {
    if (phase)
      setPhase(op, *phase);
  };
  // Clones the recomputable op defining `v` the first time it is needed.
  auto materialize = [&](Value v) {
    if (mapping.contains(v))
      return;
    Operation *def = v.getDefiningOp();
    assert(def && isRecomputable(def) &&
           "value must be passed in or recomputable");
    tag(inner.clone(*def, mapping));
  };
  for (Operation *op : ops) {
    for (Value operand : op->getOperands())
      materialize(operand);
    tag(inner.clone(*op, mapping));
  }
  SmallVector<Value> mapped;
  for (Value v : yields) {
    materialize(v);
    mapped.push_back(mapping.lookup(v));
  }
  YieldOp::create(inner, loc, mapped);
  return layer;
}

std::optional<SmallVector<RepeatOp>>
mlir::braid::getRepeatsOnlyUsing(LayerOp layer, ModuleOp module) {
  std::optional<SymbolTable::UseRange> uses =
      SymbolTable::getSymbolUses(layer, module);
  if (!uses)
    return std::nullopt;
  SmallVector<RepeatOp> repeats;
  for (const SymbolTable::SymbolUse &use : *uses) {
    auto repeat = dyn_cast<RepeatOp>(use.getUser());
    if (!repeat)
      return std::nullopt;
    repeats.push_back(repeat);
  }
  return repeats;
}
