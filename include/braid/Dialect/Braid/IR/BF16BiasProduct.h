//===- BF16BiasProduct.h - A matmul's bias add ------------------*- C++ -*-===//
//
// A linear layer's bias add, as braid-fuse-matmul-epilogue folds it and as
// a bf16 linear layer rounds it. A braid.matmul whose only use is a
// braid.add of a bias over its rows (a vector of the product's last
// dimension and element type, either operand order, in the same block) is
// a linear layer's product. In bf16 it is not rounded to bf16: the add sums
// the bias with the f32 product in f32 and rounds that sum to bf16, as
// PyTorch's bf16 addmm (autocast's linear; an f32 epilogue, then the
// conversion) and a GEMM with a bias epilogue do. braid-eval and
// braid-legalize-bf16 both ask this, so the oracle and the compiled program
// round at the same places (braid-eval rounds the add's sum to f32, then to
// bf16, as the legalized add and its braid.round do), and
// braid-fuse-matmul-epilogue then finds the product and its add with no
// braid.round between them.
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_DIALECT_BRAID_IR_BF16BIASPRODUCT_H
#define BRAID_DIALECT_BRAID_IR_BF16BIASPRODUCT_H

#include "braid/Dialect/Braid/IR/BraidOps.h"

namespace mlir::braid {

/// The bias `add` adds to `product` over its rows: its other operand, a
/// statically shaped vector of the product's last dimension and element
/// type, with a result of the product's type. Null if `add` is anything
/// else.
inline Value getRowBias(AddOp add, Value product) {
  Value bias = add.getLhs() == product ? add.getRhs() : add.getLhs();
  auto productType = cast<RankedTensorType>(product.getType());
  auto biasType = dyn_cast<RankedTensorType>(bias.getType());
  if (bias == product || add.getResult().getType() != productType ||
      !biasType || !biasType.hasStaticShape() || biasType.getRank() != 1 ||
      biasType.getElementType() != productType.getElementType() ||
      biasType.getDimSize(0) != productType.getShape().back())
    return nullptr;
  return bias;
}

/// The bias add of `matmul`'s product (see above): the product's only use,
/// in the matmul's block, adding a row bias. Null if there is none.
inline AddOp getBiasAdd(MatmulOp matmul) {
  Value product = matmul.getResult();
  if (!product.hasOneUse())
    return nullptr;
  auto add = dyn_cast<AddOp>(*product.getUsers().begin());
  if (!add || add->getBlock() != matmul->getBlock() ||
      !getRowBias(add, product))
    return nullptr;
  return add;
}

/// Whether `matmul` computes a bf16 product that its bias add sums before
/// rounding (see above): it is then held in f32 until the add.
inline bool isBF16BiasProduct(MatmulOp matmul) {
  auto isBF16 = [](Value v) {
    auto type = dyn_cast<RankedTensorType>(v.getType());
    return type && type.hasStaticShape() && type.getElementType().isBF16();
  };
  return isBF16(matmul.getLhs()) && isBF16(matmul.getRhs()) &&
         isBF16(matmul.getResult()) && getBiasAdd(matmul);
}

/// The bf16 product (isBF16BiasProduct) whose bias `add` adds, or null.
inline MatmulOp getBF16BiasProduct(AddOp add) {
  for (Value v : add->getOperands())
    if (auto matmul = v.getDefiningOp<MatmulOp>())
      if (isBF16BiasProduct(matmul))
        return matmul;
  return nullptr;
}

} // namespace mlir::braid

#endif // BRAID_DIALECT_BRAID_IR_BF16BIASPRODUCT_H
