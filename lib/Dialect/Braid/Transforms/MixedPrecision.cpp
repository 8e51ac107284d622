//===- MixedPrecision.cpp - bf16 mixed precision on a forward program -----===//
//
// Rewrites a forward program (before braid-autodiff) so that matrix
// products, attention and elementwise ops compute in bf16, while
// parameters (the master weights), norms, softmax, reductions and the loss
// stay f32. The backward pass follows from the ops' gradients, braid.convert's
// among them, so braid-autodiff and braid-train-step need no precision
// logic of their own.
//
//===----------------------------------------------------------------------===//

#include "braid/Dialect/Braid/IR/BraidOps.h"
#include "braid/Dialect/Braid/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace mlir::braid {
#define GEN_PASS_DEF_MIXEDPRECISIONPASS
#include "braid/Dialect/Braid/Transforms/Passes.h.inc"
} // namespace mlir::braid

using namespace mlir;
using namespace mlir::braid;

namespace {

static bool isFloatTensor(Type t) {
  auto tensor = dyn_cast<RankedTensorType>(t);
  return tensor && isa<FloatType>(tensor.getElementType());
}

static Type withElement(Type t, Type element) {
  auto tensor = cast<RankedTensorType>(t);
  return RankedTensorType::get(tensor.getShape(), element);
}

/// Ops that compute in bf16 (the ComputesInBF16 trait): their float
/// operands become bf16, and so do their results (a matmul, with or without
/// its bias, sums its products in f32 and rounds once).
static bool computesInBF16(Operation *op) {
  return op->hasTrait<OpTrait::braid::ComputesInBF16>();
}

/// Ops whose result has their operand's element type: those that only move
/// data (the MovesDataOnly trait: reshape, transpose, broadcast, slice,
/// concat) and braid.shard, the identity that constrains a sharding. (Not
/// MovesDataOnly: that trait also says recomputing the op is free, and a
/// recomputed braid.shard may realise its sharding again, a collective.)
static bool followsOperand(Operation *op) {
  return op->hasTrait<OpTrait::braid::MovesDataOnly>() || isa<ShardOp>(op);
}

/// One function or layer body: converts values on demand, one conversion
/// of a value per type, placed right after its definition.
class BlockRewriter {
public:
  BlockRewriter(Block &block, Type bf16, Type f32)
      : block(block), bf16(bf16), f32(f32) {}

  /// `v` with element type `element`, converted once if it has another.
  Value as(Value v, Type element) {
    if (!isFloatTensor(v.getType()) ||
        getElementTypeOrSelf(v.getType()) == element)
      return v;
    auto key = std::make_pair(v, element);
    if (Value c = converted.lookup(key))
      return c;
    OpBuilder b(v.getContext());
    if (Operation *def = v.getDefiningOp())
      b.setInsertionPointAfter(def);
    else
      b.setInsertionPointToStart(&block);
    Value c =
        ConvertOp::create(b, v.getLoc(), withElement(v.getType(), element), v);
    converted[key] = c;
    return c;
  }

  void setOperandsTo(Operation *op, Type element) {
    for (OpOperand &use : op->getOpOperands())
      use.set(as(use.get(), element));
  }

  void setResultsTo(Operation *op, Type element) {
    for (Value r : op->getResults())
      if (isFloatTensor(r.getType()))
        r.setType(withElement(r.getType(), element));
  }

  LogicalResult rewrite() {
    for (Operation &op : llvm::make_early_inc_range(block)) {
      if (isa<ConvertOp, ParamOp, ConstantOp>(op))
        continue;
      if (isa<func::ReturnOp>(op)) {
        auto fn = cast<FunctionOpInterface>(op.getParentOp());
        for (auto [use, type] :
             llvm::zip(op.getOpOperands(), fn.getResultTypes()))
          use.set(as(use.get(), getElementTypeOrSelf(type)));
        continue;
      }
      if (isa<YieldOp>(op)) {
        setOperandsTo(&op, bf16);
        continue;
      }
      if (isa<RepeatOp>(op)) {
        // Every float argument and result of a layer is bf16.
        setOperandsTo(&op, bf16);
        setResultsTo(&op, bf16);
        continue;
      }
      if (computesInBF16(&op)) {
        setOperandsTo(&op, bf16);
        setResultsTo(&op, bf16);
        continue;
      }
      if (followsOperand(&op)) {
        bool anyBF16 = llvm::any_of(op.getOperandTypes(), [&](Type t) {
          return getElementTypeOrSelf(t) == bf16;
        });
        Type element = anyBF16 ? bf16 : f32;
        setOperandsTo(&op, element);
        setResultsTo(&op, element);
        continue;
      }
      if (op.getNumRegions())
        return op.emitOpError()
               << "has regions; braid-mixed-precision runs on a forward "
                  "program before autodiff, pipelining and fusion";
      // Norms, softmax, cross-entropy, reductions and anything else: f32.
      setOperandsTo(&op, f32);
    }
    return success();
  }

private:
  Block &block;
  Type bf16, f32;
  llvm::DenseMap<std::pair<Value, Type>, Value> converted;
};

struct MixedPrecisionPass
    : public braid::impl::MixedPrecisionPassBase<MixedPrecisionPass> {
  using MixedPrecisionPassBase::MixedPrecisionPassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (precision == "f32")
      return;
    if (precision != "bf16-mixed") {
      module.emitError() << "braid-mixed-precision: unknown precision '"
                         << precision << "'; expected f32 or bf16-mixed";
      return signalPassFailure();
    }
    MLIRContext *ctx = module.getContext();
    Type bf16 = BFloat16Type::get(ctx), f32 = Float32Type::get(ctx);

    // Only a forward program in f32: a training step already has its
    // optimizer, and other float types would be silently mixed.
    WalkResult checked = module.walk([&](Operation *op) {
      if (isa<AdamWUpdateOp, SgdUpdateOp, StoreParamOp, PipelineOp, FusedOp>(
              op)) {
        op->emitOpError() << "braid-mixed-precision runs on a forward "
                             "program, before braid-autodiff and "
                             "braid-train-step";
        return WalkResult::interrupt();
      }
      for (Type t : op->getResultTypes())
        if (isFloatTensor(t) && !getElementTypeOrSelf(t).isF32()) {
          op->emitOpError() << "has a " << getElementTypeOrSelf(t)
                            << " result; braid-mixed-precision takes an f32 "
                               "program";
          return WalkResult::interrupt();
        }
      return WalkResult::advance();
    });
    if (checked.wasInterrupted())
      return signalPassFailure();

    // Layers first: their float arguments and results become bf16, which
    // the repeats in the bodies rewritten below then match.
    auto toBF16 = [&](Type t) {
      return isFloatTensor(t) ? withElement(t, bf16) : t;
    };
    SmallVector<LayerOp> layers(module.getOps<LayerOp>());
    for (LayerOp layer : layers) {
      SmallVector<Type> inputs, results;
      for (Type t : layer.getArgumentTypes())
        inputs.push_back(toBF16(t));
      for (Type t : layer.getResultTypes())
        results.push_back(toBF16(t));
      layer.setFunctionTypeAttr(
          TypeAttr::get(FunctionType::get(ctx, inputs, results)));
      for (BlockArgument arg : layer.getBody().getArguments())
        arg.setType(toBF16(arg.getType()));
    }
    for (LayerOp layer : layers)
      if (failed(BlockRewriter(layer.getBody().front(), bf16, f32).rewrite()))
        return signalPassFailure();
    for (auto fn : module.getOps<func::FuncOp>()) {
      if (fn.isExternal())
        continue;
      if (failed(BlockRewriter(fn.getBody().front(), bf16, f32).rewrite()))
        return signalPassFailure();
    }
  }
};

} // namespace
