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

def Braid_GradientOpInterface : OpInterface<"GradientOpInterface"> {
  let cppNamespace = "::mlir::braid";
  let description = [{
    Reverse-mode differentiation: how to build, as IR, the vector-Jacobian
    product of an op with respect to one operand. `braid-autodiff` asks for
    one operand at a time, so that the gradient of an activation (the B
    phase, on the pipeline's critical path) and the gradient of a parameter
    (the W phase, deferrable) are separate ops. A rule may use the op's
    operands and results (values saved by the forward pass) and the result
    gradients (produced by the backward pass), nothing else.
  }];
  let methods = [
    InterfaceMethod<[{
        Whether the op's results depend differentiably on operand `index`.
        Integer operands (ids, labels) are not differentiable.
      }],
      "bool", "isDifferentiableOperand", (ins "unsigned":$index), [{}], [{
        return ::llvm::isa<::mlir::FloatType>(::mlir::getElementTypeOrSelf(
            $_op->getOperand(index).getType()));
      }]>,
    InterfaceMethod<[{
        Builds the gradient of the loss with respect to operand `index`,
        given the gradient of each result (`resultGrads`, same types as the
        results), at the builder's insertion point. Returns a value of the
        operand's type.
      }],
      "::mlir::Value", "buildGradient",
      (ins "::mlir::OpBuilder &":$builder, "unsigned":$index,
           "::mlir::ValueRange":$resultGrads)>,
  ];
}

#endif // BRAID_DIALECT_BRAID_IR_BRAIDINTERFACES_TD
