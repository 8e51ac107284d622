//===- AsyncCollectives.cpp - Start early, wait late -----------------------===//
//
// Splits each collective into its start form and a braid.wait placed just
// before the first use, so that the work in between overlaps the transfer.
// Collectives and their started forms come from CollectiveOpInterface.
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
    SmallVector<CollectiveOpInterface> work;
    getOperation().walk([&](CollectiveOpInterface op) {
      if (!op.isStarted())
        work.push_back(op);
    });
    OpBuilder b(&getContext());
    for (CollectiveOpInterface op : work) {
      Value result = op->getResult(0);
      b.setInsertionPoint(op);
      Operation *startOp = op.createStart(b);
      if (!startOp)
        continue; // No started form (all_slice moves no data).

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
