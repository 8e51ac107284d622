//===- BraidInterfaces.td - braid op interfaces ------------*- tablegen -*-===//

#ifndef BRAID_DIALECT_BRAID_IR_BRAIDINTERFACES_TD
#define BRAID_DIALECT_BRAID_IR_BRAIDINTERFACES_TD

include "mlir/IR/OpBase.td"

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

def Braid_CostOpInterface : OpInterface<"CostOpInterface"> {
  let cppNamespace = "::mlir::braid";
  let description = [{
    What an op costs: floating-point operations, split into those of matrix
    products (matmul, the attention core: what tensor cores run and what
    the literature's closed forms count) and the rest, and bytes moved.
    Used by the cost report and, later, by the planner. Matrix products
    count 2 FLOPs per multiply-add; causal attention is counted dense, as
    Megatron-LM and Qi et al. 2023 count it.
  }];
  let methods = [
    InterfaceMethod<"FLOPs of matrix products.", "double", "getMatmulFlops",
      (ins), [{}], [{ return 0.0; }]>,
    InterfaceMethod<[{
        All FLOPs, matrix products included (elementwise ops count one per
        result element by default).
      }], "double", "getFlops", (ins), [{}], [{
        double n = 0.0;
        for (::mlir::Type t : $_op->getResultTypes())
          if (auto s = ::llvm::dyn_cast<::mlir::ShapedType>(t))
            n += s.getNumElements();
        return n + $_op.getMatmulFlops();
      }]>,
    InterfaceMethod<"Bytes read and written (operands plus results).",
      "double", "getBytes", (ins), [{}], [{
        double n = 0.0;
        auto add = [&](::mlir::Type t) {
          if (auto s = ::llvm::dyn_cast<::mlir::ShapedType>(t))
            n += s.getNumElements() *
                 ((s.getElementTypeBitWidth() + 7) / 8);
        };
        for (::mlir::Type t : $_op->getOperandTypes()) add(t);
        for (::mlir::Type t : $_op->getResultTypes()) add(t);
        return n;
      }]>,
  ];
}

def Braid_ShardingRuleOpInterface : OpInterface<"ShardingRuleOpInterface"> {
  let cppNamespace = "::mlir::braid";
  let description = [{
    How the op's operand and result dimensions map onto its iteration
    factors (see ShardingRule.h, after Shardy's OpShardingRule). Sharding
    propagation moves shardings through ops along factors; the partitioner
    derives from the factors' shardings which collectives an op needs and
    whether its results are partial sums.
  }];
  let methods = [
    InterfaceMethod<"The op's sharding rule.",
      "::mlir::braid::ShardingRule", "getShardingRule">,
    InterfaceMethod<[{
        Adapts `local`, this op's per-device clone, to the mesh axes each
        factor is sharded over (`factorAxes`, by factor index), where its
        local shapes alone do not say enough: an embedding whose table is
        split along the vocabulary must know which block of ids it holds.
      }], "void", "localize",
      (ins "::mlir::Operation *":$local,
           "::llvm::ArrayRef<::llvm::SmallVector<::llvm::StringRef>>":$factorAxes,
           "::mlir::FlatSymbolRefAttr":$mesh),
      [{}], [{ /* Local shapes say it all. */ return; }]>,
  ];
}

def Braid_InPlaceOpInterface : OpInterface<"InPlaceOpInterface"> {
  let cppNamespace = "::mlir::braid";
  let description = [{
    An op whose result may be computed over one of its operands: element i
    of the result reads element i of that operand (or of its broadcast)
    only, and no other element, so a loop that writes each result element
    after reading its operand elements may use one buffer for both. Code
    generation's memory plan (`FunctionLowering::getInPlaceBuffer`, see
    docs/codegen.md, "In place") gives result k the buffer of one of the
    operands `getInPlaceOperands(k)` names when that operand has the
    result's type and its buffer dies at the op; the runtime's kernels
    accept that aliasing (`braid/rt/kernels.h`, "Aliasing"). The default
    suits an elementwise op: any operand. Not `braid.fused`, whose loops
    take `__restrict` pointers; collectives decide through
    CollectiveOpInterface (a blocking all_reduce over its input).
  }];
  let methods = [
    InterfaceMethod<[{
        The operands result `result` may overwrite, in order of preference.
      }],
      "::llvm::SmallVector<unsigned>", "getInPlaceOperands",
      (ins "unsigned":$result), [{}], [{
        ::llvm::SmallVector<unsigned> operands;
        for (unsigned i = 0, e = $_op->getNumOperands(); i < e; ++i)
          operands.push_back(i);
        return operands;
      }]>,
    InterfaceMethod<[{
        Whether a result may also be written into the parameter slot its
        in-place operand reads (a `braid.param`) when its only use stores
        it back into that slot (`braid.store_param` of the same name): an
        optimizer update, whose new parameter, moments and momentum
        replace the tensors they were computed from.
      }],
      "bool", "mayUpdateParameterSlot", (ins), [{}], [{ return false; }]>,
  ];
}

def Braid_CollectiveOpInterface : OpInterface<"CollectiveOpInterface"> {
  let cppNamespace = "::mlir::braid";
  let description = [{
    What a collective is, independent of the target: its kind, reduction,
    split and concatenation dimensions, root, mesh axes, its asynchronous
    form and its cost under the ring model. Implemented by every collective,
    blocking (`braid.all_reduce`, ...) and started (`braid.all_reduce_start`,
    ...; completed by the `braid.wait` of its future, which is not a
    collective). Passes and lowerings recognise collectives through it,
    never by op name: `braid-async-collectives` builds the started forms,
    `braid-comm-report` costs them. Operand 0 is the local tensor; result 0
    is the local tensor it produces, or a `!braid.future` of it.
  }];
  let methods = [
    InterfaceMethod<[{
        What the collective does; a started form has the kind of its
        blocking op.
      }], "::mlir::braid::CollectiveKind", "getCollectiveKind">,
    InterfaceMethod<"The local tensor sent.", "::mlir::Value", "getInput">,
    InterfaceMethod<"The mesh whose devices exchange data.",
      "::mlir::FlatSymbolRefAttr", "getMeshAttr">,
    InterfaceMethod<[{
        The names of the mesh axes the collective runs over: the devices of
        a group differ only in their coordinates along them, and group
        position is row-major over them.
      }], "::mlir::ArrayAttr", "getAxes">,
    InterfaceMethod<[{
        How the group's tensors are combined: the kind of `all_reduce`, sum
        for `reduce_scatter`, none for collectives that only move data.
      }], "::std::optional<::mlir::braid::ReduceKind>", "getReduction",
      (ins), [{}], [{ return ::std::nullopt; }]>,
    InterfaceMethod<[{
        The dimension along which the input is split into group-size blocks,
        block i going to (or, for `all_slice`, kept by) group position i:
        `dim` of `reduce_scatter` and `all_slice`, `split_dim` of
        `all_to_all`.
      }], "::std::optional<int64_t>", "getScatterDim",
      (ins), [{}], [{ return ::std::nullopt; }]>,
    InterfaceMethod<[{
        The dimension along which the received blocks are concatenated in
        group order: `dim` of `all_gather`, `concat_dim` of `all_to_all`.
      }], "::std::optional<int64_t>", "getGatherDim",
      (ins), [{}], [{ return ::std::nullopt; }]>,
    InterfaceMethod<[{
        The group position whose tensor every device gets (`broadcast_from`).
      }], "::std::optional<int64_t>", "getGroupRoot",
      (ins), [{}], [{ return ::std::nullopt; }]>,
    InterfaceMethod<[{
        Whether this is a started form: its result is a `!braid.future`
        that a `braid.wait` completes.
      }], "bool", "isStarted", (ins), [{}], [{
        return ::llvm::isa<::mlir::braid::FutureType>(
            $_op->getResult(0).getType());
      }]>,
    InterfaceMethod<[{
        The local tensor the collective produces (for a started form, the
        tensor its future holds).
      }], "::mlir::RankedTensorType", "getResultTensorType", (ins), [{}], [{
        ::mlir::Type type = $_op->getResult(0).getType();
        if (auto future = ::llvm::dyn_cast<::mlir::braid::FutureType>(type))
          return future.getValueType();
        return ::llvm::cast<::mlir::RankedTensorType>(type);
      }]>,
    InterfaceMethod<[{
        Builds, at the builder's insertion point, the started form of this
        blocking collective: same operands and attributes, a future of the
        result. Returns null where there is none (`all_slice`, which moves
        no data, and the started forms themselves). The caller waits for
        the future and erases this op.
      }], "::mlir::Operation *", "createStart",
      (ins "::mlir::OpBuilder &":$builder), [{}], [{ return nullptr; }]>,
    InterfaceMethod<[{
        The bytes each device sends under a ring algorithm (a pipelined
        chain for a broadcast), as a multiple of the larger of the input and
        the result, for a group of `groupSize` devices.
      }], "double", "getRingTraffic", (ins "int64_t":$groupSize), [{}], [{
        return double(groupSize - 1) / groupSize;
      }]>,
    InterfaceMethod<[{
        The message latencies on the critical path of that algorithm.
      }], "int64_t", "getRingSteps", (ins "int64_t":$groupSize), [{}], [{
        return groupSize - 1;
      }]>,
  ];
  let extraClassDeclaration = [{
    /// The number of devices in each group of `mesh`, the op's mesh.
    int64_t getGroupSize(::mlir::braid::MeshOp mesh);
  }];
}

def Braid_FusibleElementwiseOpInterface
    : OpInterface<"FusibleElementwiseOpInterface"> {
  let cppNamespace = "::mlir::braid";
  let description = [{
    An elementwise op that a `braid.fused` region may hold: element i of its
    result is a function of element i of its operands (after broadcasting)
    alone, computed in the region's loop as one C++ expression of its
    operands' elements, the per-element function its kernel calls, so a
    fused program computes the same bits as an unfused one. The set of
    ops implementing it is the set `braid-fuse-elementwise` fuses, the
    `braid.fused` verifier accepts (and lists in its error) and code
    generation emits: adding an op to a region is declaring the interface
    in BraidOps.td and implementing `getElementExpression` (in
    BraidOpsFusion.cpp, with the other fusion hooks).
  }];
  let methods = [
    InterfaceMethod<[{
        Whether this instance may be in a region (its values being
        statically shaped tensors, which `FusedOp::isFusible` checks). By
        default when every value is f32, the region's loop computing in
        float; an op adds its own conditions (tanh GELU only: exact GELU's
        erf in double is not the same bits in every loop).
      }],
      "bool", "isFusible", (ins), [{}], [{
        return ::mlir::braid::FusibleElementwiseOpInterface::hasOnlyF32Values(
            $_op);
      }]>,
    StaticInterfaceMethod<[{
        The conditions `isFusible` adds, in a few words for the verifier's
        list of fusible ops ("tanh" for GELU), or nothing.
      }],
      "::llvm::StringRef", "getFusibleWhen", (ins), [{}], [{ return ""; }]>,
    InterfaceMethod<[{
        The C++ expression of one element of the result in a fused loop for
        code generation's target `target` ("cpu": the per-element functions
        of braid/rt/elementwise_math.h; "cuda": those of the CUDA kernels'
        kernel_math.h, arithmetic through the _rn intrinsics that nvcc does
        not contract), with `$0`, `$1`, ... standing for the operands'
        elements; empty for a target it has none for.
      }],
      "::llvm::StringRef", "getElementExpression",
      (ins "::llvm::StringRef":$target)>,
  ];
  let extraClassDeclaration = [{
    /// Whether every operand and result of `op` has f32 elements.
    static bool hasOnlyF32Values(::mlir::Operation *op) {
      return ::llvm::all_of(
          ::llvm::concat<::mlir::Type>(op->getOperandTypes(),
                                       op->getResultTypes()),
          [](::mlir::Type t) { return ::mlir::getElementTypeOrSelf(t).isF32(); });
    }
  }];
}

def Braid_RowReductionOpInterface : OpInterface<"RowReductionOpInterface"> {
  let cppNamespace = "::mlir::braid";
  let description = [{
    An op that reduces over the last dimension of its first operand, row by
    row (a norm, its input gradient, softmax, cross-entropy): row r of its
    result depends only on row r of its operands of the first operand's
    shape and on its other operands whole (a scale, a bias, one label per
    row, a rank-0 gradient); a rank-0 result (a loss) is a mean of one term
    per row. `braid-fuse-elementwise` puts such an op into the `braid.fused`
    region computing its rows and lets the elementwise ops reading its
    result join after it; code generation then computes the region a row
    at a time (how each op reduces a row is the lowering's, per op).
  }];
  let methods = [
    InterfaceMethod<[{
        Whether this instance reduces over the last dimension of its first
        operand as described (not, say, a softmax over another axis or a
        loss whose rows are split over devices), so that a fused region may
        compute it a row at a time.
      }],
      "bool", "isFusibleByRows", (ins), [{}], [{ return true; }]>,
    StaticInterfaceMethod<[{
        The conditions `isFusibleByRows` adds, in a few words for the
        `braid.fused` verifier's list of fusible ops ("over the last axis"),
        or nothing.
      }],
      "::llvm::StringRef", "getFusibleWhen", (ins), [{}], [{ return ""; }]>,
    InterfaceMethod<[{
        Whether this op and `other`, reading the same rows, compute the same
        statistics of them (a loss and its gradient: each row's maximum,
        sum of exponentials and the exponentials), so that one region can
        compute both with one pass over the row though neither reads the
        other.
      }],
      "bool", "sharesRowStatistics", (ins "::mlir::Operation *":$other), [{}],
      [{ return false; }]>,
  ];
}

#endif // BRAID_DIALECT_BRAID_IR_BRAIDINTERFACES_TD
