//===- BucketCollectives.cpp - Fuse small all_reduces into buckets --------===//
//
// Fuses all_reduces that follow one another in a block into one over the
// concatenation of their flattened inputs, so that a layer's gradients go
// out as one message instead of one per parameter (DDP's gradient buckets).
// Collectives are recognised through CollectiveOpInterface.
//
//===----------------------------------------------------------------------===//

#include "braid/Dialect/Braid/IR/BraidOps.h"
#include "braid/Dialect/Braid/Transforms/Passes.h"

#include "mlir/IR/Builders.h"

namespace mlir::braid {
#define GEN_PASS_DEF_BUCKETCOLLECTIVESPASS
#include "braid/Dialect/Braid/Transforms/Passes.h.inc"
} // namespace mlir::braid

using namespace mlir;
using namespace mlir::braid;

namespace {

/// Whether `op` is a blocking f32 all_reduce this pass may fuse.
static bool isBucketable(Operation *op) {
  auto collective = dyn_cast<CollectiveOpInterface>(op);
  if (!collective || collective.isStarted() ||
      collective.getCollectiveKind() != CollectiveKind::all_reduce)
    return false;
  // PowerSGD approximates each 2-D gradient on its own.
  if (op->hasAttr("braid.powersgd"))
    return false;
  auto type = collective.getResultTensorType();
  return type.getElementType().isF32() && type.hasStaticShape();
}

/// Whether `a` and `b` reduce the same way over the same group, in the same
/// pipeline phase and chunk, compressed alike (the fused op keeps one of
/// each).
static bool sameGroup(AllReduceOp a, AllReduceOp b) {
  return a.getKind() == b.getKind() && a.getMeshAttr() == b.getMeshAttr() &&
         a.getAxesAttr() == b.getAxesAttr() &&
         a->getAttr("braid.phase") == b->getAttr("braid.phase") &&
         a->getAttr("braid.compress") == b->getAttr("braid.compress") &&
         a->getAttr("braid.chunk") == b->getAttr("braid.chunk");
}

/// Replaces the all_reduces of `bucket` (two or more, in block order) by one
/// over their flattened, concatenated inputs, placed at the last.
static void fuse(ArrayRef<AllReduceOp> bucket) {
  AllReduceOp last = bucket.back();
  OpBuilder b(last);
  Location loc = last.getLoc();
  Type f32 = b.getF32Type();
  SmallVector<Value> flat;
  int64_t total = 0;
  for (AllReduceOp op : bucket) {
    auto type = cast<RankedTensorType>(op.getInput().getType());
    int64_t n = type.getNumElements();
    flat.push_back(ReshapeOp::create(b, loc, RankedTensorType::get({n}, f32),
                                     op.getInput()));
    total += n;
  }
  auto flatType = RankedTensorType::get({total}, f32);
  Value all = ConcatOp::create(b, loc, flatType, flat, b.getI64IntegerAttr(0));
  auto fused = AllReduceOp::create(b, loc, flatType, last.getKindAttr(), all,
                                   last.getMeshAttr(), last.getAxesAttr());
  // The members agree on phase and chunk (sameGroup); the cause names the
  // bucket's members.
  fused->setDiscardableAttrs(last->getDiscardableAttrDictionary());
  fused->setAttr("braid.bucket", b.getI64IntegerAttr(bucket.size()));
  std::string cause = "bucket of " + std::to_string(bucket.size()) +
                      " all_reduces: ";
  for (auto [i, op] : llvm::enumerate(bucket)) {
    if (auto c = op->getAttrOfType<StringAttr>("braid.cause"))
      cause += (i ? "; " : "") + c.getValue().str();
  }
  fused->setAttr("braid.cause", b.getStringAttr(cause));
  int64_t offset = 0;
  for (AllReduceOp op : bucket) {
    auto type = cast<RankedTensorType>(op.getType());
    int64_t n = type.getNumElements();
    Value part = SliceOp::create(b, loc, RankedTensorType::get({n}, f32),
                                 fused.getResult(),
                                 b.getDenseI64ArrayAttr({offset}),
                                 b.getDenseI64ArrayAttr({offset + n}),
                                 DenseI64ArrayAttr());
    op.getResult().replaceAllUsesWith(
        ReshapeOp::create(b, loc, type, part).getResult());
    offset += n;
  }
  for (AllReduceOp op : bucket)
    op.erase();
}

struct BucketCollectivesPass
    : public braid::impl::BucketCollectivesPassBase<BucketCollectivesPass> {
  using BucketCollectivesPassBase::BucketCollectivesPassBase;

  void runOnOperation() override {
    if (bucketMb < 0) {
      getOperation().emitError()
          << "braid-bucket-collectives: bucket-mb must be non-negative, got "
          << bucketMb;
      return signalPassFailure();
    }
    if (bucketMb == 0)
      return;
    const double capBytes = bucketMb * (1 << 20);
    SmallVector<SmallVector<AllReduceOp>> buckets;
    getOperation().walk([&](Block *block) {
      SmallVector<AllReduceOp> open;
      llvm::SmallPtrSet<Operation *, 16> members;
      double bytes = 0;
      auto close = [&] {
        if (open.size() > 1)
          buckets.push_back(open);
        open.clear();
        members.clear();
        bytes = 0;
      };
      for (Operation &op : *block) {
        // An op that needs a member's reduced value ends the bucket before
        // it (nested uses count).
        bool usesMember = false;
        op.walk([&](Operation *inner) {
          for (Value v : inner->getOperands())
            if (Operation *def = v.getDefiningOp(); def && members.count(def))
              usesMember = true;
        });
        if (usesMember)
          close();
        auto reduce = dyn_cast<AllReduceOp>(&op);
        if (!reduce || !isBucketable(&op))
          continue;
        double size = 4.0 * reduce.getType().getNumElements();
        if (!open.empty() &&
            (!sameGroup(open.front(), reduce) || bytes + size > capBytes))
          close();
        open.push_back(reduce);
        members.insert(&op);
        bytes += size;
      }
      close();
    });
    for (ArrayRef<AllReduceOp> bucket : buckets)
      fuse(bucket);
  }
};

} // namespace
