//===- Shard.cpp - Standard dp/tp annotations from program structure ------===//

#include "braid/Dialect/Braid/IR/BraidOps.h"
#include "braid/Dialect/Braid/Transforms/Passes.h"
#include "braid/Dialect/Braid/Transforms/ShardingUtils.h"
#include "braid/Dialect/Braid/Transforms/TensorParallelPlan.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseSet.h"

namespace mlir::braid {
#define GEN_PASS_DEF_SHARDPASS
#include "braid/Dialect/Braid/Transforms/Passes.h.inc"
} // namespace mlir::braid

using namespace mlir;
using namespace mlir::braid;

namespace {

/// Whether `arg` is used as micro-batches stacked along its leading
/// dimension: by braid.pipeline, or as a stacked operand of braid.repeat.
bool isStacked(BlockArgument arg) {
  return llvm::any_of(arg.getUses(), [](OpOperand &use) {
    if (isa<PipelineOp>(use.getOwner()))
      return true;
    auto repeat = dyn_cast<RepeatOp>(use.getOwner());
    return repeat && use.getOperandNumber() >= repeat.getNumCarried();
  });
}

struct ShardPass : public braid::impl::ShardPassBase<ShardPass> {
  using ShardPassBase::ShardPassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (dp < 1 || tp < 1) {
      module.emitError("braid-shard: dp and tp must be at least 1");
      return signalPassFailure();
    }
    if (zero < 0 || zero > 3) {
      module.emitError() << "braid-shard: zero must be 0, 1, 2 or 3, got "
                         << (int64_t)zero;
      return signalPassFailure();
    }
    // ZeRO and sequence parallelism split over an axis of size one would
    // silently do nothing.
    if (zero > 0 && dp == 1) {
      module.emitError() << "braid-shard: zero=" << (int64_t)zero
                         << " shards over the data-parallel axis, but dp=1";
      return signalPassFailure();
    }
    if (sp && tp == 1) {
      module.emitError("braid-shard: sp splits the sequence over the "
                       "tensor-parallel axis, but tp=1");
      return signalPassFailure();
    }
    if (!module.getOps<MeshOp>().empty()) {
      module.emitError("braid-shard: the module already has a braid.mesh; "
                       "annotate it by hand or remove the mesh");
      return signalPassFailure();
    }
    OpBuilder b = OpBuilder::atBlockBegin(module.getBody());
    auto mesh = MeshOp::create(b, module.getLoc(), "mesh",
                               b.getStrArrayAttr({"dp", "tp"}),
                               b.getDenseI64ArrayAttr({dp, tp}));

    for (auto fn : module.getOps<func::FuncOp>()) {
      if (dp == 1)
        break;
      for (unsigned i = 0; i < fn.getNumArguments(); ++i) {
        auto type = dyn_cast<RankedTensorType>(fn.getArgument(i).getType());
        if (!type || type.getRank() == 0 || fn.getArgAttr(i, "braid.sharding"))
          continue;
        // Micro-batches stacked for braid.pipeline or an accumulation
        // loop come first; the batch is the dimension after them.
        int64_t dim = isStacked(fn.getArgument(i)) ? 1 : 0;
        if (dim >= type.getRank())
          continue;
        if (type.getDimSize(dim) % dp != 0) {
          fn.emitOpError() << "argument #" << i << " has batch dimension "
                           << type.getDimSize(dim)
                           << ", not divisible by dp = " << (int64_t)dp;
          return signalPassFailure();
        }
        Sharding s = Sharding::replicated(type.getRank());
        s.dims[dim] = {"dp"};
        fn.setArgAttr(i, "braid.sharding", s.toAttr(mesh));
      }
    }
    // Which weights tensor parallelism splits, from the program's dataflow.
    std::optional<TensorParallelPlan> plan;
    if (tp > 1)
      plan.emplace(module);
    else if (explain)
      module.emitRemark("braid-shard: tp = 1, nothing to split over tp");
    llvm::StringSet<> explained;
    WalkResult walk = module.walk([&](ParamOp param) {
      TensorParallelDecision decision;
      if (plan)
        decision = plan->lookup(param);
      auto type = cast<RankedTensorType>(param.getType());
      int64_t dim = decision.dim, blocks = decision.blocks;
      bool split = decision.role != TensorParallelDecision::Role::None &&
                   dim >= 0 && dim < type.getRank();
      // The vocabulary stays whole where tp does not divide it.
      bool dropped =
          split && decision.optional && type.getDimSize(dim) % (tp * blocks);
      if (dropped)
        split = false;
      if (explain && plan && !param.getState() &&
          explained.insert(plan->fullNames(param).front()).second) {
        InFlightDiagnostic remark = param.emitRemark()
                                    << "'" << plan->fullNames(param).front()
                                    << "': " << stringifyRole(decision.role);
        if (decision.role != TensorParallelDecision::Role::None) {
          remark << " (dimension " << dim;
          if (blocks > 1)
            remark << " in " << blocks << " blocks, each";
          remark << " over tp)";
        }
        remark << ": " << decision.reason;
        if (dropped)
          remark << "; kept whole: dimension " << dim << " of size "
                 << type.getDimSize(dim)
                 << " is not divisible by tp = " << (int64_t)tp;
      }
      // ZeRO splits optimizer state (and, at stage 3, parameters) over dp.
      bool zeroSplit = dp > 1 && ((zero >= 1 && param.getState()) ||
                                  (zero >= 3 && !param.getState()));
      if (!split && !zeroSplit)
        return WalkResult::advance();
      Sharding s = Sharding::replicated(type.getRank());
      if (split) {
        if (type.getDimSize(dim) % (tp * blocks) != 0) {
          InFlightDiagnostic diag = param.emitOpError()
                                    << "parameter '" << param.getName()
                                    << "' has dimension " << dim << " of size "
                                    << type.getDimSize(dim);
          if (blocks > 1)
            diag << " in " << blocks << " blocks of "
                 << type.getDimSize(dim) / blocks << ", each";
          else
            diag << ",";
          diag << " not divisible by tp = " << (int64_t)tp;
          return WalkResult::interrupt();
        }
        s.setDim(dim, {"tp"}, blocks);
      }
      if (zeroSplit) {
        // The first dimension dp divides that tp does not split; a tensor
        // with none stays whole (it is small).
        for (int64_t d = 0; d < type.getRank(); ++d)
          if (s.dims[d].empty() && type.getDimSize(d) % dp == 0) {
            s.dims[d] = {"dp"};
            break;
          }
      }
      if (s.isReplicated())
        return WalkResult::advance();
      OpBuilder after(param->getContext());
      after.setInsertionPointAfter(param);
      // Weaker than everything: where ZeRO's split of state and
      // parameters meets the batch split, the batch split wins, so the
      // backward stays data parallel.
      auto shard = ShardOp::create(after, param.getLoc(), param.getResult(),
                                   s.toAttr(mesh), /*priority=*/-1);
      param.getResult().replaceAllUsesExcept(shard.getResult(), shard);
      return WalkResult::advance();
    });
    if (walk.wasInterrupted())
      return signalPassFailure();
    if (sp && tp > 1 && failed(splitSequence(module, mesh)))
      return signalPassFailure();
  }

  /// Constrains the first argument of every layer of rank 3 that a
  /// braid.repeat carries (the residual stream) to have its sequence
  /// (dimension 1) split over tp, at a priority below the tensor-parallel
  /// splits so that they win inside the blocks. A layer repeated with
  /// nothing carried (the weight-gradient piece, W) is left alone: its
  /// first argument is a saved activation, not the residual stream.
  LogicalResult splitSequence(ModuleOp module, MeshOp mesh) {
    llvm::DenseSet<StringAttr> carrying;
    module.walk([&](RepeatOp repeat) {
      if (repeat.getNumCarried() > 0)
        carrying.insert(repeat.getLayerAttr().getAttr());
    });
    for (auto layer : module.getOps<LayerOp>()) {
      if (!carrying.contains(layer.getSymNameAttr()))
        continue;
      Block &body = layer.getBody().front();
      if (body.getNumArguments() == 0)
        continue;
      BlockArgument x = body.getArgument(0);
      auto type = dyn_cast<RankedTensorType>(x.getType());
      if (!type || type.getRank() != 3)
        continue;
      if (type.getDimSize(1) % tp != 0)
        return layer.emitOpError()
               << "sequence length " << type.getDimSize(1)
               << " is not divisible by tp = " << (int64_t)tp;
      Sharding s = Sharding::replicated(3);
      if (dp > 1 && type.getDimSize(0) % dp == 0)
        s.dims[0] = {"dp"};
      s.dims[1] = {"tp"};
      OpBuilder b = OpBuilder::atBlockBegin(&body);
      auto shard = ShardOp::create(b, layer.getLoc(), x, s.toAttr(mesh),
                                   /*priority=*/-2);
      x.replaceAllUsesExcept(shard.getResult(), shard);
    }
    return success();
  }
};

} // namespace
