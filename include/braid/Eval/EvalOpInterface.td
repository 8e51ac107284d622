//===- EvalOpInterface.td - reference semantics of ops -----*- tablegen -*-===//
//
// Declared with the evaluator, not the dialect: the braid dialect library
// knows nothing of evaluation, and the evaluator attaches the interface to
// the ops as external models (lib/Eval/BraidOpsEval.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_EVAL_EVALOPINTERFACE_TD
#define BRAID_EVAL_EVALOPINTERFACE_TD

include "mlir/IR/OpBase.td"

def Braid_EvalOpInterface : OpInterface<"EvalOpInterface"> {
  let cppNamespace = "::mlir::braid";
  let description = [{
    Reference semantics: how `braid-eval` computes an op's results from the
    values of its operands. Implementations compute in double precision; the
    evaluator rounds each result to its element type afterwards (unless it
    runs with `--f64`), so this is also the definition of the dialect's
    numerics. Errors that depend on values (an id out of range) are reported
    on the op and make evaluation fail.

    Every braid op but `braid.layer`, `braid.mesh` and `braid.yield` has an
    implementation, attached as an external model by
    `mlir::braid::registerEvalInterfaceExternalModels`, which a tool that
    evaluates must add to its `DialectRegistry`.
  }];
  let methods = [
    InterfaceMethod<[{
        Computes the results from `operands` (one tensor per operand, in
        order) and appends one tensor per result, with the shape of the
        result type, to `results`.
      }],
      "::llvm::LogicalResult", "evaluate",
      (ins "::mlir::braid::EvalContext &":$ctx,
           "::llvm::ArrayRef<const ::mlir::braid::Tensor *>":$operands,
           "::llvm::SmallVectorImpl<::mlir::braid::Tensor> &":$results)>,
  ];
}

#endif // BRAID_EVAL_EVALOPINTERFACE_TD
