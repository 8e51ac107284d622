//===- EvalContext.h - What ops can ask of the evaluator --------*- C++ -*-===//
//
// EvalOpInterface implementations compute from operand values alone, except
// for the few ops that need the evaluator's state: parameters (seed, weights
// file, layer-instance prefix), layer application and pipelines.
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_EVAL_EVALCONTEXT_H
#define BRAID_EVAL_EVALCONTEXT_H

#include "braid/Support/Tensor.h"
#include "mlir/Support/LLVM.h"

namespace mlir {
class Operation;
class Type;
namespace braid {
class LayerOp;
class MeshOp;
class ParamOp;
class PipelineOp;
class StoreParamOp;

/// The tensor dtype that holds values of `elementType`, if there is one.
std::optional<DType> getDType(Type elementType);

class EvalContext {
public:
  virtual ~EvalContext();

  /// The value of the parameter `op` declares, under the current layer
  /// instance's prefix (the next instance's with `braid.next_instance`). Fails
  /// (with a diagnostic on `op`) if the weights do not provide it with the
  /// declared shape.
  virtual FailureOr<Tensor> getParameter(ParamOp op) = 0;

  /// Replaces the value of the tensor `op` names (under the current layer
  /// instance's prefix) with `value`. Fails (with a diagnostic on `op`) if
  /// it was declared with another shape.
  virtual LogicalResult storeParameter(StoreParamOp op, const Tensor &value) = 0;

  /// For a collective `op` over `axes` of `mesh`: exchanges `mine` with the
  /// other devices of this device's group, filling `group` with every
  /// member's tensor in group order and `position` with this device's
  /// place in it. Outside a multi-device run only groups of one device are
  /// possible.
  virtual LogicalResult exchange(Operation *op, MeshOp mesh,
                                 ArrayRef<StringRef> axes, const Tensor &mine,
                                 SmallVectorImpl<Tensor> &group,
                                 unsigned &position) = 0;

  /// Evaluates `layer` on `args` with parameter names prefixed by
  /// `prefix` (for example "h.3."), appending its yielded values to
  /// `results`. Reads marked `braid.next_instance` take `nextPrefix`, the
  /// prefix of the instance the repeat runs next.
  virtual LogicalResult callLayer(LayerOp layer, StringRef prefix,
                                  StringRef nextPrefix,
                                  ArrayRef<const Tensor *> args,
                                  SmallVectorImpl<Tensor> &results) = 0;

  /// Runs `op`'s callee on each micro-batch of `args` (stacked along the
  /// leading dimension), appending the mean of each result to `results`.
  virtual LogicalResult runPipeline(PipelineOp op,
                                    ArrayRef<const Tensor *> args,
                                    SmallVectorImpl<Tensor> &results) = 0;
};

} // namespace braid
} // namespace mlir

#endif // BRAID_EVAL_EVALCONTEXT_H
