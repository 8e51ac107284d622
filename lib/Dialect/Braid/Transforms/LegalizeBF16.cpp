//===- LegalizeBF16.cpp - bf16 values held in f32
//--------------------------===//
//
// The kernels of both targets compute in f32. This pass keeps a bf16
// program's arithmetic on them: every bf16 tensor becomes f32, and every op
// that computed a bf16 value is followed by a braid.round to bf16, so the
// values are the bf16 program's (each op rounds to f32 first, then to bf16).
// A matmul of bf16 operands is marked braid.bf16_operands, for the lowering
// to multiply bf16 copies of them.
//
//===----------------------------------------------------------------------===//

#include "braid/Dialect/Braid/IR/BraidOps.h"
#include "braid/Dialect/Braid/IR/BraidTraits.h"
#include "braid/Dialect/Braid/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/Interfaces/CallInterfaces.h"

namespace mlir::braid {
#define GEN_PASS_DEF_LEGALIZEBF16PASS
#include "braid/Dialect/Braid/Transforms/Passes.h.inc"
} // namespace mlir::braid

using namespace mlir;
using namespace mlir::braid;

namespace {

static bool isBF16Tensor(Type t) {
  auto tensor = dyn_cast<RankedTensorType>(t);
  return tensor && tensor.getElementType().isBF16();
}

/// `t` with bf16 elements (also inside a future) replaced by f32.
static Type legalType(Type t) {
  MLIRContext *ctx = t.getContext();
  if (auto future = dyn_cast<FutureType>(t))
    return FutureType::get(
        ctx, cast<RankedTensorType>(legalType(future.getValueType())));
  if (isBF16Tensor(t)) {
    auto tensor = cast<RankedTensorType>(t);
    return RankedTensorType::get(tensor.getShape(), Float32Type::get(ctx));
  }
  return t;
}

static FunctionType legalFunctionType(FunctionType type) {
  SmallVector<Type> inputs, results;
  for (Type t : type.getInputs())
    inputs.push_back(legalType(t));
  for (Type t : type.getResults())
    results.push_back(legalType(t));
  return FunctionType::get(type.getContext(), inputs, results);
}

/// Whether `op`'s bf16 results need rounding after it computes them in f32:
/// not when it only moves bf16 values, or when its results come from a body
/// that rounds (a repeat's layer, a pipeline's pieces, a called function:
/// a pipeline driver holds only calls of its pieces).
static bool needsRounding(Operation *op) {
  return !op->hasTrait<OpTrait::braid::MovesDataOnly>() &&
         !isa<ShardOp, RepeatOp, PipelineOp, RoundOp, CallOpInterface>(op);
}

struct LegalizeBF16Pass
    : public braid::impl::LegalizeBF16PassBase<LegalizeBF16Pass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = module.getContext();
    Type bf16 = BFloat16Type::get(ctx), f32 = Float32Type::get(ctx);

    // Matmuls of two bf16 operands keep that fact for the lowering, which
    // then calls a GEMM on bf16 copies (exact: the operands hold bf16
    // values) with f32 sums.
    module.walk([&](MatmulOp op) {
      if (isBF16Tensor(op.getLhs().getType()) &&
          isBF16Tensor(op.getRhs().getType()))
        op->setAttr("braid.bf16_operands", UnitAttr::get(ctx));
    });

    // Conversions first, while the types still say what they convert.
    SmallVector<ConvertOp> converts;
    module.walk([&](ConvertOp op) { converts.push_back(op); });
    for (ConvertOp op : converts) {
      Type from = getElementTypeOrSelf(op.getInput().getType());
      Type to = getElementTypeOrSelf(op.getType());
      if (from == to || (from.isBF16() && to.isF32())) {
        // bf16 to f32 is exact: the f32 tensor already holds the value.
        op.getResult().replaceAllUsesWith(op.getInput());
        op.erase();
      } else if (from.isF32() && to.isBF16()) {
        OpBuilder b(op);
        Value r =
            RoundOp::create(b, op.getLoc(), op.getInput(), TypeAttr::get(bf16));
        op.getResult().replaceAllUsesWith(r);
        op.erase();
      }
      // Other pairs (f64, f16) stay, for the lowering to refuse.
    }

    // Signatures and block arguments: the values come in rounded.
    module.walk([&](Operation *op) {
      if (auto fn = dyn_cast<func::FuncOp>(op))
        fn.setType(legalFunctionType(fn.getFunctionType()));
      else if (auto layer = dyn_cast<LayerOp>(op))
        layer.setFunctionTypeAttr(
            TypeAttr::get(legalFunctionType(layer.getFunctionType())));
      for (Region &region : op->getRegions())
        for (Block &block : region)
          for (BlockArgument arg : block.getArguments())
            arg.setType(legalType(arg.getType()));
    });

    // Results: f32 type, then rounded where computed.
    SmallVector<Operation *> ops;
    module.walk([&](Operation *op) { ops.push_back(op); });
    for (Operation *op : ops) {
      if (auto constant = dyn_cast<ConstantOp>(op)) {
        auto dense = dyn_cast<DenseElementsAttr>(constant.getValue());
        if (!dense || !isBF16Tensor(dense.getType()))
          continue;
        auto type = cast<RankedTensorType>(legalType(dense.getType()));
        constant.setValueAttr(dense.mapValues(f32, [](const APFloat &v) {
          APFloat w = v;
          bool lost;
          w.convert(APFloat::IEEEsingle(), APFloat::rmNearestTiesToEven, &lost);
          return w.bitcastToAPInt();
        }));
        constant.getResult().setType(type);
        continue;
      }
      for (Value r : op->getResults()) {
        Type type = r.getType();
        Type legal = legalType(type);
        if (legal == type)
          continue;
        r.setType(legal);
        if (!isBF16Tensor(type) || !needsRounding(op))
          continue;
        OpBuilder b(op->getContext());
        b.setInsertionPointAfter(op);
        auto round = RoundOp::create(b, op->getLoc(), r, TypeAttr::get(bf16));
        r.replaceAllUsesExcept(round.getResult(), round);
      }
    }
  }
};

} // namespace
