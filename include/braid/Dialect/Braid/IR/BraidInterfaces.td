//===- BraidInterfaces.td - braid op interfaces ------------*- tablegen -*-===//

#ifndef BRAID_DIALECT_BRAID_IR_BRAIDINTERFACES_TD
#define BRAID_DIALECT_BRAID_IR_BRAIDINTERFACES_TD

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

#endif // BRAID_DIALECT_BRAID_IR_BRAIDINTERFACES_TD
