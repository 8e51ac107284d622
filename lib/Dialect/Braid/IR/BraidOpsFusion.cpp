//===- BraidOpsFusion.cpp - braid.fused: elementwise ops in one loop ------===//
//
// The verifier of braid.fused and the ops it may hold: the fusion hooks of
// FusibleElementwiseOpInterface (each op's conditions and the C++ of one
// element on each target) and RowReductionOpInterface. Code generation
// (lib/Conversion/BraidToEmitC/FusedOps.cpp) emits one loop nest per
// region, so everything it relies on is checked here: one iteration shape,
// operands that broadcast to it, a body of fusible ops only, and for
// row-wise ops rows of that shape and a loss that only leaves the region.
//
//===----------------------------------------------------------------------===//

#include "braid/Dialect/Braid/IR/BraidOps.h"

#include "llvm/ADT/StringExtras.h"

using namespace mlir;
using namespace mlir::braid;

//===----------------------------------------------------------------------===//
// FusibleElementwiseOpInterface
//===----------------------------------------------------------------------===//

/// `cpu` or `cuda` as `target` asks; nothing for another target.
static StringRef forTarget(StringRef target, StringRef cpu, StringRef cuda) {
  return target == "cpu" ? cpu : target == "cuda" ? cuda : StringRef();
}

// The arithmetic: the _rn intrinsics on CUDA, which nvcc does not contract
// across ops into FMAs the unfused kernels do not do.
StringRef AddOp::getElementExpression(StringRef target) {
  return forTarget(target, "$0 + $1", "__fadd_rn($0, $1)");
}
StringRef SubOp::getElementExpression(StringRef target) {
  return forTarget(target, "$0 - $1", "__fsub_rn($0, $1)");
}
StringRef MulOp::getElementExpression(StringRef target) {
  return forTarget(target, "$0 * $1", "__fmul_rn($0, $1)");
}
StringRef DivOp::getElementExpression(StringRef target) {
  return forTarget(target, "$0 / $1", "__fdiv_rn($0, $1)");
}

// The CPU kernels' per-element functions are braid_rt_<op>_of; the CUDA
// kernels' are braid_rt_cuda::<op>Of and friends.
StringRef NegOp::getElementExpression(StringRef target) {
  return forTarget(target, "braid_rt_neg_of($0)", "braid_rt_cuda::negOf($0)");
}
StringRef ExpOp::getElementExpression(StringRef target) {
  return forTarget(target, "braid_rt_exp_of($0)", "braid_rt_cuda::expOf($0)");
}
StringRef SqrtOp::getElementExpression(StringRef target) {
  return forTarget(target, "braid_rt_sqrt_of($0)", "braid_rt_cuda::sqrtOf($0)");
}
StringRef RsqrtOp::getElementExpression(StringRef target) {
  return forTarget(target, "braid_rt_rsqrt_of($0)",
                   "braid_rt_cuda::rsqrtOf($0)");
}
StringRef ReluOp::getElementExpression(StringRef target) {
  return forTarget(target, "braid_rt_relu_of($0)", "braid_rt_cuda::reluOf($0)");
}
StringRef SiluOp::getElementExpression(StringRef target) {
  return forTarget(target, "braid_rt_silu_of($0)", "braid_rt_cuda::siluOf($0)");
}
StringRef ReluGradOp::getElementExpression(StringRef target) {
  return forTarget(target, "braid_rt_relu_grad_of($0, $1)",
                   "braid_rt_cuda::reluGrad($0, $1)");
}
StringRef SiluGradOp::getElementExpression(StringRef target) {
  return forTarget(target, "braid_rt_silu_grad_of($0, $1)",
                   "braid_rt_cuda::siluGrad($0, $1)");
}

// Only tanh GELU: exact GELU's erf in double is not the same bits in every
// loop (braid/rt/elementwise_math.h).
bool GeluOp::isFusible() {
  return getApproximate() == GeluApproximation::tanh &&
         FusibleElementwiseOpInterface::hasOnlyF32Values(*this);
}
StringRef GeluOp::getFusibleWhen() { return "tanh"; }
StringRef GeluOp::getElementExpression(StringRef target) {
  return forTarget(target, "braid_rt_gelu_tanh_of($0)",
                   "braid_rt_cuda::geluOf($0, true)");
}
bool GeluGradOp::isFusible() {
  return getApproximate() == GeluApproximation::tanh &&
         FusibleElementwiseOpInterface::hasOnlyF32Values(*this);
}
StringRef GeluGradOp::getFusibleWhen() { return "tanh"; }
StringRef GeluGradOp::getElementExpression(StringRef target) {
  return forTarget(target, "braid_rt_gelu_tanh_grad_of($0, $1)",
                   "braid_rt_cuda::geluGrad($0, $1, true)");
}

// The rounding braid-legalize-bf16 puts after each op computing a bf16
// value: the rounding kernels' per-element function, so a fused bf16-mixed
// chain stays one region and rounds each value as the unfused one does.
bool RoundOp::isFusible() {
  return getElementType().isBF16() &&
         FusibleElementwiseOpInterface::hasOnlyF32Values(*this);
}
StringRef RoundOp::getFusibleWhen() { return "to bf16"; }
StringRef RoundOp::getElementExpression(StringRef target) {
  return forTarget(target, "braid_rt_round_bf16_of($0)",
                   "braid_rt_cuda::roundBF16Of($0)");
}

// bf16 storage (braid-legalize-bf16): a value packed for the backward or
// for the next layer, unpacked where it is read. The packing kernels'
// functions (round to nearest even; exact back), so a region writing or
// reading the storage in its loop stores the bits the kernels would.
bool ConvertOp::isFusible() {
  Type from = getElementTypeOrSelf(getInput().getType());
  Type to = getElementTypeOrSelf(getResult().getType());
  return (from.isF32() && to.isBF16()) || (from.isBF16() && to.isF32());
}
StringRef ConvertOp::getFusibleWhen() { return "f32 to and from bf16"; }
StringRef ConvertOp::getElementExpression(StringRef target) {
  if (getElementTypeOrSelf(getResult().getType()).isBF16())
    return forTarget(target, "braid_rt_bf16_bits_of($0)",
                     "braid_rt_cuda::bf16Of($0).bits");
  return forTarget(target, "braid_rt_float_of_bf16($0)",
                   "braid_rt_cuda::floatOf(braid_rt_cuda::BF16{$0})");
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
StringRef SoftmaxOp::getFusibleWhen() { return "over the last axis"; }
StringRef CrossEntropyOp::getFusibleWhen() { return "not vocabulary-parallel"; }
StringRef CrossEntropyGradOp::getFusibleWhen() {
  return "not vocabulary-parallel";
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

bool FusedOp::isFusible(Operation *op) {
  auto fusible = dyn_cast<FusibleElementwiseOpInterface>(op);
  if (!fusible || op->getNumResults() != 1)
    return false;
  for (Type type :
       llvm::concat<Type>(op->getOperandTypes(), op->getResultTypes())) {
    auto tensor = dyn_cast<RankedTensorType>(type);
    if (!tensor || !tensor.hasStaticShape())
      return false;
  }
  return fusible.isFusible();
}

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

/// The registered braid ops implementing `Interface` (fusible elementwise
/// or row-wise ops), as "add, gelu (tanh), ...": the names the verifier
/// lists, from the ops themselves.
template <typename Interface>
static std::string listOps(MLIRContext *context) {
  SmallVector<std::string> ops;
  for (RegisteredOperationName name : context->getRegisteredOperationsByDialect(
           BraidDialect::getDialectNamespace())) {
    auto *iface = name.getInterface<Interface>();
    if (!iface)
      continue;
    ops.push_back(name.stripDialect().str());
    if (StringRef when = iface->getFusibleWhen(); !when.empty())
      ops.back() += (" (" + when + ")").str();
  }
  llvm::sort(ops);
  return llvm::join(ops, ", ");
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
             << "cannot be in a braid.fused region: only elementwise ops of "
                "f32 values ("
             << listOps<FusibleElementwiseOpInterface>(getContext())
             << ") and row-wise ops ("
             << listOps<RowReductionOpInterface>(getContext()) << ") can";
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
