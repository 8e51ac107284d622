//===- CompressGradients.cpp - Gradient reductions sent as 16 bits -------===//
//
// Marks the data-parallel gradient reductions of a partitioned training
// step with `braid.compress`, which the lowering turns into the runtime's
// bf16 / fp16 reductions with f32 accumulation and braid-comm-report counts
// at 16 bits per element.
//
//===----------------------------------------------------------------------===//

#include "braid/Dialect/Braid/IR/BraidOps.h"
#include "braid/Dialect/Braid/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringSet.h"

namespace mlir::braid {
#define GEN_PASS_DEF_COMPRESSGRADIENTSPASS
#include "braid/Dialect/Braid/Transforms/Passes.h.inc"
} // namespace mlir::braid

using namespace mlir;
using namespace mlir::braid;

namespace {

struct CompressGradientsPass
    : public braid::impl::CompressGradientsPassBase<CompressGradientsPass> {
  using CompressGradientsPassBase::CompressGradientsPassBase;

  /// Marks the all_reduce of a 2-D gradient for PowerSGD and reads its state
  /// before it: Q ([cols, rank], the warm start, alike on every device:
  /// normal(1) from its name) and this device's error feedback ([rows,
  /// cols], its block of a [devices * rows, cols] tensor split over the
  /// axes, zeros at first). Both are optimizer state, so checkpoints save
  /// and restore them; in a repeated layer the prefix gives every instance
  /// its own. The lowering finds them by the names in braid.powersgd and
  /// updates them in place.
  void addPowerSgdState(CollectiveOpInterface op,
                        llvm::DenseMap<Operation *, int64_t> &sites) {
    auto type = cast<RankedTensorType>(op.getInput().getType());
    Operation *owner = op->getParentOp();
    while (owner && !isa<LayerOp, func::FuncOp>(owner))
      owner = owner->getParentOp();
    StringRef ownerName =
        owner ? cast<SymbolOpInterface>(owner).getName() : "module";
    std::string base =
        ("powersgd." + ownerName + "." + std::to_string(sites[owner]++)).str();
    OpBuilder b(op);
    MLIRContext *ctx = b.getContext();
    Location loc = op.getLoc();
    int64_t rows = type.getDimSize(0), cols = type.getDimSize(1);
    auto normal =
        InitAttr::get(ctx, InitKind::normal, APFloat(1.0), APFloat(0.0));
    auto zeros =
        InitAttr::get(ctx, InitKind::zeros, APFloat(0.0), APFloat(0.0));
    ParamOp::create(b, loc, RankedTensorType::get({cols, rank}, b.getF32Type()),
                    base + ".q", normal, /*state=*/true, /*block_of=*/nullptr);
    auto split = ShardingAttr::get(
        ctx, op.getMeshAttr(),
        ArrayAttr::get(ctx, {op.getAxes(), ArrayAttr::get(ctx, {})}),
        ArrayAttr(), ArrayRef<int64_t>());
    ParamOp::create(b, loc, RankedTensorType::get({rows, cols}, b.getF32Type()),
                    base + ".error", zeros, /*state=*/true, split);
    op->setAttr("braid.compress", b.getStringAttr("powersgd"));
    op->setAttr(
        "braid.powersgd",
        b.getDictionaryAttr(
            {b.getNamedAttr("rank", b.getI64IntegerAttr(rank)),
             b.getNamedAttr("q", b.getStringAttr(base + ".q")),
             b.getNamedAttr("error", b.getStringAttr(base + ".error"))}));
  }

  void runOnOperation() override {
    if (format != "bf16" && format != "fp16" && format != "powersgd") {
      getOperation().emitError()
          << "braid-compress-gradients: unknown format '" << format
          << "'; expected bf16, fp16 or powersgd";
      return signalPassFailure();
    }
    if (format == "powersgd" && rank < 1) {
      getOperation().emitError()
          << "braid-compress-gradients: rank must be positive, got "
          << static_cast<int64_t>(rank);
      return signalPassFailure();
    }
    llvm::StringSet<> dataAxes;
    for (const std::string &axis : axes)
      dataAxes.insert(axis);
    if (dataAxes.empty())
      dataAxes.insert("dp");
    Builder b(&getContext());
    StringAttr mark = b.getStringAttr(format);
    SmallVector<CollectiveOpInterface> powerSgd;
    getOperation().walk([&](CollectiveOpInterface op) {
      CollectiveKind kind = op.getCollectiveKind();
      if (kind != CollectiveKind::all_reduce &&
          kind != CollectiveKind::reduce_scatter)
        return;
      if (op.getReduction() != ReduceKind::sum)
        return;
      // Gradients: f32 tensors of rank >= 1. The loss and the norms'
      // sums of squares (rank 0) stay exact.
      auto type = cast<RankedTensorType>(op.getInput().getType());
      if (!type.getElementType().isF32() || type.getRank() == 0)
        return;
      // Over data-parallel axes only: tensor-parallel sums are activations.
      if (op.getAxes().empty() || llvm::any_of(op.getAxes(), [&](Attribute a) {
            return !dataAxes.contains(cast<StringAttr>(a).getValue());
          }))
        return;
      if (format == "powersgd") {
        // 2-D gradients only, where P and Q are smaller than the matrix;
        // the others stay exact.
        if (kind == CollectiveKind::all_reduce && type.getRank() == 2 &&
            (type.getDimSize(0) + type.getDimSize(1)) * rank <
                type.getNumElements())
          powerSgd.push_back(op);
        return;
      }
      op->setAttr("braid.compress", mark);
    });
    llvm::DenseMap<Operation *, int64_t> sites;
    for (CollectiveOpInterface op : powerSgd)
      addPowerSgdState(op, sites);
  }
};

} // namespace
