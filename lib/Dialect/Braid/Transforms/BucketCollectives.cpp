//===- BucketCollectives.cpp - Fuse small gradient reductions into buckets ===//
//
// Fuses the all_reduces of a block over one group into one over the
// concatenation of their flattened inputs, and likewise reduce_scatters
// into one whose block for each rank is the concatenation of the members'
// blocks for that rank, each kind and group in a bucket of its own, so that a
// layer's gradients go out as one message instead of one per parameter (DDP's
// and FSDP's gradient buckets). Collectives are recognised through
// CollectiveOpInterface. A side-effect free op that only needs earlier members'
// results (the gradient norm's sum_squares of each reduced gradient) does not
// end a bucket: it is moved below the fused reduction, with what depends on it.
//
//===----------------------------------------------------------------------===//

#include "braid/Dialect/Braid/IR/BraidOps.h"
#include "braid/Dialect/Braid/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include <array>
#include <cmath>

namespace mlir::braid {
#define GEN_PASS_DEF_BUCKETCOLLECTIVESPASS
#include "braid/Dialect/Braid/Transforms/Passes.h.inc"
} // namespace mlir::braid

using namespace mlir;
using namespace mlir::braid;

namespace {

/// Whether `op` is a blocking f32 all_reduce or reduce_scatter this pass may
/// fuse.
static bool isBucketable(Operation *op) {
  auto collective = dyn_cast<CollectiveOpInterface>(op);
  if (!collective || collective.isStarted() ||
      (!isa<AllReduceOp>(op) && !isa<ReduceScatterOp>(op)))
    return false;
  // PowerSGD approximates each 2-D gradient on its own.
  if (op->hasAttr("braid.powersgd"))
    return false;
  auto in = cast<RankedTensorType>(collective.getInput().getType());
  auto type = collective.getResultTensorType();
  return in.getElementType().isF32() && type.getElementType().isF32() &&
         in.hasStaticShape() && type.hasStaticShape();
}

/// Whether `a` and `b` (of one kind) reduce the same way over the same
/// group, in the same pipeline phase and chunk, compressed alike (the fused
/// op keeps one of each).
static bool sameGroup(Operation *a, Operation *b) {
  auto ca = cast<CollectiveOpInterface>(a), cb = cast<CollectiveOpInterface>(b);
  if (a->getName() != b->getName() ||
      ca.getCollectiveKind() != cb.getCollectiveKind() ||
      ca.getReduction() != cb.getReduction() ||
      ca.getMeshAttr() != cb.getMeshAttr() || ca.getAxes() != cb.getAxes())
    return false;
  return llvm::all_of(
      ArrayRef<StringRef>{"braid.phase", "braid.compress", "braid.chunk"},
      [&](StringRef name) { return a->getAttr(name) == b->getAttr(name); });
}

/// Sets the fused collective's attributes: those of the last member (the
/// members agree on phase, chunk and compression, see sameGroup), the
/// member count and a cause naming the members' causes.
static void describeBucket(Operation *fused, ArrayRef<Operation *> bucket,
                           StringRef kind) {
  Builder b(fused->getContext());
  fused->setDiscardableAttrs(bucket.back()->getDiscardableAttrDictionary());
  fused->setAttr("braid.bucket", b.getI64IntegerAttr(bucket.size()));
  std::string cause =
      "bucket of " + std::to_string(bucket.size()) + " " + kind.str() + "s: ";
  for (auto [i, op] : llvm::enumerate(bucket)) {
    if (auto c = op->getAttrOfType<StringAttr>("braid.cause"))
      cause += (i ? "; " : "") + c.getValue().str();
  }
  fused->setAttr("braid.cause", b.getStringAttr(cause));
}

/// Replaces each member's result by its piece of `fused`'s rank-1 result
/// (pieces of `sizes` elements, in bucket order), reshaped back, and erases
/// the members.
static void sliceBack(OpBuilder &b, Location loc, Value fused,
                      ArrayRef<Operation *> bucket) {
  Type f32 = b.getF32Type();
  int64_t offset = 0;
  for (Operation *op : bucket) {
    auto type = cast<CollectiveOpInterface>(op).getResultTensorType();
    int64_t n = type.getNumElements();
    Value part = SliceOp::create(b, loc, RankedTensorType::get({n}, f32), fused,
                                 b.getDenseI64ArrayAttr({offset}),
                                 b.getDenseI64ArrayAttr({offset + n}),
                                 DenseI64ArrayAttr());
    op->getResult(0).replaceAllUsesWith(
        ReshapeOp::create(b, loc, type, part).getResult());
    offset += n;
  }
  for (Operation *op : bucket)
    op->erase();
}

/// Replaces the all_reduces of `bucket` (two or more, in block order) by one
/// over their flattened, concatenated inputs, placed at the last.
static void fuseAllReduces(ArrayRef<Operation *> bucket) {
  auto last = cast<AllReduceOp>(bucket.back());
  OpBuilder b(last);
  Location loc = last.getLoc();
  Type f32 = b.getF32Type();
  SmallVector<Value> flat;
  int64_t total = 0;
  for (Operation *op : bucket) {
    Value input = cast<AllReduceOp>(op).getInput();
    int64_t n = cast<RankedTensorType>(input.getType()).getNumElements();
    flat.push_back(
        ReshapeOp::create(b, loc, RankedTensorType::get({n}, f32), input));
    total += n;
  }
  auto flatType = RankedTensorType::get({total}, f32);
  Value all = ConcatOp::create(b, loc, flatType, flat, b.getI64IntegerAttr(0));
  auto fused = AllReduceOp::create(b, loc, flatType, last.getKindAttr(), all,
                                   last.getMeshAttr(), last.getAxesAttr());
  describeBucket(fused, bucket, "all_reduce");
  sliceBack(b, loc, fused.getResult(), bucket);
}

/// Replaces the reduce_scatters of `bucket` (two or more, in block order,
/// over one group of `n` devices) by one whose block for group position r
/// is the concatenation of the members' blocks for r, placed at the last.
/// Each member's input is brought to the view [n, its block's elements]:
/// a reshape where the scattered dimension is the outermost (or only size-1
/// dimensions precede it), else a reshape to [outer, n, rest] and a
/// transpose to [n, outer, rest], whose row r is then the member's result
/// for r in row-major order. The rows are concatenated member by member
/// ([n, total / n]) and flattened, so that the fused reduce_scatter along
/// dimension 0 gives position r its row; each member's result is its
/// piece of that row.
static void fuseReduceScatters(ArrayRef<Operation *> bucket) {
  auto last = cast<ReduceScatterOp>(bucket.back());
  OpBuilder b(last);
  Location loc = last.getLoc();
  Type f32 = b.getF32Type();
  SmallVector<Value> rows;
  int64_t n = 0, row = 0;
  for (Operation *op : bucket) {
    auto rs = cast<ReduceScatterOp>(op);
    auto in = cast<RankedTensorType>(rs.getInput().getType());
    int64_t dim = rs.getDim();
    n = in.getDimSize(dim) / rs.getType().getDimSize(dim);
    int64_t outer = 1, rest = 1;
    for (int64_t d = 0; d < in.getRank(); ++d)
      if (d < dim)
        outer *= in.getDimSize(d);
      else if (d > dim)
        rest *= in.getDimSize(d);
    rest *= in.getDimSize(dim) / n;
    Value x = rs.getInput();
    if (outer > 1) {
      x = ReshapeOp::create(b, loc,
                            RankedTensorType::get({outer, n, rest}, f32), x);
      x = TransposeOp::create(b, loc,
                              RankedTensorType::get({n, outer, rest}, f32), x,
                              b.getDenseI64ArrayAttr({1, 0, 2}));
    }
    rows.push_back(ReshapeOp::create(
        b, loc, RankedTensorType::get({n, outer * rest}, f32), x));
    row += outer * rest;
  }
  Value all = ConcatOp::create(b, loc, RankedTensorType::get({n, row}, f32),
                               rows, b.getI64IntegerAttr(1));
  all = ReshapeOp::create(b, loc, RankedTensorType::get({n * row}, f32), all);
  auto fused = ReduceScatterOp::create(
      b, loc, RankedTensorType::get({row}, f32), all, last.getMeshAttr(),
      last.getAxesAttr(), b.getI64IntegerAttr(0));
  describeBucket(fused, bucket, "reduce_scatter");
  sliceBack(b, loc, fused.getResult(), bucket);
}

/// The members of an open bucket, in block order, and their bytes.
struct OpenBucket {
  SmallVector<Operation *> ops;
  llvm::SmallPtrSet<Operation *, 16> members;
  double bytes = 0;
};

/// Whether `op` may wait below later reductions of its block when it needs
/// an open bucket's results: it has no side effects (nested ops included),
/// is no collective that communicates (every rank must issue those in one
/// order; an all_slice only keeps its block) and does not end the block.
static bool isDeferrable(Operation &op) {
  if (op.hasTrait<OpTrait::IsTerminator>())
    return false;
  if (auto collective = dyn_cast<CollectiveOpInterface>(op))
    return collective.getRingSteps(2) == 0;
  return isMemoryEffectFree(&op);
}

/// Moves each op of `deferred` (in block order) that now uses a value
/// defined after it, a fused bucket's slice, to right after the last such
/// definition, after the deferred ops already moved there (so they keep
/// their order). Its users are deferred ops, moved after it in turn, or ops
/// after the bucket's end.
static void placeDeferred(ArrayRef<Operation *> deferred) {
  llvm::DenseMap<Operation *, Operation *> lastPlacedAfter;
  for (Operation *op : deferred) {
    Block *block = op->getBlock();
    Operation *anchor = nullptr;
    op->walk([&](Operation *inner) {
      for (Value v : inner->getOperands()) {
        Operation *def = v.getDefiningOp();
        if (!def)
          def = v.getParentBlock()->getParentOp();
        if (!def || !(def = block->findAncestorOpInBlock(*def)) || def == op)
          continue;
        if (op->isBeforeInBlock(def) &&
            (!anchor || anchor->isBeforeInBlock(def)))
          anchor = def;
      }
    });
    if (!anchor)
      continue;
    Operation *&last = lastPlacedAfter[anchor];
    op->moveAfter(last ? last : anchor);
    last = op;
  }
}

struct BucketCollectivesPass
    : public braid::impl::BucketCollectivesPassBase<BucketCollectivesPass> {
  using BucketCollectivesPassBase::BucketCollectivesPassBase;

  void runOnOperation() override {
    if (!(bucketMb >= 0) || !std::isfinite(bucketMb)) {
      getOperation().emitError()
          << "braid-bucket-collectives: bucket-mb must be non-negative and "
             "finite, got "
          << bucketMb;
      return signalPassFailure();
    }
    if (bucketMb == 0)
      return;
    const double capBytes = bucketMb * (1 << 20);
    SmallVector<SmallVector<Operation *>> buckets;
    SmallVector<Operation *> deferred;
    getOperation().walk([&](Block *block) {
      // One open bucket per kind and group (sameGroup): an all_reduce
      // between reduce_scatters (ZeRO-1/2: a gradient dp does not divide),
      // or one over dp and tp between those over dp (a sequence-parallel
      // norm's gradient among a layer's), leaves the others open, as any
      // other op does. Each bucket gets an id when it opens, so that a
      // deferred op's dependence on a closed bucket no longer counts.
      SmallVector<OpenBucket> open;
      SmallVector<int64_t> ids;
      int64_t nextId = 0;
      // The deferred ops of this block and the ids of the buckets whose
      // results each needs, directly or through other deferred ops.
      llvm::DenseMap<Operation *, llvm::SmallDenseSet<int64_t, 4>> needs;
      auto close = [&](unsigned k) {
        if (open[k].ops.size() > 1)
          buckets.push_back(open[k].ops);
        open.erase(open.begin() + k);
        ids.erase(ids.begin() + k);
      };
      for (Operation &op : *block) {
        // The open buckets whose results `op` needs (nested uses count).
        llvm::SmallDenseSet<int64_t, 4> need;
        op.walk([&](Operation *inner) {
          for (Value v : inner->getOperands()) {
            Operation *def = v.getDefiningOp();
            if (!def)
              continue;
            auto it = needs.find(def);
            for (unsigned k = 0; k < open.size(); ++k)
              if (open[k].members.count(def) ||
                  (it != needs.end() && it->second.contains(ids[k])))
                need.insert(ids[k]);
          }
        });
        // A side-effect free op waits below the buckets it needs, which
        // stay open; any other op ends them before it, so that it still
        // sees the reduced values.
        if (!need.empty() && isDeferrable(op)) {
          needs[&op] = std::move(need);
          deferred.push_back(&op);
          continue;
        }
        for (unsigned k = open.size(); k-- > 0;)
          if (need.contains(ids[k]))
            close(k);
        if (!isBucketable(&op))
          continue;
        // The bytes each device sends into the reduction.
        double size =
            4.0 *
            cast<RankedTensorType>(op.getOperand(0).getType()).getNumElements();
        unsigned k = 0;
        while (k < open.size() && !sameGroup(open[k].ops.front(), &op))
          ++k;
        if (k < open.size() && open[k].bytes + size > capBytes) {
          close(k);
          k = open.size();
        }
        if (k == open.size()) {
          open.emplace_back();
          ids.push_back(nextId++);
        }
        OpenBucket &bucket = open[k];
        bucket.ops.push_back(&op);
        bucket.members.insert(&op);
        bucket.bytes += size;
      }
      while (!open.empty())
        close(0);
    });
    for (ArrayRef<Operation *> bucket : buckets) {
      if (isa<ReduceScatterOp>(bucket.front()))
        fuseReduceScatters(bucket);
      else
        fuseAllReduces(bucket);
    }
    placeDeferred(deferred);
  }
};

} // namespace
