//===- FuseMatmulEpilogue.cpp - Bias add and GELU into the matmul ---------===//
//
// Folds `braid.add` of a bias over a matmul's rows, and a tanh GELU after
// it, into one braid.matmul_bias: code generation then runs one GEMM with
// an epilogue instead of a GEMM and elementwise kernels. The product, the
// sum and the GELU keep their roundings, so the program computes the same
// values.
//
//===----------------------------------------------------------------------===//

#include "braid/Dialect/Braid/IR/BF16BiasProduct.h"
#include "braid/Dialect/Braid/IR/BraidOps.h"
#include "braid/Dialect/Braid/Transforms/Passes.h"

#include "mlir/IR/Builders.h"

namespace mlir::braid {
#define GEN_PASS_DEF_FUSEMATMULEPILOGUEPASS
#include "braid/Dialect/Braid/Transforms/Passes.h.inc"
} // namespace mlir::braid

using namespace mlir;
using namespace mlir::braid;

namespace {

/// `v`'s only user, if it has exactly one use.
static Operation *soleUser(Value v) {
  return v.hasOneUse() ? *v.getUsers().begin() : nullptr;
}

static bool isStaticF32(Value v) {
  auto type = dyn_cast<RankedTensorType>(v.getType());
  return type && type.hasStaticShape() && type.getElementType().isF32();
}

static void fuse(MatmulOp matmul) {
  Value product = matmul.getResult();
  if (!isStaticF32(matmul.getLhs()) || !isStaticF32(matmul.getRhs()) ||
      !isStaticF32(product))
    return;
  // The folded ops must be in the matmul's block (getBiasAdd asks it of the
  // add): the fused op stands where the last of them was, and would
  // otherwise pull the matmul into a nested region (or out of one).
  Block *block = matmul->getBlock();
  AddOp add = getBiasAdd(matmul);
  if (!add)
    return;
  Value bias = getRowBias(add, product);
  // The op stands where the last folded op was: its operands are defined
  // before it (the matmul's before the matmul, the bias before the add).
  Operation *last = add;
  auto gelu = dyn_cast_or_null<GeluOp>(soleUser(add.getResult()));
  if (gelu && gelu.getApproximate() == GeluApproximation::tanh &&
      gelu->getBlock() == block)
    last = gelu;
  else
    gelu = nullptr;
  OpBuilder b(last);
  auto fused = MatmulBiasOp::create(
      b, last->getLoc(), product.getType(), matmul.getLhs(), matmul.getRhs(),
      bias, matmul.getTransposeA(), matmul.getTransposeB(),
      gelu ? gelu.getApproximateAttr() : GeluApproximationAttr());
  // The matmul's discardable attributes (phase, bf16 operands).
  for (NamedAttribute attr : matmul->getDiscardableAttrs())
    fused->setDiscardableAttr(attr.getName(), attr.getValue());
  last->getResult(0).replaceAllUsesWith(fused.getResult());
  if (gelu)
    gelu->erase();
  add->erase();
  matmul->erase();
}

struct FuseMatmulEpiloguePass
    : public braid::impl::FuseMatmulEpiloguePassBase<FuseMatmulEpiloguePass> {
  using Base::Base;
  void runOnOperation() override {
    SmallVector<MatmulOp> matmuls;
    getOperation().walk([&](MatmulOp op) { matmuls.push_back(op); });
    for (MatmulOp op : matmuls)
      fuse(op);
  }
};

} // namespace
