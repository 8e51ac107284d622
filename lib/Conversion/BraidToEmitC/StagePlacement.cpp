//===- StagePlacement.cpp - Which pipeline stages run each op -------------===//

#include "StagePlacement.h"

#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Operation.h"
#include "llvm/ADT/MapVector.h"

using namespace mlir;
using namespace mlir::braid;

StagePlacement::StagePlacement(
    Block &body, llvm::function_ref<int64_t(Value)> initial,
    llvm::function_ref<bool(Operation *, int64_t)> stagesOnly) {
  DenseMap<Value, int64_t> where;
  auto stageOf = [&](Value v) {
    auto it = where.find(v);
    return it == where.end() ? kAll : it->second;
  };
  // Broadcasts the operands of `op` that are on one stage other than
  // `keep` (kAll: every one): from then on every stage holds them.
  auto broadcastOthers = [&](Operation *op, int64_t keep) {
    for (OpOperand &operand : op->getOpOperands())
      if (int64_t s = stageOf(operand.get()); s != kAll && s != keep) {
        broadcasts[op].push_back({operand.getOperandNumber(), s});
        where[operand.get()] = kAll;
      }
  };
  for (Operation &op : body) {
    if (op.hasTrait<OpTrait::IsTerminator>()) {
      broadcastOthers(&op, kAll);
      continue;
    }
    // Run the op where most of its operands' elements are; the others come
    // there (a gradient stays, the clipping coefficient moves).
    llvm::SmallMapVector<int64_t, int64_t, 4> elements;
    for (Value v : op.getOperands())
      if (int64_t s = stageOf(v); s != kAll) {
        auto shaped = dyn_cast<ShapedType>(v.getType());
        elements[s] += shaped && shaped.hasStaticShape()
                           ? shaped.getNumElements()
                           : 1;
      }
    int64_t stage = kAll, most = -1;
    for (auto [s, count] : elements)
      if (count > most) {
        stage = s;
        most = count;
      }
    if (elements.size() > 1)
      broadcastOthers(&op, stage);
    if (stage != kAll && !stagesOnly(&op, stage)) {
      broadcastOthers(&op, kAll);
      stage = kAll;
    }
    if (stage != kAll)
      stages[&op] = stage;
    for (Value r : op.getResults()) {
      int64_t s = stage == kAll ? initial(r) : stage;
      if (s != kAll)
        where[r] = s;
    }
  }
}
