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

// What a collective does (CollectiveOpInterface::getCollectiveKind); the
// names are those of the blocking ops.
def Braid_CollectiveKind : I32EnumAttr<"CollectiveKind", "collective", [
    I32EnumAttrCase<"all_reduce", 0>,
    I32EnumAttrCase<"all_gather", 1>,
    I32EnumAttrCase<"reduce_scatter", 2>,
    I32EnumAttrCase<"all_to_all", 3>,
    I32EnumAttrCase<"all_slice", 4>,
    I32EnumAttrCase<"broadcast_from", 5>]> {
  let cppNamespace = "::mlir::braid";
}

def Braid_ShardingAttr : AttrDef<Braid_Dialect, "Sharding"> {
  let mnemonic = "sharding";
  let summary = "How a tensor is distributed over a device mesh.";
  let description = [{
    For each dimension of the tensor, the mesh axes it is split over (major
    to minor), and the axes over which the value is a pending partial sum:
    each device holds a summand, and the tensor is the sum over those axes.
    Unlisted axes replicate the tensor.

    ```mlir
    // Rows split over "dp", columns over "tp":
    #braid.sharding<@mesh, [["dp"], ["tp"]]>
    // Replicated, but a partial sum over "tp" (after a row-parallel matmul):
    #braid.sharding<@mesh, [[], []], partial = ["tp"]>
    ```

    A dimension of size n split over axes of sizes a1..ak must be divisible
    by their product; each device holds a contiguous block of n / (a1...ak)
    entries, the blocks ordered by the device's coordinates along the axes,
    major to minor. Checking against a mesh and a type is done where the
    attribute is used.

    `blocks` (one count per dimension, 1 where omitted) makes a split
    strided: a dimension of size n with b blocks is viewed as [b, n / b],
    and the axes split the minor part, so each device holds its share of
    every block, the shares in block order. A fused projection's weight
    [3h, h] (q, k and v stacked) split this way gives each device its heads
    of q, of k and of v, as Megatron-LM lays them out, while the tensor
    itself (checkpoints, `--weights`) keeps its layout:

    ```mlir
    // Rows viewed as [3, h]; each device holds rows of all three blocks:
    #braid.sharding<@mesh, [["tp"], []], blocks = [3, 1]>
    ```
  }];
  let parameters = (ins "::mlir::FlatSymbolRefAttr":$mesh,
                        "::mlir::ArrayAttr":$dims,
                        OptionalParameter<"::mlir::ArrayAttr">:$partial,
                        OptionalArrayRefParameter<"int64_t">:$blocks);
  let assemblyFormat = [{
    `<` $mesh `,` $dims `` custom<ShardingTail>($partial, $blocks) `>`
  }];
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// The axes dimension `dim` is split over.
    ::llvm::SmallVector<::llvm::StringRef> getDimAxes(unsigned dim) const;
    /// The axes the value is a partial sum over.
    ::llvm::SmallVector<::llvm::StringRef> getPartialAxes() const;
    /// The number of blocks dimension `dim` is split in (1: contiguous).
    int64_t getDimBlocks(unsigned dim) const;
    /// The plain sharding this one is of a view of the tensor: each
    /// dimension with b > 1 blocks becomes two, [b, n / b], the axes on the
    /// second. `shape` (whole or local) becomes the view's shape; `axes`
    /// gets each view dimension's axes.
    void getView(::llvm::ArrayRef<int64_t> shape,
                 ::llvm::SmallVectorImpl<int64_t> &viewShape,
                 ::llvm::SmallVectorImpl<::llvm::SmallVector<::llvm::StringRef>>
                     &axes) const;
  }];
}

#endif // BRAID_DIALECT_BRAID_IR_BRAIDATTRS_TD
