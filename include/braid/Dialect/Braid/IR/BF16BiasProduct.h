//===- BF16BiasProduct.h - bf16 products summed with their bias -*- C++ -*-===//
//
// What a bf16 linear layer rounds. A bf16 braid.matmul whose only use is a
// braid.add of a bias over its rows (a vector of the product's last
// dimension, bf16, either operand order, in the same block) is not rounded
// to bf16: the add sums the bias with the f32 product and rounds once, as
// PyTorch's bf16 addmm (autocast's linear) and a GEMM with a bias epilogue
// do. braid-eval and braid-legalize-bf16 both ask this, so the oracle and
// the compiled program round at the same places, and
// braid-fuse-matmul-epilogue then finds the product and its add with no
// braid.round between them.
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_DIALECT_BRAID_IR_BF16BIASPRODUCT_H
#define BRAID_DIALECT_BRAID_IR_BF16BIASPRODUCT_H

#include "braid/Dialect/Braid/IR/BraidOps.h"

namespace mlir::braid {

/// Whether `matmul` computes a bf16 product that its bias add sums before
/// rounding (see above): it is then held in f32 until the add.
inline bool isBF16BiasProduct(MatmulOp matmul) {
  auto isBF16 = [](Value v) {
    auto type = dyn_cast<RankedTensorType>(v.getType());
    return type && type.hasStaticShape() && type.getElementType().isBF16();
  };
  Value product = matmul.getResult();
  if (!isBF16(matmul.getLhs()) || !isBF16(matmul.getRhs()) ||
      !isBF16(product) || !product.hasOneUse())
    return false;
  auto add = dyn_cast<AddOp>(*product.getUsers().begin());
  if (!add || add->getBlock() != matmul->getBlock() ||
      add.getResult().getType() != product.getType())
    return false;
  Value bias = add.getLhs() == product ? add.getRhs() : add.getLhs();
  if (bias == product || !isBF16(bias))
    return false;
  auto biasType = cast<RankedTensorType>(bias.getType());
  return biasType.getRank() == 1 &&
         biasType.getDimSize(0) ==
             cast<RankedTensorType>(product.getType()).getShape().back();
}

} // namespace mlir::braid

#endif // BRAID_DIALECT_BRAID_IR_BF16BIASPRODUCT_H
