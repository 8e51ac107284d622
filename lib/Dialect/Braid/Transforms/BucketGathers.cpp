//===- BucketGathers.cpp - Gather a block's ZeRO-3 parameters at once -----===//
//
// Under ZeRO-3 each parameter share is all_gathered right before the op
// that uses it: a layer with 16 parameters gathers 16 times, each call
// paying the latency. This pass fuses the parameter gathers of a block
// that follow one another into one all_gather over the concatenation of
// the members' flattened shares, placed at the first member (FSDP's flat
// parameter per wrapped unit), and recovers each member's full tensor where
// the member was. The later members' reads move up to the first one, so a
// bucket holds all its parameters gathered from its start to its last
// member's use.
//
// It is its own pass rather than part of braid-bucket-collectives: that
// pass fuses reductions at their last member (a gradient is ready late),
// this one at the first (a parameter is needed early), moving reads, not
// deferring users; they share only the bucket cap (braidc's --bucket-mb).
//
//===----------------------------------------------------------------------===//

#include "braid/Dialect/Braid/IR/BraidOps.h"
#include "braid/Dialect/Braid/Transforms/PhaseUtils.h"
#include "braid/Dialect/Braid/Transforms/Passes.h"
#include "braid/Dialect/Braid/Utils/ShardingTransparent.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/CallInterfaces.h"
#include "llvm/ADT/DenseSet.h"

#include <cmath>

namespace mlir::braid {
#define GEN_PASS_DEF_BUCKETGATHERSPASS
#include "braid/Dialect/Braid/Transforms/Passes.h.inc"
} // namespace mlir::braid

using namespace mlir;
using namespace mlir::braid;

namespace {

/// A blocking all_gather of a parameter share of its block, with the read
/// and the sharding-transparent ops from it to the gathered value.
struct Member {
  AllGatherOp gather;
  ParamOp param;
  SmallVector<Operation *, 1> chain;
};

/// The parameter gather `op` is, if this pass may fuse it: blocking, of a
/// statically shaped share read in its block (directly or through
/// sharding-transparent ops, bf16-mixed's working copy), uncompressed and
/// not empty (an empty share adds nothing to a bucket, and its group size
/// cannot be read off its shapes).
static std::optional<Member> asMember(Operation &op) {
  auto gather = dyn_cast<AllGatherOp>(op);
  if (!gather || op.hasAttr("braid.compress"))
    return std::nullopt;
  auto in = cast<RankedTensorType>(gather.getInput().getType());
  if (!in.hasStaticShape() || !gather.getType().hasStaticShape() ||
      in.getNumElements() == 0)
    return std::nullopt;
  Member m{gather, {}, {}};
  m.param = getShareRead(gather.getInput(), op.getBlock(), m.chain);
  if (!m.param)
    return std::nullopt;
  return m;
}

/// Whether `a` and `b` gather over the same group, in the same pipeline
/// phase and chunk, elements of one type (the fused op keeps one of each).
static bool sameGroup(AllGatherOp a, AllGatherOp b) {
  if (a.getMeshAttr() != b.getMeshAttr() || a.getAxes() != b.getAxes() ||
      a.getType().getElementType() != b.getType().getElementType())
    return false;
  return llvm::all_of(ArrayRef<StringRef>{"braid.phase", "braid.chunk"},
                      [&](StringRef name) {
                        return a->getAttr(name) == b->getAttr(name);
                      });
}

/// The op of `block` that first uses `op`'s result (the block's terminator
/// if none does).
static Operation *getFirstUser(Operation *op) {
  Block *block = op->getBlock();
  Operation *first = block->getTerminator();
  for (Operation *user : op->getResult(0).getUsers())
    if (Operation *ancestor = block->findAncestorOpInBlock(*user))
      if (ancestor->isBeforeInBlock(first))
        first = ancestor;
  return first;
}

/// Replaces the gathers of `bucket` (two or more, in block order, over one
/// group of `n` devices) by one all_gather along dimension 0 of the
/// concatenation of the members' flattened shares, at the first member.
/// Each later member's read and the ops from it to its share move up
/// there first. Row r of the fused result viewed as [n, total] is group
/// position r's share of every member, member by member; a member's piece
/// of it, [n, outer * m * rest] for a share [outer..., m, rest...] gathered
/// along m's dimension, is its full tensor where `outer` is 1, else a
/// reshape to [n, outer, m * rest] and a transpose to [outer, n, m * rest]
/// (the inverse of the view braid-bucket-collectives gives a
/// reduce_scatter's input). Each member's full tensor is taken where the
/// member was, so it lives no longer than before.
static void fuse(ArrayRef<Member> bucket) {
  AllGatherOp first = Member(bucket.front()).gather;
  OpBuilder b(first);
  Location loc = first.getLoc();
  Type elem = first.getType().getElementType();
  for (Member m : bucket.drop_front()) {
    if (first->isBeforeInBlock(m.param))
      m.param->moveBefore(first);
    for (Operation *op : m.chain)
      if (first->isBeforeInBlock(op))
        op->moveBefore(first);
  }
  SmallVector<Value> flat;
  int64_t row = 0, n = 0;
  for (Member m : bucket) {
    auto in = cast<RankedTensorType>(m.gather.getInput().getType());
    int64_t dim = m.gather.getDim();
    n = m.gather.getType().getDimSize(dim) / in.getDimSize(dim);
    auto flatType = RankedTensorType::get({in.getNumElements()}, elem);
    Value share = m.gather.getInput();
    flat.push_back(share.getType() == flatType
                       ? share
                       : ReshapeOp::create(b, loc, flatType, share));
    row += in.getNumElements();
  }
  Value all = ConcatOp::create(b, loc, RankedTensorType::get({row}, elem),
                               flat, b.getI64IntegerAttr(0));
  auto fused = AllGatherOp::create(
      b, loc, RankedTensorType::get({n * row}, elem), all,
      first.getMeshAttr(), first.getAxesAttr(), b.getI64IntegerAttr(0));
  fused->setDiscardableAttrs(first->getDiscardableAttrDictionary());
  fused->setAttr("braid.bucket", b.getI64IntegerAttr(bucket.size()));
  std::string cause =
      "bucket of " + std::to_string(bucket.size()) + " all_gathers";
  StringRef sep = ": ";
  for (Member m : bucket)
    if (auto c = m.gather->getAttrOfType<StringAttr>("braid.cause")) {
      cause += sep.str() + c.getValue().str();
      sep = "; ";
    }
  fused->setAttr("braid.cause", b.getStringAttr(cause));
  Value rows = ReshapeOp::create(b, loc, RankedTensorType::get({n, row}, elem),
                                 fused.getResult());
  int64_t offset = 0;
  for (Member m : bucket) {
    auto in = cast<RankedTensorType>(m.gather.getInput().getType());
    int64_t dim = m.gather.getDim(), outer = 1;
    for (int64_t d = 0; d < dim; ++d)
      outer *= in.getDimSize(d);
    int64_t len = in.getNumElements(), inner = len / outer;
    b.setInsertionPoint(m.gather);
    Value x = SliceOp::create(b, loc, RankedTensorType::get({n, len}, elem),
                              rows, b.getDenseI64ArrayAttr({0, offset}),
                              b.getDenseI64ArrayAttr({n, offset + len}),
                              DenseI64ArrayAttr());
    if (outer > 1) {
      x = ReshapeOp::create(b, loc,
                            RankedTensorType::get({n, outer, inner}, elem), x);
      x = TransposeOp::create(b, loc,
                              RankedTensorType::get({outer, n, inner}, elem),
                              x, b.getDenseI64ArrayAttr({1, 0, 2}));
    }
    x = ReshapeOp::create(b, loc, m.gather.getType(), x);
    m.gather.getResult().replaceAllUsesWith(x);
    offset += len;
  }
  for (Member m : bucket)
    m.gather->erase();
}

struct BucketGathersPass
    : public braid::impl::BucketGathersPassBase<BucketGathersPass> {
  using BucketGathersPassBase::BucketGathersPassBase;

  void runOnOperation() override {
    if (!(bucketMb >= 0) || !std::isfinite(bucketMb)) {
      getOperation().emitError()
          << "braid-bucket-gathers: bucket-mb must be non-negative and "
             "finite, got "
          << bucketMb;
      return signalPassFailure();
    }
    if (leaveFirst < 0) {
      getOperation().emitError()
          << "braid-bucket-gathers: leave-first must be >= 0, got "
          << static_cast<int64_t>(leaveFirst);
      return signalPassFailure();
    }
    if (bucketMb == 0)
      return;
    const double capBytes = bucketMb * (1 << 20);
    ModuleOp module = getOperation();
    // The layers whose first gathers braid-zero3-prefetch across-repeats
    // may start in the instance before: those only repeats use.
    llvm::DenseSet<Block *> repeated;
    for (LayerOp layer : module.getOps<LayerOp>())
      if (std::optional<SmallVector<RepeatOp>> r =
              getRepeatsOnlyUsing(layer, module);
          r && !r->empty())
        repeated.insert(&layer.getBody().front());
    SmallVector<SmallVector<Member>> buckets;
    module.walk([&](Block *block) {
      // The ops that first need the block's parameter gathers, in order
      // (braid-zero3-prefetch's groups): in a repeated layer the gathers of
      // the first `leaveFirst` of them stay single when of the share
      // itself, which a started gather can read across the instance's end
      // (a bucket reads a concatenation, a temporary of the instance, and
      // a working copy is one too).
      llvm::SmallPtrSet<Operation *, 4> leading;
      // One open bucket per element type: under bf16-mixed a layer's norm
      // parameters (f32) and its products' working copies (bf16)
      // alternate, and each type fills its own bucket, as
      // braid-bucket-collectives keeps one per kind.
      struct Open {
        Type type;
        SmallVector<Member> members;
        double bytes = 0;
      };
      SmallVector<Open, 2> open;
      auto close = [&](Open &o) {
        if (o.members.size() > 1)
          buckets.push_back(o.members);
        o.members.clear();
        o.bytes = 0;
      };
      for (Operation &op : *block) {
        // A read does not move across a store of its parameter, nor across
        // a repeat, a pipeline, a call or an op with regions (their bodies
        // would run with the bucket held, and may store parameters).
        if (isa<StoreParamOp, RepeatOp, PipelineOp, CallOpInterface>(op) ||
            op.getNumRegions() > 0) {
          for (Open &o : open)
            close(o);
          continue;
        }
        std::optional<Member> m = asMember(op);
        if (!m)
          continue;
        if (leaveFirst > 0 && repeated.contains(block)) {
          Operation *user = getFirstUser(&op);
          bool lead = leading.contains(user);
          if (!lead && (int64_t)leading.size() < leaveFirst) {
            leading.insert(user);
            lead = true;
          }
          if (lead && m->chain.empty())
            continue;
        }
        RankedTensorType type = m->gather.getType();
        double size = type.getNumElements() *
                      std::ceil(type.getElementTypeBitWidth() / 8.0);
        Open *o = llvm::find_if(
            open, [&](const Open &x) { return x.type == type.getElementType(); });
        if (o == open.end()) {
          open.push_back({type.getElementType(), {}, 0});
          o = &open.back();
        }
        if (!o->members.empty() &&
            (!sameGroup(o->members.front().gather, m->gather) ||
             o->bytes + size > capBytes))
          close(*o);
        o->members.push_back(*m);
        o->bytes += size;
      }
      for (Open &o : open)
        close(o);
    });
    for (ArrayRef<Member> bucket : buckets)
      fuse(bucket);
  }
};

} // namespace
