//===- AsyncCollectives.cpp - Start early, wait late -----------------------===//
//
// Splits each collective into its start form and a braid.wait placed just
// before the first use, so that the work in between overlaps the transfer.
//
//===----------------------------------------------------------------------===//

#include "braid/Dialect/Braid/IR/BraidOps.h"
#include "braid/Dialect/Braid/Transforms/Passes.h"

#include "mlir/IR/Builders.h"

namespace mlir::braid {
#define GEN_PASS_DEF_ASYNCCOLLECTIVESPASS
#include "braid/Dialect/Braid/Transforms/Passes.h.inc"
} // namespace mlir::braid

using namespace mlir;
using namespace mlir::braid;

namespace {

struct AsyncCollectivesPass
    : public braid::impl::AsyncCollectivesPassBase<AsyncCollectivesPass> {
  void runOnOperation() override {
    MLIRContext *ctx = &getContext();
    // A collective has an asynchronous form if `<name>_start` is an op.
    SmallVector<std::pair<Operation *, OperationName>> work;
    getOperation().walk([&](Operation *op) {
      if (op->getNumResults() != 1 ||
          !isa<RankedTensorType>(op->getResult(0).getType()))
        return;
      std::string start = (op->getName().getStringRef() + "_start").str();
      if (auto name = RegisteredOperationName::lookup(start, ctx))
        work.push_back({op, *name});
    });
    OpBuilder b(ctx);
    for (auto [op, startName] : work) {
      Value result = op->getResult(0);
      auto type = cast<RankedTensorType>(result.getType());
      b.setInsertionPoint(op);
      OperationState state(op->getLoc(), startName);
      state.addOperands(op->getOperands());
      state.addAttributes(op->getAttrs());
      state.addTypes(FutureType::get(ctx, type));
      Operation *startOp = b.create(state);

      // Wait before the first op of this block that needs the value.
      Block *block = op->getBlock();
      Operation *first = block->getTerminator();
      for (Operation *user : result.getUsers()) {
        Operation *ancestor = block->findAncestorOpInBlock(*user);
        if (ancestor && ancestor->isBeforeInBlock(first))
          first = ancestor;
      }
      b.setInsertionPoint(first);
      auto wait = WaitOp::create(b, op->getLoc(), startOp->getResult(0));
      wait->setDiscardableAttrs(op->getDiscardableAttrDictionary());
      result.replaceAllUsesWith(wait.getResult());
      op->erase();
    }
  }
};

} // namespace
