//===- BraidDialect.td - The braid dialect -----------------*- tablegen -*-===//

#ifndef BRAID_DIALECT_BRAID_IR_BRAIDDIALECT_TD
#define BRAID_DIALECT_BRAID_IR_BRAIDDIALECT_TD

include "mlir/IR/OpBase.td"

def Braid_Dialect : Dialect {
  let name = "braid";
  let cppNamespace = "::mlir::braid";
  let summary = "Deep-learning models and their training steps, for "
                "automatic parallelisation.";
  let description = [{
    The `braid` dialect represents a model as builtin ranked tensors and ops
    with reference semantics: matmul, elementwise arithmetic with NumPy
    broadcasting, activations, normalisation, embeddings, rotary embeddings,
    causal attention with grouped KV heads, cross-entropy, and shape ops.

    Parameters are named (`braid.param`) and carry a deterministic
    initializer, so a model can be evaluated without a weights file. Layers
    are defined once (`braid.layer`) and applied any number of times
    (`braid.repeat`), so the IR does not grow with depth.

    Every op verifies its shapes and says which type it expected. Every op
    that computes has reference semantics (`EvalOpInterface`, which
    `braid-eval` runs); the evaluator library attaches them as external
    models, so the dialect itself does not depend on the evaluator.
  }];
  let useDefaultAttributePrinterParser = 1;
  let useDefaultTypePrinterParser = 1;
  let hasOperationAttrVerify = 1;
  let extraClassDeclaration = [{
    void registerAttributes();
    void registerTypes();
  }];
  let hasRegionArgAttrVerify = 1;
  let hasRegionResultAttrVerify = 1;
  let dependentDialects = ["::mlir::func::FuncDialect"];
}

// Rejects attributes an op does not define (a misspelt `transpose_b` must
// not be silently ignored). Dialect-prefixed attributes are checked by the
// dialect.
def Braid_NoUnknownAttributes : NativeOpTrait<"NoUnknownAttributes"> {
  let cppNamespace = "::mlir::OpTrait::braid";
}

class Braid_Op<string mnemonic, list<Trait> traits = []>
    : Op<Braid_Dialect, mnemonic, traits # [Braid_NoUnknownAttributes]>;

#endif // BRAID_DIALECT_BRAID_IR_BRAIDDIALECT_TD
