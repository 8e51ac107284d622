//===- BraidTypes.td - braid types -------------------------*- tablegen -*-===//

#ifndef BRAID_DIALECT_BRAID_IR_BRAIDTYPES_TD
#define BRAID_DIALECT_BRAID_IR_BRAIDTYPES_TD

include "braid/Dialect/Braid/IR/BraidDialect.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/BuiltinTypeInterfaces.td"

def Braid_FutureType : TypeDef<Braid_Dialect, "Future"> {
  let mnemonic = "future";
  let summary = "The pending result of an asynchronous collective.";
  let description = [{
    What a `*_start` collective returns: a tensor that is being communicated.
    `braid.wait` turns it into the tensor; the ops in between may run while
    the data moves.

    ```mlir
    !braid.future<tensor<8x64xf32>>
    ```
  }];
  let parameters = (ins "::mlir::RankedTensorType":$valueType);
  let assemblyFormat = "`<` $valueType `>`";
}

#endif // BRAID_DIALECT_BRAID_IR_BRAIDTYPES_TD
