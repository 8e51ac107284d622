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
#include "mlir/IR/SymbolTable.h"
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

  /// Marks the reduction of a gradient of matrices for PowerSGD and reads
  /// its state before it: Q ([..., cols, rank], the warm start, alike over
  /// the reduction's axes: normal(1) from its name) and this device's error
  /// feedback ([..., rows, cols], zeros at first). Leading dimensions are a
  /// batch of matrices, each approximated on its own (a repeat's stacked
  /// gradients: a pipeline returns each chunk's layer gradients stacked).
  /// The gradient is this device's block (a tensor-parallel weight's is its
  /// tp block), so on a mesh with other axes each block has its own state:
  /// Q is its block of a tensor split over those axes, the error its block
  /// of one split over every axis. Both are optimizer state, so checkpoints
  /// save and restore every device's; in a repeated layer the prefix gives
  /// every instance its own. The reads go first in the block, so that no
  /// reordering (a scheduled start) runs the reduction before them. The
  /// lowering finds them by the names in braid.powersgd and updates them in
  /// place.
  void addPowerSgdState(CollectiveOpInterface op,
                        llvm::DenseMap<Operation *, int64_t> &sites) {
    auto type = cast<RankedTensorType>(op.getInput().getType());
    // The error is split over the reduction's axes and the mesh's other
    // axes of more than one device (in mesh order), Q over the latter.
    SmallVector<Attribute> all, others;
    if (auto mesh =
            SymbolTable::lookupNearestSymbolFrom<MeshOp>(op, op.getMeshAttr()))
      for (auto [axis, size] : llvm::zip(
               mesh.getAxes().getAsRange<StringAttr>(), mesh.getShape())) {
        bool reduced = llvm::is_contained(op.getAxes(), Attribute(axis));
        if (reduced || size > 1)
          all.push_back(axis);
        if (!reduced && size > 1)
          others.push_back(axis);
      }
    Operation *owner = op->getParentOp();
    while (owner && !isa<LayerOp, func::FuncOp>(owner))
      owner = owner->getParentOp();
    StringRef ownerName =
        owner ? cast<SymbolOpInterface>(owner).getName() : "module";
    std::string base =
        ("powersgd." + ownerName + "." + std::to_string(sites[owner]++)).str();
    OpBuilder b(op);
    Operation *&lastRead = stateReads[op->getBlock()];
    if (lastRead)
      b.setInsertionPointAfter(lastRead);
    else
      b.setInsertionPointToStart(op->getBlock());
    MLIRContext *ctx = b.getContext();
    Location loc = op.getLoc();
    SmallVector<int64_t> qShape(type.getShape().drop_back(2));
    qShape.append({type.getShape().back(), rank});
    auto normal =
        InitAttr::get(ctx, InitKind::normal, APFloat(1.0), APFloat(0.0));
    auto zeros =
        InitAttr::get(ctx, InitKind::zeros, APFloat(0.0), APFloat(0.0));
    // Dimension 0 split over `axes`, the others whole.
    auto firstOver = [&](ArrayRef<Attribute> axes) {
      SmallVector<Attribute> dims(type.getRank(), ArrayAttr::get(ctx, {}));
      dims[0] = ArrayAttr::get(ctx, axes);
      return ShardingAttr::get(ctx, op.getMeshAttr(), ArrayAttr::get(ctx, dims),
                               ArrayAttr(), ArrayRef<int64_t>());
    };
    ParamOp::create(b, loc, RankedTensorType::get(qShape, b.getF32Type()),
                    base + ".q", normal, /*state=*/true,
                    others.empty() ? ShardingAttr() : firstOver(others));
    lastRead =
        ParamOp::create(b, loc, type.clone(b.getF32Type()), base + ".error",
                        zeros, /*state=*/true, firstOver(all));
    op->setAttr("braid.compress", b.getStringAttr("powersgd"));
    op->setAttr(
        "braid.powersgd",
        b.getDictionaryAttr(
            {b.getNamedAttr("rank", b.getI64IntegerAttr(rank)),
             b.getNamedAttr("q", b.getStringAttr(base + ".q")),
             b.getNamedAttr("error", b.getStringAttr(base + ".error"))}));
  }

  /// The last state read inserted at the start of each block.
  llvm::DenseMap<Block *, Operation *> stateReads;

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
        // Matrices (a 2-D gradient, or a batch of them) where P and Q are
        // smaller than each; the others stay exact. A reduce_scatter
        // (ZeRO) keeps its share of the approximation.
        if (type.getRank() >= 2) {
          int64_t rows = type.getDimSize(type.getRank() - 2),
                  cols = type.getDimSize(type.getRank() - 1);
          if ((rows + cols) * rank < rows * cols)
            powerSgd.push_back(op);
        }
        return;
      }
      op->setAttr("braid.compress", mark);
    });
    llvm::DenseMap<Operation *, int64_t> sites;
    stateReads.clear();
    for (CollectiveOpInterface op : powerSgd)
      addPowerSgdState(op, sites);
  }
};

} // namespace
