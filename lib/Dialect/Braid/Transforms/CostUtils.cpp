//===- CostUtils.cpp - FLOP counts over repeats ----------------------------===//

#include "braid/Dialect/Braid/Transforms/CostUtils.h"

#include "braid/Dialect/Braid/IR/BraidOps.h"

using namespace mlir;
using namespace mlir::braid;

double mlir::braid::getTotalFlops(Operation *op) {
  if (auto repeat = dyn_cast<RepeatOp>(op)) {
    auto layer = SymbolTable::lookupNearestSymbolFrom<LayerOp>(
        repeat, repeat.getLayerAttr());
    double sum = 0;
    if (layer)
      for (Operation &inner : layer.getBody().front())
        sum += getTotalFlops(&inner);
    return sum * repeat.getCount();
  }
  if (auto cost = dyn_cast<CostOpInterface>(op))
    return cost.getFlops();
  return 0;
}
