//===- StagePlacement.cpp - Which pipeline stages run each op -------------===//

#include "StagePlacement.h"

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/Operation.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace mlir::braid;

StagePlacement::StagePlacement(
    Block &body, llvm::function_ref<int64_t(Value)> initial,
    llvm::function_ref<bool(Operation *, int64_t)> stagesOnly,
    llvm::function_ref<bool(Operation *)> sumsShares) {
  DenseMap<Value, int64_t> where;
  DenseSet<Value> shares; // results of ops summing shares
  auto stageOf = [&](Value v) {
    auto it = where.find(v);
    return it == where.end() ? kAll : it->second;
  };
  // Whether an op of `body` after `op` reads `v`.
  auto readLater = [&](Value v, Operation *op) {
    return llvm::any_of(v.getUsers(), [&](Operation *user) {
      Operation *top = body.findAncestorOpInBlock(*user);
      return !top || op->isBeforeInBlock(top);
    });
  };
  // Moves the operands of `op` that are on one stage other than `to` (kAll:
  // every one) to `to`: point to point when no later op reads them (their
  // stage keeps them), else broadcast, and every stage holds them from then
  // on.
  auto moveOthers = [&](Operation *op, int64_t to) {
    for (OpOperand &operand : op->getOpOperands()) {
      Value v = operand.get();
      int64_t s = stageOf(v);
      if (s == kAll || s == to)
        continue;
      // One transfer of a value read twice by the op.
      if (llvm::any_of(transfers[op], [&](const Transfer &t) {
            return op->getOperand(t.operand) == v;
          }))
        continue;
      bool broadcast = to == kAll || readLater(v, op);
      transfers[op].push_back(
          {operand.getOperandNumber(), s, broadcast ? kAll : to});
      if (broadcast)
        where[v] = kAll;
    }
  };
  for (Operation &op : body) {
    if (!op.hasTrait<OpTrait::IsTerminator>() && sumsShares(&op)) {
      for (OpOperand &operand : op.getOpOperands()) {
        Value v = operand.get();
        if (shares.contains(v))
          continue;
        int64_t s = stageOf(v);
        transfers[&op].push_back(
            {operand.getOperandNumber(), s == kAll ? 0 : s, kShare});
      }
      shares.insert(op.result_begin(), op.result_end());
      continue;
    }
    if (op.hasTrait<OpTrait::IsTerminator>()) {
      moveOthers(&op, kAll);
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
    if (stage != kAll && !stagesOnly(&op, stage))
      stage = kAll;
    if (stage == kAll || elements.size() > 1)
      moveOthers(&op, stage);
    if (stage != kAll)
      stages[&op] = stage;
    for (Value r : op.getResults()) {
      int64_t s = stage == kAll ? initial(r) : stage;
      if (s != kAll)
        where[r] = s;
    }
  }
}
