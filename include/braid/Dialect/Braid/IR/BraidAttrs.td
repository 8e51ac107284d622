//===- BraidAttrs.td - braid attributes and enums ----------*- tablegen -*-===//

#ifndef BRAID_DIALECT_BRAID_IR_BRAIDATTRS_TD
#define BRAID_DIALECT_BRAID_IR_BRAIDATTRS_TD

include "braid/Dialect/Braid/IR/BraidDialect.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

def Braid_InitKind : I32EnumAttr<"InitKind", "parameter initializer kind", [
    I32EnumAttrCase<"zeros", 0>,
    I32EnumAttrCase<"ones", 1>,
    I32EnumAttrCase<"constant", 2>,
    I32EnumAttrCase<"normal", 3>,
    I32EnumAttrCase<"uniform", 4>]> {
  let cppNamespace = "::mlir::braid";
  let genSpecializedAttr = 0;
}

def Braid_InitAttr : AttrDef<Braid_Dialect, "Init"> {
  let mnemonic = "init";
  let summary = "Deterministic parameter initializer.";
  let description = [{
    How a parameter is initialised from a seed: `zeros`, `ones`,
    `constant(c)`, `normal(std)` (mean 0) or `uniform(lo, hi)`. Values are a
    pure function of the seed, the parameter's full name and the element
    index (see docs/model-representation.md), so every rank can initialise
    any shard on its own.

    ```mlir
    #braid.init<normal(0.02)>
    #braid.init<uniform(-0.1, 0.1)>
    #braid.init<zeros>
    ```
  }];
  let parameters = (ins "InitKind":$kind, APFloatParameter<"first argument">:$a,
                        APFloatParameter<"second argument">:$b);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// Number of arguments the kind takes in the textual form.
    static unsigned getNumArgs(InitKind kind);
  }];
}

def Braid_GeluApproximation : I32EnumAttr<"GeluApproximation",
    "how gelu is computed", [
    I32EnumAttrCase<"exact", 0>,
    I32EnumAttrCase<"tanh", 1>]> {
  let cppNamespace = "::mlir::braid";
}

def Braid_ReduceKind : I32EnumAttr<"ReduceKind", "reduction", [
    I32EnumAttrCase<"sum", 0>,
    I32EnumAttrCase<"mean", 1>,
    I32EnumAttrCase<"max", 2>]> {
  let cppNamespace = "::mlir::braid";
}

#endif // BRAID_DIALECT_BRAID_IR_BRAIDATTRS_TD
