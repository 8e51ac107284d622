//===- BraidOpsFusion.cpp - braid.fused: elementwise ops in one loop ------===//
//
// The verifier of braid.fused and the ops it may hold. Code generation
// (lib/Conversion/BraidToEmitC/FusedOps.cpp) emits one loop nest per
// region, so everything it relies on is checked here: one iteration shape,
// operands that broadcast to it, a body of fusible ops only.
//
//===----------------------------------------------------------------------===//

#include "braid/Dialect/Braid/IR/BraidOps.h"

using namespace mlir;
using namespace mlir::braid;

bool FusedOp::isFusible(Operation *op) {
  if (op->getNumResults() != 1)
    return false;
  for (Type type :
       llvm::concat<Type>(op->getOperandTypes(), op->getResultTypes())) {
    auto tensor = dyn_cast<RankedTensorType>(type);
    if (!tensor || !tensor.hasStaticShape() || !tensor.getElementType().isF32())
      return false;
  }
  if (auto gelu = dyn_cast<GeluOp>(op))
    return gelu.getApproximate() == GeluApproximation::tanh;
  if (auto grad = dyn_cast<GeluGradOp>(op))
    return grad.getApproximate() == GeluApproximation::tanh;
  return isa<AddOp, SubOp, MulOp, DivOp, NegOp, ExpOp, SqrtOp, RsqrtOp, ReluOp,
             SiluOp, ReluGradOp, SiluGradOp>(op);
}

/// Whether `shape` broadcasts to `target` (NumPy rules, no new dimension in
/// `target` beyond its rank).
static bool broadcastsTo(ArrayRef<int64_t> shape, ArrayRef<int64_t> target) {
  if (shape.size() > target.size())
    return false;
  for (auto [s, t] : llvm::zip(llvm::reverse(shape), llvm::reverse(target)))
    if (s != t && s != 1)
      return false;
  return true;
}

LogicalResult FusedOp::verify() {
  if (getNumResults() == 0)
    return emitOpError("has no results; a fused region computes at least one "
                       "value");
  Block &body = getBody().front();
  if (body.getNumArguments() != getInputs().size())
    return emitOpError() << "has " << getInputs().size()
                         << " operands but its body takes "
                         << body.getNumArguments() << " arguments";
  for (auto [i, arg, input] : llvm::enumerate(body.getArguments(), getInputs()))
    if (arg.getType() != input.getType())
      return emitOpError() << "body argument #" << i << " has type "
                           << arg.getType() << " but operand #" << i
                           << " has type " << input.getType();
  ArrayRef<int64_t> shape = getIterationShape();
  for (auto [i, input] : llvm::enumerate(getInputs()))
    if (!broadcastsTo(cast<RankedTensorType>(input.getType()).getShape(),
                      shape))
      return emitOpError() << "operand #" << i << " of type " << input.getType()
                           << " does not broadcast to the iteration shape "
                           << getResult(0).getType()
                           << " (the shape of result #0)";
  auto yield = dyn_cast<YieldOp>(body.getTerminator());
  if (!yield)
    return emitOpError("body must end in braid.yield");
  if (!llvm::equal(yield.getOperandTypes(), getResultTypes()))
    return emitOpError() << "yields " << yield.getNumOperands()
                         << " values whose types differ from its "
                         << getNumResults() << " result types";
  for (Operation &op : body.without_terminator()) {
    if (!isFusible(&op))
      return op.emitOpError()
             << "cannot be in a braid.fused region: only f32 elementwise ops "
                "(add, sub, mul, div, neg, exp, sqrt, rsqrt, relu, silu, "
                "tanh gelu and their gradients) can";
    if (cast<RankedTensorType>(op.getResult(0).getType()).getShape() != shape)
      return op.emitOpError()
             << "has result type " << op.getResult(0).getType()
             << " but the fused region iterates over the shape of "
             << getResult(0).getType()
             << "; every value of the region has that shape";
  }
  return success();
}
