//===- ShardingTransparent.cpp - What a value is read from ----------------===//

#include "braid/Dialect/Braid/Utils/ShardingTransparent.h"

#include "llvm/ADT/DenseSet.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::braid;

bool mlir::braid::isShardingTransparent(Operation *op) {
  auto iface = dyn_cast<ShardingRuleOpInterface>(op);
  if (!iface || op->getNumOperands() != 1 || op->getNumResults() != 1)
    return false;
  auto in = dyn_cast<RankedTensorType>(op->getOperand(0).getType());
  auto out = dyn_cast<RankedTensorType>(op->getResult(0).getType());
  if (!in || !out || in.getShape() != out.getShape())
    return false;
  ShardingRule rule = iface.getShardingRule();
  if (rule.operands.size() != 1 || rule.results.size() != 1 ||
      rule.operands[0] != rule.results[0] ||
      (int64_t)rule.operands[0].size() != in.getRank())
    return false;
  llvm::SmallDenseSet<int64_t> seen;
  for (auto [d, f] : llvm::enumerate(rule.operands[0]))
    if (f < 0 || !seen.insert(f).second ||
        rule.factors[f].kind != ShardingRule::Kind::Parallel ||
        rule.getOperandBlocks(0, d) != 1 || rule.getResultBlocks(0, d) != 1)
      return false;
  return true;
}

Value mlir::braid::skipShardingTransparent(Value v) {
  while (Operation *def = v.getDefiningOp()) {
    if (!isShardingTransparent(def))
      break;
    v = def->getOperand(0);
  }
  return v;
}

ParamOp mlir::braid::getNextInstanceShareRead(Value v) {
  Block *block = v.getParentBlock();
  Operation *def = v.getDefiningOp();
  while (def && def->getBlock() == block && isShardingTransparent(def))
    def = def->getOperand(0).getDefiningOp();
  auto read = dyn_cast_or_null<ParamOp>(def);
  if (!read || read->getBlock() != block ||
      !read->hasAttr(kNextInstanceAttrName))
    return {};
  return read;
}

ParamOp mlir::braid::getShareRead(Value v, Block *block,
                                  SmallVectorImpl<Operation *> &chain) {
  chain.clear();
  Value root = skipShardingTransparent(v);
  auto param = root.getDefiningOp<ParamOp>();
  if (!param || param->getBlock() != block)
    return {};
  for (Value x = v; x != root; x = x.getDefiningOp()->getOperand(0)) {
    if (x.getDefiningOp()->getBlock() != block) {
      chain.clear();
      return {};
    }
    chain.push_back(x.getDefiningOp());
  }
  std::reverse(chain.begin(), chain.end());
  return param;
}

bool mlir::braid::getBucketShareReads(Value v, Block *block,
                                      SmallVectorImpl<ParamOp> &reads,
                                      SmallVectorImpl<Operation *> &chain) {
  reads.clear();
  chain.clear();
  auto concat = v.getDefiningOp<ConcatOp>();
  if (!concat || concat->getBlock() != block)
    return false;
  SmallVector<Operation *> ops;
  for (Value in : concat.getInputs()) {
    // A share already of rank 1 is not reshaped.
    auto reshape = in.getDefiningOp<ReshapeOp>();
    if (reshape && reshape->getBlock() != block)
      reshape = {};
    SmallVector<Operation *, 1> own;
    ParamOp read =
        getShareRead(reshape ? reshape->getOperand(0) : in, block, own);
    if (!read) {
      reads.clear();
      return false;
    }
    reads.push_back(read);
    ops.append(own.begin(), own.end());
    if (reshape)
      ops.push_back(reshape);
  }
  ops.push_back(concat);
  llvm::sort(ops, [](Operation *a, Operation *b) {
    return a->isBeforeInBlock(b);
  });
  chain.append(ops.begin(), ops.end());
  return true;
}
