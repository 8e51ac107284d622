//===- BraidOpsFusion.cpp - braid.fused: elementwise ops in one loop ------===//
//
// The verifier of braid.fused and the ops it may hold. Code generation
// (lib/Conversion/BraidToEmitC/FusedOps.cpp) emits one loop nest per
// region, so everything it relies on is checked here: one iteration shape,
// operands that broadcast to it, a body of fusible ops only, and for
// row-wise ops rows of that shape and a loss that only leaves the region.
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
  // The rounding braid-legalize-bf16 puts after each op computing a bf16
  // value: one more per-element function (braid_rt_round_bf16_of, the
  // kernel's), so a bf16-mixed chain stays one region.
  if (auto round = dyn_cast<RoundOp>(op))
    return round.getElementType().isBF16();
  if (auto gelu = dyn_cast<GeluOp>(op))
    return gelu.getApproximate() == GeluApproximation::tanh;
  if (auto grad = dyn_cast<GeluGradOp>(op))
    return grad.getApproximate() == GeluApproximation::tanh;
  return isa<AddOp, SubOp, MulOp, DivOp, NegOp, ExpOp, SqrtOp, RsqrtOp, ReluOp,
             SiluOp, ReluGradOp, SiluGradOp>(op);
}

//===----------------------------------------------------------------------===//
// RowReductionOpInterface
//===----------------------------------------------------------------------===//

bool SoftmaxOp::isFusibleByRows() {
  return (int64_t)getAxis() ==
         cast<RankedTensorType>(getInput().getType()).getRank() - 1;
}

// A vocabulary-parallel loss all-reduces its rows' statistics: a row is not
// this device's to finish.
bool CrossEntropyOp::isFusibleByRows() { return !getMesh() && !getVocabAxes(); }
bool CrossEntropyGradOp::isFusibleByRows() {
  return !getMesh() && !getVocabAxes();
}

bool CrossEntropyOp::sharesRowStatistics(Operation *other) {
  return isa<CrossEntropyOp, CrossEntropyGradOp>(other);
}
bool CrossEntropyGradOp::sharesRowStatistics(Operation *other) {
  return isa<CrossEntropyOp, CrossEntropyGradOp>(other);
}

//===----------------------------------------------------------------------===//
// FusedOp
//===----------------------------------------------------------------------===//

bool FusedOp::isRowwise(Operation *op) {
  auto rowwise = dyn_cast<RowReductionOpInterface>(op);
  if (!rowwise || op->getNumResults() != 1 || op->getNumOperands() == 0)
    return false;
  for (Type type :
       llvm::concat<Type>(op->getOperandTypes(), op->getResultTypes())) {
    auto tensor = dyn_cast<RankedTensorType>(type);
    if (!tensor || !tensor.hasStaticShape())
      return false;
    // Integers are labels (verified by the op); everything else is f32.
    if (!tensor.getElementType().isF32() &&
        !tensor.getElementType().isInteger())
      return false;
  }
  auto rows = cast<RankedTensorType>(op->getOperand(0).getType());
  return rows.getRank() > 0 && rows.getElementType().isF32() &&
         rowwise.isFusibleByRows();
}

ArrayRef<int64_t> FusedOp::getIterationShape() {
  for (Operation &op : getBody().front())
    if (isRowwise(&op))
      return cast<RankedTensorType>(op.getOperand(0).getType()).getShape();
  return cast<RankedTensorType>(getResult(0).getType()).getShape();
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

/// "2x8", as a tensor type prints a shape.
static std::string dims(ArrayRef<int64_t> shape) {
  std::string s;
  llvm::raw_string_ostream os(s);
  llvm::interleave(shape, os, "x");
  return s;
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
  bool rowwise = llvm::any_of(body.without_terminator(),
                              [](Operation &op) { return isRowwise(&op); });
  for (auto [i, input] : llvm::enumerate(getInputs())) {
    auto type = cast<RankedTensorType>(input.getType());
    if (type.getElementType().isInteger()) {
      // Labels: one per row.
      if (!rowwise || type.getShape() != shape.drop_back())
        return emitOpError()
               << "operand #" << i << " of type " << type
               << " is an integer tensor, which only a row-wise op's labels "
                  "may be: one per row of the iteration shape ["
               << dims(shape) << "]";
      continue;
    }
    if (!broadcastsTo(type.getShape(), shape)) {
      InFlightDiagnostic d =
          emitOpError() << "operand #" << i << " of type " << input.getType()
                        << " does not broadcast to the iteration shape ";
      if (rowwise)
        return d << "[" << dims(shape) << "] (the rows of its row-wise ops)";
      return d << getResult(0).getType() << " (the shape of result #0)";
    }
  }
  auto yield = dyn_cast<YieldOp>(body.getTerminator());
  if (!yield)
    return emitOpError("body must end in braid.yield");
  if (!llvm::equal(yield.getOperandTypes(), getResultTypes()))
    return emitOpError() << "yields " << yield.getNumOperands()
                         << " values whose types differ from its "
                         << getNumResults() << " result types";
  for (Operation &op : body.without_terminator()) {
    if (isRowwise(&op)) {
      if (cast<RankedTensorType>(op.getOperand(0).getType()).getShape() !=
          shape)
        return op.emitOpError()
               << "reduces rows of " << op.getOperand(0).getType()
               << " but the fused region iterates over [" << dims(shape)
               << "]; every row-wise op of a region has rows of that shape";
      // Scale, bias, labels and the loss gradient are read whole: they come
      // from outside.
      for (Value v : op.getOperands())
        if (cast<RankedTensorType>(v.getType()).getShape() != shape &&
            !isa<BlockArgument>(v))
          return op.emitOpError()
                 << "reads " << v.getType()
                 << ", not a row of the region, from inside the region; "
                    "only its operands may be";
      Value result = op.getResult(0);
      if (cast<RankedTensorType>(result.getType()).getShape() == shape)
        continue;
      // The loss is a mean over every row: known only after the loop.
      for (Operation *user : result.getUsers())
        if (!isa<YieldOp>(user))
          return op.emitOpError()
                 << "has a result of type " << result.getType()
                 << " (a mean over all rows) used by " << user->getName()
                 << " inside the region; only braid.yield may use it";
      continue;
    }
    if (!isFusible(&op))
      return op.emitOpError()
             << "cannot be in a braid.fused region: only f32 elementwise ops "
                "(add, sub, mul, div, neg, exp, sqrt, rsqrt, relu, silu, "
                "tanh gelu and their gradients, round to bf16) and row-wise "
                "ops (layer_norm, rms_norm, their gradients, softmax over the "
                "last axis, cross_entropy and its gradient) can";
    if (cast<RankedTensorType>(op.getResult(0).getType()).getShape() != shape) {
      InFlightDiagnostic d = op.emitOpError()
                             << "has result type " << op.getResult(0).getType()
                             << " but the fused region iterates over ";
      if (rowwise)
        d << "[" << dims(shape) << "] (the rows of its row-wise ops)";
      else
        d << "the shape of " << getResult(0).getType();
      return d << "; every value of the region has that shape";
    }
  }
  return success();
}
