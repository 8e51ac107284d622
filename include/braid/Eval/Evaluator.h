//===- Evaluator.h - Reference evaluation of braid IR -----------*- C++ -*-===//
//
// Runs a function of a braid module on concrete tensors using each op's
// EvalOpInterface. Parameters come from a weights file or from their
// initializers under a seed; inputs from a file or from the seed. This is
// the numerical oracle every parallelising pass is checked against.
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_EVAL_EVALUATOR_H
#define BRAID_EVAL_EVALUATOR_H

#include "braid/Dialect/Braid/IR/BraidOps.h"
#include "braid/Support/SafeTensors.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/StringMap.h"

namespace mlir::braid {

struct EvalOptions {
  /// Seed of parameter initialisation and of generated inputs.
  uint64_t seed = 0;
  /// Evaluate every floating-point value in f64 (no rounding to the
  /// declared element types).
  bool f64 = false;
};

class Evaluator : public EvalContext {
public:
  Evaluator(ModuleOp module, EvalOptions options)
      : module(module), options(options) {}

  /// Uses `weights` instead of initializers. Every parameter the evaluation
  /// touches must be present with its declared shape.
  void setWeights(TensorMap weights) { this->weights = std::move(weights); }
  /// Likewise for optimizer state (braid.param with `state`).
  void setOptimizerState(TensorMap state) {
    optimizerState = std::move(state);
  }

  /// The name of argument `index` of `fn`: its `braid.name`, or "argN".
  static std::string getArgumentName(FunctionOpInterface fn, unsigned index);

  /// Values for the arguments of `fn`: taken from `given` by name when
  /// present (shape and kind are checked), otherwise generated from the
  /// seed. Fails on names in `given` that `fn` does not take.
  FailureOr<SmallVector<Tensor>> makeInputs(FunctionOpInterface fn,
                                            const TensorMap &given);

  /// Evaluates `fn` on `inputs`.
  FailureOr<SmallVector<Tensor>> run(FunctionOpInterface fn,
                                     ArrayRef<Tensor> inputs);

  /// Fails, naming them, if the weights (or optimizer state) given contain
  /// tensors no braid.param used; call after run.
  LogicalResult checkAllWeightsUsed(FunctionOpInterface fn);

  /// Every trainable parameter materialised so far, by full name, in
  /// first-use order.
  TensorMap getParameters() const;
  /// Every optimizer-state tensor (braid.param with `state`) so far.
  TensorMap getOptimizerState() const;

  // EvalContext.
  FailureOr<Tensor> getParameter(ParamOp op) override;
  LogicalResult storeParameter(StoreParamOp op, const Tensor &value) override;
  LogicalResult callLayer(LayerOp layer, StringRef prefix,
                          ArrayRef<const Tensor *> args,
                          SmallVectorImpl<Tensor> &results) override;

private:
  /// The dtype a value of `type` is held in under the options.
  DType dtypeFor(RankedTensorType type) const;
  LogicalResult evaluateBlock(Block &block, ArrayRef<const Tensor *> args,
                              SmallVectorImpl<Tensor> &results);

  ModuleOp module;
  EvalOptions options;
  std::optional<TensorMap> weights, optimizerState;
  TensorMap parameters;
  /// Declaration that first materialised each parameter (to check ties).
  llvm::StringMap<ParamOp> declarations;
  /// Prefix of the layer instance being evaluated ("" at top level).
  std::string prefix;
};

} // namespace mlir::braid

#endif // BRAID_EVAL_EVALUATOR_H
