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

  void runOnOperation() override {
    if (format != "bf16" && format != "fp16") {
      getOperation().emitError() << "braid-compress-gradients: unknown format '"
                                 << format << "'; expected bf16 or fp16";
      return signalPassFailure();
    }
    llvm::StringSet<> dataAxes;
    for (const std::string &axis : axes)
      dataAxes.insert(axis);
    if (dataAxes.empty())
      dataAxes.insert("dp");
    Builder b(&getContext());
    StringAttr mark = b.getStringAttr(format);
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
      op->setAttr("braid.compress", mark);
    });
  }
};

} // namespace
