//===- BraidOps.td - braid ops -----------------------------*- tablegen -*-===//

#ifndef BRAID_DIALECT_BRAID_IR_BRAIDOPS_TD
#define BRAID_DIALECT_BRAID_IR_BRAIDOPS_TD

include "braid/Dialect/Braid/IR/BraidDialect.td"
include "braid/Dialect/Braid/IR/BraidAttrs.td"
include "braid/Dialect/Braid/IR/BraidTypes.td"
include "braid/Dialect/Braid/IR/BraidInterfaces.td"
include "mlir/IR/BuiltinAttributeInterfaces.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/CallInterfaces.td"
include "mlir/Interfaces/ControlFlowInterfaces.td"
include "mlir/Interfaces/FunctionInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

// Every value of a model op has a static shape.
def Braid_StaticShapes : NativeOpTrait<"StaticShapes"> {
  let cppNamespace = "::mlir::OpTrait::braid";
}

// See mlir::OpTrait::braid::SelectivelyRecomputed.
def Braid_SelectivelyRecomputed : NativeOpTrait<"SelectivelyRecomputed"> {
  let cppNamespace = "::mlir::OpTrait::braid";
}

// See mlir::OpTrait::braid::Linear.
def Braid_Linear : NativeOpTrait<"Linear"> {
  let cppNamespace = "::mlir::OpTrait::braid";
}

// See mlir::OpTrait::braid::MovesDataOnly.
def Braid_MovesDataOnly : NativeOpTrait<"MovesDataOnly"> {
  let cppNamespace = "::mlir::OpTrait::braid";
}

// See mlir::OpTrait::braid::Transcendental.
def Braid_Transcendental : NativeOpTrait<"Transcendental"> {
  let cppNamespace = "::mlir::OpTrait::braid";
}

// See mlir::OpTrait::braid::ComputesInBF16.
def Braid_ComputesInBF16 : NativeOpTrait<"ComputesInBF16"> {
  let cppNamespace = "::mlir::OpTrait::braid";
}

def Braid_FloatTensor : RankedTensorOf<[F64, F32, BF16, F16]>;
def Braid_IdTensor : RankedTensorOf<[I32, I64]>;

// Model ops: pure, evaluable, verified.
class Braid_ModelOp<string mnemonic, list<Trait> traits = []>
    : Braid_Op<mnemonic, traits # [Pure, Braid_StaticShapes,
        Braid_CostOpInterface,
        DeclareOpInterfaceMethods<Braid_ShardingRuleOpInterface>]>;

// Differentiable model ops: also implement the gradient interface.
class Braid_DiffOp<string mnemonic, list<Trait> traits = []>
    : Braid_ModelOp<mnemonic, traits # [
        DeclareOpInterfaceMethods<Braid_GradientOpInterface, ["buildGradient"]>]>;

//===----------------------------------------------------------------------===//
// Parameters and layers
//===----------------------------------------------------------------------===//

// The named tensors of a model (parameters and optimizer state), read by
// braid.param and written by braid.store_param.
def Braid_ParameterResource
    : Resource<"::mlir::braid::ParameterResource">;

def Braid_ParamOp : Braid_Op<"param", [Braid_StaticShapes,
    DeclareOpInterfaceMethods<Braid_ShardingRuleOpInterface>,
    MemoryEffects<[MemRead<Braid_ParameterResource>]>]> {
  let summary = "A named, trainable parameter (or optimizer state).";
  let description = [{
    Produces the parameter called `name`. Inside a `braid.layer` the name is
    local: instance `i` of a `braid.repeat` with prefix `P` sees the
    parameter `P.i.name`. Elsewhere the name is the full name. Full names are
    the keys of weight files and checkpoints. Two `braid.param` ops with the
    same full name denote the same tensor (tied weights).

    With `state`, the tensor is optimizer state (AdamW moments, SGD
    momentum): saved with the optimizer state, not with the weights, and
    never differentiated.

    With `block_of` (in a per-device program), the op reads this device's
    block of the parameter distributed by that sharding: its type is the
    local shape, and the global shape is that times the sizes of the axes
    each dimension is split over.

    Parameters behave like global variables (IREE's `util.global`): a
    `braid.param` reads the current value, `braid.store_param` replaces it,
    in program order.

    ```mlir
    %w = braid.param "mlp.fc.weight" {init = #braid.init<normal(0.02)>} : tensor<64x256xf32>
    ```
  }];
  let arguments = (ins StrAttr:$name, Braid_InitAttr:$init, UnitAttr:$state,
                       OptionalAttr<Braid_ShardingAttr>:$block_of);
  let results = (outs Braid_FloatTensor:$result);
  let assemblyFormat = "$name attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Braid_StoreParamOp : Braid_Op<"store_param", [Braid_StaticShapes,
    DeclareOpInterfaceMethods<Braid_ShardingRuleOpInterface>,
    MemoryEffects<[MemWrite<Braid_ParameterResource>]>]> {
  let summary = "Replaces the value of a named parameter or state tensor.";
  let description = [{
    Writes `value` to the tensor `name` (local inside a layer, as for
    `braid.param`); later `braid.param` reads of that name see it. The
    optimizer update of a training step ends in these stores.

    ```mlir
    braid.store_param "mlp.fc.weight", %w : tensor<64x256xf32>
    ```
  }];
  let arguments = (ins StrAttr:$name, Braid_FloatTensor:$value);
  let assemblyFormat = "$name `,` $value attr-dict `:` type($value)";
  let hasVerifier = 1;
}

def Braid_LayerOp : Braid_Op<"layer", [IsolatedFromAbove, Symbol,
    FunctionOpInterface, CallableOpInterface, AutomaticAllocationScope]> {
  let summary = "A layer, defined once and applied by braid.repeat.";
  let description = [{
    A function-like definition of one layer: its arguments are the values
    flowing in, `braid.yield` returns the values flowing out, and the
    `braid.param` ops in its body are the layer's parameters (local names).
    Layers are the unit of pipeline stages, recomputation and the F/B/W
    phases; repeated layers share one definition, so the IR does not grow
    with depth.

    ```mlir
    braid.layer @block(%x: tensor<2x8x16xf32>) -> tensor<2x8x16xf32> {
      %w = braid.param "fc.weight" {init = #braid.init<normal(0.02)>} : tensor<16x16xf32>
      %y = braid.matmul %x, %w : (tensor<2x8x16xf32>, tensor<16x16xf32>) -> tensor<2x8x16xf32>
      braid.yield %y : tensor<2x8x16xf32>
    }
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name,
                       TypeAttrOf<FunctionType>:$function_type,
                       OptionalAttr<DictArrayAttr>:$arg_attrs,
                       OptionalAttr<DictArrayAttr>:$res_attrs);
  let regions = (region SizedRegion<1>:$body);
  let hasCustomAssemblyFormat = 1;
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    //===------------------------------------------------------------------===//
    // FunctionOpInterface / CallableOpInterface
    //===------------------------------------------------------------------===//
    ::mlir::Region *getCallableRegion() { return &getBody(); }
    ::llvm::ArrayRef<::mlir::Type> getArgumentTypes() {
      return getFunctionType().getInputs();
    }
    ::llvm::ArrayRef<::mlir::Type> getResultTypes() {
      return getFunctionType().getResults();
    }
  }];
}

def Braid_YieldOp : Braid_Op<"yield", [Pure, ParentOneOf<["LayerOp", "FusedOp"]>,
    ReturnLike, Terminator]> {
  let summary = "Returns a layer's (or a fused region's) outputs.";
  let arguments = (ins Variadic<AnyType>:$operands);
  let assemblyFormat = "attr-dict ($operands^ `:` type($operands))?";
  let builders = [OpBuilder<(ins), [{ build($_builder, $_state, {}); }]>];
}

def Braid_RepeatOp : Braid_Op<"repeat", [
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "Applies a layer `count` times in sequence (a scan).";
  let description = [{
    Runs instances `first` .. `first + count - 1` of the layer `layer`
    (last to first with `reverse`). Instance `i` names its parameters
    `prefix.i.<local name>`, or `prefix.<instance_names[i - first]>.<local
    name>` when `instance_names` (one per instance, distinct, without dots
    or spaces) is given, as an imported nn.Sequential names its children
    (`encoder.layers.encoder_layer_0.ln_1.weight`); without a prefix, all
    instances share the layer's parameters under their local names (a loop,
    as over micro-batches, rather than a stack of layers).

    The first `carried` operands (all of them by default) are threaded
    through the instances: each instance consumes the previous one's first
    `carried` results. The remaining operands are stacked: their leading
    dimension has size `count`, and instance `i` receives slice `i - first`.
    Likewise the results after the first `carried` are stacked: instance `i`
    yields slice `i - first` of each. So the layer's signature is
    `(carried..., slices...) -> (carried..., slices...)`, and its carried
    result types must equal its carried argument types.

    Models use the plain form; `braid-autodiff` uses stacked operands and
    results to save per-instance activations in the forward pass and replay
    them in reverse in the backward pass, so that the training step, too,
    does not grow with depth.

    A stacked result may be a future: when the layer yields
    `!braid.future<T>` (a collective started in its body), the repeat
    returns `!braid.future<tensor<count x T>>`, the future of the stack
    whose slice `i - first` is instance `i`'s collective, and `braid.wait`
    on it waits for all of them. So a layer's collective stays in flight
    while the following instances compute (`braid-schedule-collectives`
    splits a layer at its waits). A carried value may be a future too
    (`braid-zero3-prefetch` across repeats): instance `i` waits for what
    instance `i - 1` started (the first instance for the operand); the
    last instance's is dropped, so the repeat's result for it has no uses.

    ```mlir
    %h = braid.repeat @block(%x) {prefix = "h", count = 12 : i64}
        : (tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$layer,
                       Variadic<AnyTypeOf<[AnyRankedTensor, Braid_FutureType]>>:$inputs,
                       DefaultValuedStrAttr<StrAttr, "">:$prefix, I64Attr:$count,
                       DefaultValuedAttr<I64Attr, "0">:$first,
                       OptionalAttr<I64Attr>:$carried, UnitAttr:$reverse,
                       OptionalAttr<StrArrayAttr>:$instance_names);
  let results = (outs Variadic<AnyTypeOf<[AnyRankedTensor, Braid_FutureType]>>:$results);
  let assemblyFormat = [{
    $layer `(` $inputs `)` attr-dict `:` functional-type($inputs, $results)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The number of carried operands (and results).
    unsigned getNumCarried() {
      return getCarried() ? static_cast<unsigned>(*getCarried())
                          : getInputs().size();
    }
    /// How instance `i` (`first <= i < first + count`) appears in its
    /// parameters' names: `instance_names[i - first]`, or `i`.
    std::string getInstanceName(int64_t i);
    /// The prefix of instance `i`'s parameter names, `prefix.<instance>.`,
    /// or "" when the instances share the layer's parameters.
    std::string getParamPrefix(int64_t i);
  }];
}

def Braid_PipelineOp : Braid_Op<"pipeline", [
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "Runs a gradient function on every micro-batch; results are means.";
  let description = [{
    Calls the function `callee` once per micro-batch and returns the mean of
    each of its results over the micro-batches, as gradient accumulation
    does. Every operand is stacked: its leading dimension is the number of
    micro-batches `m`, and micro-batch `i` receives slice `i`.

    This is how a training step hands its gradient computation to a
    pipeline: `braid-train-step` emits it (option `pipeline`, or when the
    gradient function already carries a schedule), `braid-pipeline-outline`
    cuts the callee into per-chunk pieces and `braid-pipeline-schedule`
    attaches the order in which pipeline ranks run them (`braid.schedule`
    on the callee, whose `microbatches` must equal `m`). Its meaning does
    not depend on the schedule: every valid schedule computes the same
    means. `braid-eval` runs the micro-batches in turn, or with
    `--pipeline` on simulated ranks in schedule order.

    ```mlir
    %loss, %dw = braid.pipeline @forward_grad(%tokens, %labels)
        : (tensor<8x2x16xi32>, tensor<8x2x16xi32>) -> (tensor<f32>, tensor<64x64xf32>)
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$callee,
                       Variadic<AnyRankedTensor>:$inputs);
  let results = (outs Variadic<AnyRankedTensor>:$results);
  let assemblyFormat = [{
    $callee `(` $inputs `)` attr-dict `:` functional-type($inputs, $results)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The number of micro-batches (the operands' leading dimension).
    int64_t getNumMicrobatches() {
      return cast<RankedTensorType>(getInputs()[0].getType()).getDimSize(0);
    }
  }];
}

//===----------------------------------------------------------------------===//
// Linear algebra and elementwise arithmetic
//===----------------------------------------------------------------------===//

def Braid_MatmulOp : Braid_DiffOp<"matmul",
    [Braid_ComputesInBF16,
     DeclareOpInterfaceMethods<Braid_CostOpInterface, ["getMatmulFlops"]>]> {
  let summary = "Batched matrix product with optional transposes.";
  let description = [{
    `lhs` is `[..., M, K]` (`[..., K, M]` with `transpose_a`), `rhs` is
    `[..., K, N]` (`[..., N, K]` with `transpose_b`). Batch dimensions
    broadcast as in NumPy. The result is `[..., M, N]`.
  }];
  let arguments = (ins Braid_FloatTensor:$lhs, Braid_FloatTensor:$rhs,
                       UnitAttr:$transpose_a, UnitAttr:$transpose_b);
  let results = (outs Braid_FloatTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

// Elementwise ops may write their result over an operand of its type
// (InPlaceOpInterface's default: any operand), compute in bf16 under
// bf16-mixed (ComputesInBF16): an elementwise op that must stay f32 there
// is not derived from these classes; and be in fused regions
// (FusibleElementwiseOpInterface, their expressions in BraidOpsFusion.cpp).
class Braid_BinaryOp<string mnemonic, string what, list<Trait> traits = []>
    : Braid_DiffOp<mnemonic, traits # [Braid_ComputesInBF16,
        Braid_InPlaceOpInterface,
        DeclareOpInterfaceMethods<Braid_FusibleElementwiseOpInterface>]> {
  let summary = "Elementwise " # what # " with NumPy broadcasting.";
  let arguments = (ins Braid_FloatTensor:$lhs, Braid_FloatTensor:$rhs);
  let results = (outs Braid_FloatTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Braid_AddOp : Braid_BinaryOp<"add", "sum", [Braid_Linear]>;
def Braid_SubOp : Braid_BinaryOp<"sub", "difference", [Braid_Linear]>;
def Braid_MulOp : Braid_BinaryOp<"mul", "product">;
def Braid_DivOp : Braid_BinaryOp<"div", "quotient">;

class Braid_UnaryOp<string mnemonic, string what, list<Trait> traits = []>
    : Braid_DiffOp<mnemonic, traits # [SameOperandsAndResultType,
        Braid_ComputesInBF16, Braid_InPlaceOpInterface,
        DeclareOpInterfaceMethods<Braid_FusibleElementwiseOpInterface>]> {
  let summary = what;
  let arguments = (ins Braid_FloatTensor:$input);
  let results = (outs Braid_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

def Braid_NegOp : Braid_UnaryOp<"neg", "Elementwise negation.", [Braid_Linear]>;
def Braid_ExpOp : Braid_UnaryOp<"exp", "Elementwise exponential.",
    [Braid_Transcendental]>;
def Braid_SqrtOp : Braid_UnaryOp<"sqrt", "Elementwise square root.">;
def Braid_RsqrtOp : Braid_UnaryOp<"rsqrt", "Elementwise reciprocal square root.">;
def Braid_ReluOp : Braid_UnaryOp<"relu", "Elementwise max(x, 0).">;
def Braid_SiluOp : Braid_UnaryOp<"silu", "Elementwise x * sigmoid(x).",
    [Braid_Transcendental]>;

def Braid_GeluOp : Braid_DiffOp<"gelu", [SameOperandsAndResultType,
    Braid_ComputesInBF16, Braid_InPlaceOpInterface, Braid_Transcendental,
    DeclareOpInterfaceMethods<Braid_FusibleElementwiseOpInterface,
        ["isFusible", "getFusibleWhen"]>]> {
  let summary = "Gaussian error linear unit, exact or tanh approximation.";
  let description = [{
    `exact`: `0.5 x (1 + erf(x / sqrt(2)))`.
    `tanh`: `0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))` (GPT-2).

    ```mlir
    %y = braid.gelu tanh %x : tensor<2x8x64xf32>
    ```
  }];
  let arguments = (ins Braid_GeluApproximation:$approximate,
                       Braid_FloatTensor:$input);
  let results = (outs Braid_FloatTensor:$result);
  let assemblyFormat = "$approximate $input attr-dict `:` type($input)";
}

//===----------------------------------------------------------------------===//
// Precision
//===----------------------------------------------------------------------===//

def Braid_ConvertOp : Braid_DiffOp<"convert", [
    DeclareOpInterfaceMethods<Braid_FusibleElementwiseOpInterface,
        ["isFusible", "getFusibleWhen"]>]> {
  let summary = "Elementwise conversion to another floating-point type.";
  let description = [{
    Each element rounded to the nearest value of the result's element type
    (ties to even); the shape is unchanged. Its gradient converts the
    result's gradient back to the operand's type. `braid-mixed-precision`
    inserts it: f32 parameters to their bf16 working copies, bf16
    activations into the f32 norms, softmax and cross-entropy. Between f32
    and bf16 (`braid-legalize-bf16`'s packs of saved values to bf16
    storage and unpacks of them) it may be in a fused region: the region
    then reads or writes the bf16 storage in its loop.

    ```mlir
    %w16 = braid.convert %w : tensor<64x64xf32> to tensor<64x64xbf16>
    ```
  }];
  let arguments = (ins Braid_FloatTensor:$input);
  let results = (outs Braid_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `to` type($result)";
  let hasVerifier = 1;
}

def Braid_RoundOp : Braid_ModelOp<"round", [SameOperandsAndResultType,
    Braid_InPlaceOpInterface,
    DeclareOpInterfaceMethods<Braid_FusibleElementwiseOpInterface,
        ["isFusible", "getFusibleWhen"]>]> {
  let summary = "Rounds each element to a narrower type, keeping its own.";
  let description = [{
    Each element becomes the nearest value of `element_type` (ties to
    even; bf16 or f16), still stored in the operand's type. It is how
    `braid-legalize-bf16` keeps bf16 arithmetic for targets whose kernels
    are f32: a bf16 value becomes an f32 one rounded to bf16. Elementwise
    (InPlaceOpInterface): the rounding of an op's f32 result that dies
    there takes that result's buffer instead of a second one.

    ```mlir
    %r = braid.round %x to bf16 : tensor<4x64xf32>
    ```
  }];
  let arguments = (ins Braid_FloatTensor:$input, TypeAttr:$element_type);
  let results = (outs Braid_FloatTensor:$result);
  let assemblyFormat =
      "$input `to` $element_type attr-dict `:` type($input)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Normalisation, embeddings, attention, loss
//===----------------------------------------------------------------------===//

def Braid_SoftmaxOp : Braid_DiffOp<"softmax", [SameOperandsAndResultType,
    DeclareOpInterfaceMethods<Braid_RowReductionOpInterface,
        ["isFusibleByRows", "getFusibleWhen"]>]> {
  let summary = "Softmax along one axis.";
  let arguments = (ins Braid_FloatTensor:$input, I64Attr:$axis);
  let results = (outs Braid_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
  let hasVerifier = 1;
}

def Braid_LayerNormOp : Braid_DiffOp<"layer_norm", [Braid_RowReductionOpInterface]> {
  let summary = "Layer normalisation over the last dimension.";
  let description = [{
    `(x - mean) / sqrt(var + epsilon) * scale + bias` with the biased
    variance over the last dimension; `scale` and `bias` have that
    dimension's size.
  }];
  let arguments = (ins Braid_FloatTensor:$input, Braid_FloatTensor:$scale,
                       Braid_FloatTensor:$bias,
                       DefaultValuedAttr<F64Attr, "1.0e-05">:$epsilon);
  let results = (outs Braid_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $scale `,` $bias attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Braid_RmsNormOp : Braid_DiffOp<"rms_norm", [Braid_RowReductionOpInterface]> {
  let summary = "Root-mean-square normalisation over the last dimension.";
  let description = [{
    `x / sqrt(mean(x^2) + epsilon) * scale` over the last dimension.
  }];
  let arguments = (ins Braid_FloatTensor:$input, Braid_FloatTensor:$scale,
                       DefaultValuedAttr<F64Attr, "1.0e-06">:$epsilon);
  let results = (outs Braid_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $scale attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Braid_EmbeddingOp : Braid_DiffOp<"embedding", [Braid_ComputesInBF16,
    DeclareOpInterfaceMethods<Braid_ShardingRuleOpInterface, ["localize"]>]> {
  let summary = "Looks up rows of a table.";
  let description = [{
    `table` is `[V, H]`, `ids` has any shape with integers in [0, V); the
    result is `ids.shape + [H]`. An id out of range is an evaluation error.

    Vocabulary-parallel (set by `braid-partition`): with `mesh` and
    `vocab_axes`, `table` is block p of a table of p_n * V rows, where p is
    this device's position among the n devices of its group over
    `vocab_axes`; ids in [0, n * V) outside the block give zero rows, so
    the result is this device's share of a sum over the group.
  }];
  let arguments = (ins Braid_FloatTensor:$table, Braid_IdTensor:$ids,
                       OptionalAttr<FlatSymbolRefAttr>:$mesh,
                       OptionalAttr<StrArrayAttr>:$vocab_axes);
  let results = (outs Braid_FloatTensor:$result);
  let assemblyFormat = [{
    $table `,` $ids attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Braid_RotaryOp : Braid_DiffOp<"rotary", [SameOperandsAndResultType,
    Braid_ComputesInBF16]> {
  let summary = "Rotary position embedding (rotate-half convention).";
  let description = [{
    `input` is `[B, S, A, D]` with D even; the position of an element is its
    index along dimension 1. Dimensions `i` and `i + D/2` are rotated by the
    angle `p * base^(-2i/D)`, as in Llama and Hugging Face. With `inverse`
    the rotation is by the negated angle (the transpose, used for the
    gradient).
  }];
  let arguments = (ins Braid_FloatTensor:$input,
                       DefaultValuedAttr<F64Attr, "10000.0">:$base,
                       UnitAttr:$inverse);
  let results = (outs Braid_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
  let hasVerifier = 1;
}

def Braid_AttentionOp : Braid_DiffOp<"attention",
    [Braid_SelectivelyRecomputed, Braid_ComputesInBF16,
     DeclareOpInterfaceMethods<Braid_CostOpInterface, ["getMatmulFlops"]>]> {
  let summary = "Scaled dot-product attention with grouped KV heads.";
  let description = [{
    `query` is `[B, S, Hq, D]`; `key` and `value` are `[B, T, Hkv, D]` with
    `Hq` a multiple of `Hkv`: query head `h` uses KV head `h / (Hq / Hkv)`.
    `softmax(q k^T * scale) v` per head, with `scale` defaulting to
    `1/sqrt(D)`. With `causal` (which requires S = T), query position `s`
    attends to key positions `t <= s`. The result is `[B, S, Hq, D]`.
  }];
  let arguments = (ins Braid_FloatTensor:$query, Braid_FloatTensor:$key,
                       Braid_FloatTensor:$value, UnitAttr:$causal,
                       OptionalAttr<F64Attr>:$scale);
  let results = (outs Braid_FloatTensor:$result);
  let assemblyFormat = [{
    $query `,` $key `,` $value attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The scale applied to q k^T: the attribute, or 1/sqrt(head dim).
    double getEffectiveScale();
  }];
}

def Braid_CrossEntropyOp : Braid_DiffOp<"cross_entropy", [DeclareOpInterfaceMethods<
    Braid_ShardingRuleOpInterface, ["localize"]>,
    DeclareOpInterfaceMethods<Braid_RowReductionOpInterface,
        ["isFusibleByRows", "sharesRowStatistics", "getFusibleWhen"]>]> {
  let summary = "Mean softmax cross-entropy against integer labels.";
  let description = [{
    `logits` is `[..., V]`, `labels` is `[...]` with integers in [0, V). The
    rank-0 result is the mean over label positions of
    `logsumexp(logits) - logits[label]`.

    Vocabulary-parallel (set by `braid-partition`, after Megatron's
    vocab-parallel cross-entropy): with `mesh` and `vocab_axes`, `logits`
    holds block p of the vocabulary (p this device's position in its group
    over `vocab_axes`); per position, the maximum, the sum of exponentials
    and the label's logit are all-reduced over the group, so every device
    gets the whole loss.
  }];
  let arguments = (ins Braid_FloatTensor:$logits, Braid_IdTensor:$labels,
                       OptionalAttr<FlatSymbolRefAttr>:$mesh,
                       OptionalAttr<StrArrayAttr>:$vocab_axes);
  let results = (outs Braid_FloatTensor:$result);
  let assemblyFormat = [{
    $logits `,` $labels attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Shape ops and constants
//===----------------------------------------------------------------------===//

def Braid_ReshapeOp : Braid_DiffOp<"reshape", [Braid_MovesDataOnly, Braid_Linear]> {
  let summary = "Reinterprets a tensor with a new shape (row-major).";
  let arguments = (ins AnyRankedTensor:$input);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Braid_TransposeOp : Braid_DiffOp<"transpose", [Braid_MovesDataOnly, Braid_Linear]> {
  let summary = "Permutes dimensions: result dim i is input dim permutation[i].";
  let arguments = (ins AnyRankedTensor:$input,
                       DenseI64ArrayAttr:$permutation);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Braid_ReduceOp : Braid_DiffOp<"reduce"> {
  let summary = "Sum, mean or max over the given axes.";
  let description = [{
    Reduces `axes` (distinct, in range). With `keep_dims` the reduced
    dimensions stay with size 1.

    ```mlir
    %s = braid.reduce sum %x {axes = array<i64: 1>} : (tensor<2x3xf32>) -> tensor<2xf32>
    ```
  }];
  let arguments = (ins Braid_ReduceKind:$kind, Braid_FloatTensor:$input,
                       DenseI64ArrayAttr:$axes, UnitAttr:$keep_dims);
  let results = (outs Braid_FloatTensor:$result);
  let assemblyFormat = [{
    $kind $input attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Braid_BroadcastOp : Braid_DiffOp<"broadcast", [Braid_MovesDataOnly, Braid_Linear]> {
  let summary = "Broadcasts to the result shape with NumPy rules.";
  let arguments = (ins AnyRankedTensor:$input);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Braid_SliceOp : Braid_DiffOp<"slice", [Braid_MovesDataOnly, Braid_Linear,
    DeclareOpInterfaceMethods<Braid_ShardingRuleOpInterface, ["localize"]>]> {
  let summary = "Strided slice [start, limit) with stride per dimension.";
  let arguments = (ins AnyRankedTensor:$input, DenseI64ArrayAttr:$start,
                       DenseI64ArrayAttr:$limit,
                       OptionalAttr<DenseI64ArrayAttr>:$stride);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Braid_ConcatOp : Braid_DiffOp<"concat", [Braid_MovesDataOnly, Braid_Linear]> {
  let summary = "Concatenates tensors along an axis.";
  let arguments = (ins Variadic<AnyRankedTensor>:$inputs, I64Attr:$axis);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$inputs attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Braid_ConstantOp : Braid_ModelOp<"constant", [ConstantLike,
    AllTypesMatch<["value", "result"]>]> {
  let summary = "A constant tensor.";
  let description = [{
    ```mlir
    %c = braid.constant dense<[1.0, 2.0]> : tensor<2xf32>
    ```
  }];
  let arguments = (ins TypedAttrInterface:$value);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "attr-dict $value";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Gradient ops: emitted by braid-autodiff for the ops whose vector-Jacobian
// product is not a short composition of other braid ops.
//===----------------------------------------------------------------------===//

class Braid_ActivationGradOp<string mnemonic, string what,
                             list<Trait> traits = []>
    : Braid_ModelOp<mnemonic, traits # [SameOperandsAndResultType,
        Braid_InPlaceOpInterface,
        DeclareOpInterfaceMethods<Braid_FusibleElementwiseOpInterface>]> {
  let summary = "Gradient of " # what # ": `grad * f'(input)`.";
  let arguments = (ins Braid_FloatTensor:$input, Braid_FloatTensor:$grad);
  let results = (outs Braid_FloatTensor:$result);
  let assemblyFormat = "$input `,` $grad attr-dict `:` type($input)";
}

def Braid_ReluGradOp : Braid_ActivationGradOp<"relu_grad", "relu">;
def Braid_SiluGradOp : Braid_ActivationGradOp<"silu_grad", "silu",
    [Braid_Transcendental]>;

def Braid_GeluGradOp : Braid_ModelOp<"gelu_grad", [SameOperandsAndResultType,
    Braid_InPlaceOpInterface, Braid_Transcendental,
    DeclareOpInterfaceMethods<Braid_FusibleElementwiseOpInterface,
        ["isFusible", "getFusibleWhen"]>]> {
  let summary = "Gradient of gelu: `grad * gelu'(input)`.";
  let arguments = (ins Braid_GeluApproximation:$approximate,
                       Braid_FloatTensor:$input, Braid_FloatTensor:$grad);
  let results = (outs Braid_FloatTensor:$result);
  let assemblyFormat = [{
    $approximate $input `,` $grad attr-dict `:` type($input)
  }];
}

def Braid_LayerNormGradOp : Braid_ModelOp<"layer_norm_grad", [Braid_RowReductionOpInterface]> {
  let summary = "Input gradient of layer_norm.";
  let description = [{
    The gradient with respect to `input` of `layer_norm(input, scale, _)`
    given the result gradient `grad`. The scale and bias gradients are
    separate (W-phase) computations.
  }];
  let arguments = (ins Braid_FloatTensor:$input, Braid_FloatTensor:$scale,
                       Braid_FloatTensor:$grad,
                       DefaultValuedAttr<F64Attr, "1.0e-05">:$epsilon);
  let results = (outs Braid_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $scale `,` $grad attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Braid_RmsNormGradOp : Braid_ModelOp<"rms_norm_grad", [Braid_RowReductionOpInterface]> {
  let summary = "Input gradient of rms_norm.";
  let arguments = (ins Braid_FloatTensor:$input, Braid_FloatTensor:$scale,
                       Braid_FloatTensor:$grad,
                       DefaultValuedAttr<F64Attr, "1.0e-06">:$epsilon);
  let results = (outs Braid_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $scale `,` $grad attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Braid_EmbeddingGradOp : Braid_ModelOp<"embedding_grad", [DeclareOpInterfaceMethods<
    Braid_ShardingRuleOpInterface, ["localize"]>]> {
  let summary = "Table gradient of embedding (scatter-add of row gradients).";
  let description = [{
    Row `v` of the `[V, H]` result is the sum of the rows of `grad`
    (`ids.shape + [H]`) at the positions where `ids` equals `v`. With
    `mesh` and `vocab_axes` (vocabulary-parallel, as for `embedding`), the
    result is block p of the table's gradient: ids outside it are skipped.
  }];
  let arguments = (ins Braid_IdTensor:$ids, Braid_FloatTensor:$grad,
                       OptionalAttr<FlatSymbolRefAttr>:$mesh,
                       OptionalAttr<StrArrayAttr>:$vocab_axes);
  let results = (outs Braid_FloatTensor:$result);
  let assemblyFormat = "$ids `,` $grad attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Braid_AttentionGradOp : Braid_ModelOp<"attention_grad",
    [DeclareOpInterfaceMethods<Braid_CostOpInterface, ["getMatmulFlops"]>]> {
  let summary = "Gradient of attention with respect to one of q, k, v.";
  let description = [{
    The gradient with respect to operand `operand` (0: query, 1: key,
    2: value) of `attention(query, key, value)` with the same `causal` and
    `scale`, given the result gradient `grad`. Grouped KV heads sum the
    gradients of the query heads that share them.
  }];
  let arguments = (ins Braid_FloatTensor:$query, Braid_FloatTensor:$key,
                       Braid_FloatTensor:$value, Braid_FloatTensor:$grad,
                       I64Attr:$operand, UnitAttr:$causal,
                       OptionalAttr<F64Attr>:$scale);
  let results = (outs Braid_FloatTensor:$result);
  let assemblyFormat = [{
    $query `,` $key `,` $value `,` $grad attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Braid_CrossEntropyGradOp : Braid_ModelOp<"cross_entropy_grad", [DeclareOpInterfaceMethods<
    Braid_ShardingRuleOpInterface, ["localize"]>,
    DeclareOpInterfaceMethods<Braid_RowReductionOpInterface,
        ["isFusibleByRows", "sharesRowStatistics", "getFusibleWhen"]>]> {
  let summary = "Logits gradient of cross_entropy.";
  let description = [{
    `(softmax(logits) - onehot(labels)) * grad / N` with N the number of
    label positions and `grad` the rank-0 gradient of the mean loss. With
    `mesh` and `vocab_axes` (vocabulary-parallel, as for `cross_entropy`),
    `logits` and the result are block p of the vocabulary; the softmax's
    maximum and sum of exponentials are all-reduced over the group.
  }];
  let arguments = (ins Braid_FloatTensor:$logits, Braid_IdTensor:$labels,
                       Braid_FloatTensor:$grad,
                       OptionalAttr<FlatSymbolRefAttr>:$mesh,
                       OptionalAttr<StrArrayAttr>:$vocab_axes);
  let results = (outs Braid_FloatTensor:$result);
  let assemblyFormat = [{
    $logits `,` $labels `,` $grad attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Braid_ReduceMaxGradOp : Braid_ModelOp<"reduce_max_grad"> {
  let summary = "Input gradient of reduce max.";
  let description = [{
    Routes each element of `grad` (the result gradient of `reduce max` over
    `axes`) to the input elements equal to the maximum, split evenly among
    ties (as `torch.amax`).
  }];
  let arguments = (ins Braid_FloatTensor:$input, Braid_FloatTensor:$grad,
                       DenseI64ArrayAttr:$axes, UnitAttr:$keep_dims);
  let results = (outs Braid_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $grad attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Braid_SliceGradOp : Braid_ModelOp<"slice_grad", [DeclareOpInterfaceMethods<
    Braid_ShardingRuleOpInterface, ["localize"]>]> {
  let summary = "Input gradient of slice: scatters into zeros.";
  let description = [{
    The result has the sliced tensor's shape; the elements selected by
    `start`, `limit` and `stride` hold `grad`, all others are zero.
  }];
  let arguments = (ins AnyRankedTensor:$grad, DenseI64ArrayAttr:$start,
                       DenseI64ArrayAttr:$limit,
                       OptionalAttr<DenseI64ArrayAttr>:$stride);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$grad attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Distribution: meshes, shardings, collectives
//===----------------------------------------------------------------------===//

def Braid_MeshOp : Braid_Op<"mesh", [Symbol, HasParent<"::mlir::ModuleOp">]> {
  let summary = "A logical device mesh with named axes.";
  let description = [{
    The devices of a parallel run arranged as an n-dimensional array whose
    axes have names (`dp`, `tp`, `pp`, any names) and sizes. Device `r`
    (row-major over the axes) has coordinates given by unravelling `r`.

    ```mlir
    braid.mesh @mesh {axes = ["dp", "tp"], shape = array<i64: 2, 4>}
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, StrArrayAttr:$axes,
                       DenseI64ArrayAttr:$shape);
  let assemblyFormat = "$sym_name attr-dict";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The index of axis `name`, if the mesh has it.
    std::optional<unsigned> getAxisIndex(::llvm::StringRef name);
    /// The product of the axis sizes.
    int64_t getNumDevices();
  }];
}

def Braid_ShardOp : Braid_Op<"shard", [Pure, SameOperandsAndResultType,
    DeclareOpInterfaceMethods<Braid_ShardingRuleOpInterface>,
    Braid_StaticShapes, DeclareOpInterfaceMethods<SymbolUserOpInterface>,
    DeclareOpInterfaceMethods<Braid_GradientOpInterface, ["buildGradient"]>]> {
  let summary = "Constrains a value to a sharding.";
  let description = [{
    Returns its input, which from here on has the sharding `sharding`: an
    annotation for sharding propagation (stronger with a higher `priority`),
    the identity for evaluation. Its gradient is the same constraint on the
    cotangent (as JAX's `with_sharding_constraint` transposes).

    ```mlir
    %y = braid.shard %x : tensor<8x64xf32> to #braid.sharding<@mesh, [["dp"], []]>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input, Braid_ShardingAttr:$sharding,
                       DefaultValuedAttr<I64Attr, "0">:$priority);
  let results = (outs AnyRankedTensor:$result);
  // The sharding comes last: an attribute followed by `:` would take the
  // type as its own.
  let assemblyFormat = [{
    $input `:` type($input) `to` qualified($sharding) attr-dict
  }];
}

// Collectives exchange data between the devices of a group: those that
// differ only in their coordinates along `axes` of `mesh`. They appear in
// per-device programs (after partitioning), on local tensors. `hooks` names
// the CollectiveOpInterface methods with defaults that the op overrides
// (lib/Dialect/Braid/IR/BraidOpsCollective.cpp).
class Braid_CollectiveOp<string mnemonic, list<string> hooks = [],
                         list<Trait> traits = []>
    : Braid_Op<mnemonic, traits # [Braid_StaticShapes,
        DeclareOpInterfaceMethods<SymbolUserOpInterface>,
        DeclareOpInterfaceMethods<Braid_CollectiveOpInterface, hooks>,
        Braid_CostOpInterface]> {
  let results = (outs AnyRankedTensor:$result);
  let extraClassDeclaration = [{
    /// The number of devices in each group.
    int64_t getGroupSize(::mlir::braid::MeshOp mesh);
  }];
}

def Braid_AllReduceOp : Braid_CollectiveOp<"all_reduce",
    ["getReduction", "createStart", "getRingTraffic", "getRingSteps"],
    [SameOperandsAndResultType]> {
  let summary = "Reduces (sums) a tensor over a group; every device gets the result.";
  let description = [{
    ```mlir
    %y = braid.all_reduce sum %x on @mesh ["tp"] : tensor<8x64xf32>
    ```
    Sums are taken in group order, so every device gets the same bits.
  }];
  let arguments = (ins Braid_ReduceKind:$kind, AnyRankedTensor:$input,
                       FlatSymbolRefAttr:$mesh, StrArrayAttr:$axes);
  let assemblyFormat = [{
    $kind $input `on` $mesh $axes attr-dict `:` type($input)
  }];
}

def Braid_AllGatherOp : Braid_CollectiveOp<"all_gather",
    ["getGatherDim", "createStart"]> {
  let summary = "Concatenates the group's tensors along a dimension.";
  let description = [{
    The result's dimension `dim` is the group size times the input's; the
    blocks are in group order.
  }];
  let arguments = (ins AnyRankedTensor:$input, FlatSymbolRefAttr:$mesh,
                       StrArrayAttr:$axes, I64Attr:$dim);
  let assemblyFormat = [{
    $input `on` $mesh $axes attr-dict `:` functional-type(operands, results)
  }];
}

def Braid_ReduceScatterOp : Braid_CollectiveOp<"reduce_scatter",
    ["getReduction", "getScatterDim", "createStart"]> {
  let summary = "Sums the group's tensors and gives each device one block.";
  let description = [{
    The sum is split along `dim` into group-size blocks; the device at group
    position i gets block i.
  }];
  let arguments = (ins AnyRankedTensor:$input, FlatSymbolRefAttr:$mesh,
                       StrArrayAttr:$axes, I64Attr:$dim);
  let assemblyFormat = [{
    $input `on` $mesh $axes attr-dict `:` functional-type(operands, results)
  }];
}

def Braid_AllToAllOp : Braid_CollectiveOp<"all_to_all",
    ["getScatterDim", "getGatherDim", "createStart"]> {
  let summary = "Splits along one dimension, exchanges, concatenates along another.";
  let description = [{
    Each device splits its tensor along `split_dim` into group-size blocks
    and sends block j to the device at group position j, which concatenates
    what it receives along `concat_dim` in group order.
  }];
  let arguments = (ins AnyRankedTensor:$input, FlatSymbolRefAttr:$mesh,
                       StrArrayAttr:$axes, I64Attr:$split_dim,
                       I64Attr:$concat_dim);
  let assemblyFormat = [{
    $input `on` $mesh $axes attr-dict `:` functional-type(operands, results)
  }];
}

def Braid_AllSliceOp : Braid_CollectiveOp<"all_slice",
    ["getScatterDim", "getRingTraffic", "getRingSteps"]> {
  let summary = "Each device keeps its block of a replicated tensor.";
  let description = [{
    The inverse of all_gather, without communication: the tensor is split
    along `dim` into group-size blocks and the device at group position i
    keeps block i.
  }];
  let arguments = (ins AnyRankedTensor:$input, FlatSymbolRefAttr:$mesh,
                       StrArrayAttr:$axes, I64Attr:$dim);
  let assemblyFormat = [{
    $input `on` $mesh $axes attr-dict `:` functional-type(operands, results)
  }];
}

def Braid_BroadcastFromOp : Braid_CollectiveOp<"broadcast_from",
    ["getGroupRoot", "createStart", "getRingTraffic"],
    [SameOperandsAndResultType]> {
  let summary = "Every device of the group gets the tensor of the root.";
  let arguments = (ins AnyRankedTensor:$input, FlatSymbolRefAttr:$mesh,
                       StrArrayAttr:$axes, DefaultValuedAttr<I64Attr, "0">:$root);
  let assemblyFormat = [{
    $input `on` $mesh $axes attr-dict `:` type($input)
  }];
}

// Asynchronous forms: `<collective>_start` takes the operands and attributes
// of its synchronous collective and returns a future; `braid.wait` gives the
// tensor. The work between start and wait may overlap the communication
// (`braid-async-collectives` makes them from the synchronous forms).
class Braid_CollectiveStartOp<string mnemonic, string sync,
                              list<string> hooks = []>
    : Braid_Op<mnemonic, [DeclareOpInterfaceMethods<SymbolUserOpInterface>,
        DeclareOpInterfaceMethods<Braid_CollectiveOpInterface, hooks>]> {
  let summary = "Starts `braid." # sync # "`; `braid.wait` completes it.";
  let description = [{
    The asynchronous form of `braid.}] # sync # [{`: same operands,
    attributes and checks; the result is a `!braid.future` of the tensor
    the synchronous op returns.
  }];
  let results = (outs Braid_FutureType:$result);
  let assemblyFormat = [{
    $input `on` $mesh $axes attr-dict `:` type($input) `->` qualified(type($result))
  }];
  let extraClassDeclaration = [{
    /// The number of devices in each group.
    int64_t getGroupSize(::mlir::braid::MeshOp mesh);
    /// The tensor the future will hold.
    ::mlir::RankedTensorType getValueType() {
      return getResult().getType().getValueType();
    }
  }];
}

def Braid_AllReduceStartOp : Braid_CollectiveStartOp<"all_reduce_start",
    "all_reduce", ["getReduction", "getRingTraffic", "getRingSteps"]> {
  let arguments = (ins Braid_ReduceKind:$kind, AnyRankedTensor:$input,
                       FlatSymbolRefAttr:$mesh, StrArrayAttr:$axes);
  let assemblyFormat = [{
    $kind $input `on` $mesh $axes attr-dict `:` type($input) `->` qualified(type($result))
  }];
}

def Braid_AllGatherStartOp : Braid_CollectiveStartOp<"all_gather_start",
    "all_gather", ["getGatherDim"]> {
  let arguments = (ins AnyRankedTensor:$input, FlatSymbolRefAttr:$mesh,
                       StrArrayAttr:$axes, I64Attr:$dim);
}

def Braid_ReduceScatterStartOp : Braid_CollectiveStartOp<
    "reduce_scatter_start", "reduce_scatter",
    ["getReduction", "getScatterDim"]> {
  let arguments = (ins AnyRankedTensor:$input, FlatSymbolRefAttr:$mesh,
                       StrArrayAttr:$axes, I64Attr:$dim);
}

def Braid_AllToAllStartOp : Braid_CollectiveStartOp<"all_to_all_start",
    "all_to_all", ["getScatterDim", "getGatherDim"]> {
  let arguments = (ins AnyRankedTensor:$input, FlatSymbolRefAttr:$mesh,
                       StrArrayAttr:$axes, I64Attr:$split_dim,
                       I64Attr:$concat_dim);
}

def Braid_BroadcastFromStartOp : Braid_CollectiveStartOp<
    "broadcast_from_start", "broadcast_from",
    ["getGroupRoot", "getRingTraffic"]> {
  let arguments = (ins AnyRankedTensor:$input, FlatSymbolRefAttr:$mesh,
                       StrArrayAttr:$axes, DefaultValuedAttr<I64Attr, "0">:$root);
}

def Braid_WaitOp : Braid_Op<"wait", [
    TypesMatchWith<"result is the future's tensor", "future", "result",
                   "::llvm::cast<::mlir::braid::FutureType>($_self).getValueType()">]> {
  let summary = "Waits for an asynchronous collective; returns its tensor.";
  let description = [{
    ```mlir
    %f = braid.all_reduce_start sum %x on @mesh ["tp"] : tensor<8x64xf32> -> !braid.future<tensor<8x64xf32>>
    %h = braid.matmul %a, %b : ...       // runs while %x is reduced
    %y = braid.wait %f : !braid.future<tensor<8x64xf32>>
    ```
  }];
  let arguments = (ins Braid_FutureType:$future);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$future attr-dict `:` qualified(type($future))";
}

//===----------------------------------------------------------------------===//
// Training ops: learning rate, clipping, optimizer updates.
//===----------------------------------------------------------------------===//

def Braid_LrDecay : I32EnumAttr<"LrDecay", "learning-rate decay after warm-up", [
    I32EnumAttrCase<"constant", 0>,
    I32EnumAttrCase<"linear", 1>,
    I32EnumAttrCase<"cosine", 2>]> {
  let cppNamespace = "::mlir::braid";
}

def Braid_LrScheduleOp : Braid_ModelOp<"lr_schedule"> {
  let summary = "Learning rate of a step: linear warm-up, then decay.";
  let description = [{
    For step `t` (0 for the first update): during warm-up
    (`t < warmup_steps`) `lr * (t + 1) / warmup_steps`; afterwards, with
    `p = min(1, (t - warmup_steps) / max(1, total_steps - warmup_steps))`,
    `constant`: `lr`; `linear`: `min_lr + (lr - min_lr) (1 - p)`;
    `cosine`: `min_lr + (lr - min_lr) (1 + cos(pi p)) / 2`.

    ```mlir
    %lr = braid.lr_schedule cosine %step {lr = 3.0e-4 : f64, min_lr = 3.0e-5 : f64,
        warmup_steps = 100 : i64, total_steps = 1000 : i64} : (tensor<i64>) -> tensor<f32>
    ```
  }];
  let arguments = (ins Braid_LrDecay:$decay, Braid_IdTensor:$step,
                       F64Attr:$lr, DefaultValuedAttr<F64Attr, "0.0">:$min_lr,
                       DefaultValuedAttr<I64Attr, "0">:$warmup_steps,
                       DefaultValuedAttr<I64Attr, "1">:$total_steps);
  let results = (outs Braid_FloatTensor:$result);
  let assemblyFormat = [{
    $decay $step attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Braid_GlobalNormOp : Braid_ModelOp<"global_norm"> {
  let summary = "The L2 norm of all elements of all operands together.";
  let arguments = (ins Variadic<Braid_FloatTensor>:$inputs);
  let results = (outs Braid_FloatTensor:$result);
  let assemblyFormat = "$inputs attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Braid_SumSquaresOp : Braid_ModelOp<"sum_squares"> {
  let summary = "The sum of the squares of all elements of all operands.";
  let description = [{
    The square of the global L2 norm. Unlike `global_norm`, it is a sum, so
    a device holding a share of every operand computes a partial sum, and
    the norm of sharded gradients costs one scalar all_reduce.
  }];
  let arguments = (ins Variadic<Braid_FloatTensor>:$inputs);
  let results = (outs Braid_FloatTensor:$result);
  let assemblyFormat = "$inputs attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Braid_ClipCoefficientOp : Braid_ModelOp<"clip_coefficient",
    [SameOperandsAndResultType]> {
  let summary = "Gradient scale of global-norm clipping.";
  let description = [{
    `min(1, max_norm / (norm + 1e-6))`, the factor `clip_grad_norm_`
    multiplies every gradient by.
  }];
  let arguments = (ins Braid_FloatTensor:$norm, F64Attr:$max_norm);
  let results = (outs Braid_FloatTensor:$result);
  let assemblyFormat = "$norm attr-dict `:` type($norm)";
  let hasVerifier = 1;
}

def Braid_SelectOp : Braid_ModelOp<"select",
    [AllTypesMatch<["on_true", "on_false", "result"]>]> {
  let summary = "One of two tensors, chosen by a scalar.";
  let description = [{
    `on_true` where the rank-0 `condition` is not zero (NaN counts as not
    zero, as in C), `on_false` where it is zero. braid-train-step's
    `post-validate` uses it to keep an optimistic update or roll it back.

    ```mlir
    %p = braid.select %d, %redone, %optimistic : tensor<f32>, tensor<8x8xf32>
    ```
  }];
  let arguments = (ins Braid_FloatTensor:$condition,
                       Braid_FloatTensor:$on_true, Braid_FloatTensor:$on_false);
  let results = (outs Braid_FloatTensor:$result);
  let assemblyFormat = [{
    $condition `,` $on_true `,` $on_false attr-dict `:` type($condition) `,`
    type($result)
  }];
  let hasVerifier = 1;
}

def Braid_AdamWUpdateOp : Braid_ModelOp<"adamw_update", [
    DeclareOpInterfaceMethods<Braid_InPlaceOpInterface,
        ["getInPlaceOperands", "mayUpdateParameterSlot"]>]> {
  let summary = "One AdamW step for one parameter.";
  let description = [{
    With `g = grad * grad_scale`, `t = step + 1`, learning rate `lr`:
    `param -= lr * weight_decay * param` (decoupled weight decay),
    `m = beta1 m + (1 - beta1) g`, `v = beta2 v + (1 - beta2) g^2`,
    `param -= lr * (m / (1 - beta1^t)) / (sqrt(v / (1 - beta2^t)) + epsilon)`.
    Returns the new parameter, m and v (Loshchilov and Hutter 2019; as
    torch.optim.AdamW). A non-finite `grad_scale` skips the step: the
    results are the parameter, m and v unchanged (braid-train-step makes
    the scale non-finite when the loss or the gradient norm is).

    Elementwise, so code generation may write the new parameter, m and v
    over the old ones, or into the parameter's slot when the result's only
    use stores it back there (InPlaceOpInterface).
  }];
  let arguments = (ins Braid_FloatTensor:$param, Braid_FloatTensor:$grad,
                       Braid_FloatTensor:$m, Braid_FloatTensor:$v,
                       Braid_FloatTensor:$lr, Braid_IdTensor:$step,
                       Braid_FloatTensor:$grad_scale,
                       DefaultValuedAttr<F64Attr, "0.9">:$beta1,
                       DefaultValuedAttr<F64Attr, "0.999">:$beta2,
                       DefaultValuedAttr<F64Attr, "1.0e-08">:$epsilon,
                       DefaultValuedAttr<F64Attr, "0.01">:$weight_decay);
  let results = (outs Braid_FloatTensor:$new_param, Braid_FloatTensor:$new_m,
                      Braid_FloatTensor:$new_v);
  let assemblyFormat = [{
    $param `,` $grad `,` $m `,` $v `,` $lr `,` $step `,` $grad_scale attr-dict
    `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Braid_SgdUpdateOp : Braid_ModelOp<"sgd_update", [
    DeclareOpInterfaceMethods<Braid_InPlaceOpInterface,
        ["getInPlaceOperands", "mayUpdateParameterSlot"]>]> {
  let summary = "One SGD step (momentum, optionally Nesterov) for one parameter.";
  let description = [{
    With `g = grad * grad_scale + weight_decay * param`:
    `buf = momentum * buf + g`; `param -= lr * (nesterov ? g + momentum * buf : buf)`
    (as torch.optim.SGD without dampening; with momentum 0, plain SGD).
    Returns the new parameter and momentum buffer. A non-finite
    `grad_scale` skips the step: both are returned unchanged. As for
    `adamw_update`, code generation may write them over the old ones or
    into their slots (InPlaceOpInterface).
  }];
  let arguments = (ins Braid_FloatTensor:$param, Braid_FloatTensor:$grad,
                       Braid_FloatTensor:$momentum_buffer,
                       Braid_FloatTensor:$lr, Braid_FloatTensor:$grad_scale,
                       DefaultValuedAttr<F64Attr, "0.0">:$momentum,
                       UnitAttr:$nesterov,
                       DefaultValuedAttr<F64Attr, "0.0">:$weight_decay);
  let results = (outs Braid_FloatTensor:$new_param,
                      Braid_FloatTensor:$new_momentum_buffer);
  let assemblyFormat = [{
    $param `,` $grad `,` $momentum_buffer `,` $lr `,` $grad_scale attr-dict
    `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Fusion
//===----------------------------------------------------------------------===//

def Braid_FusedOp : Braid_Op<"fused", [Pure, IsolatedFromAbove,
    Braid_StaticShapes]> {
  let summary = "Elementwise ops, and row-wise ops over their rows, in one loop nest.";
  let description = [{
    A region of elementwise ops (those implementing
    FusibleElementwiseOpInterface: `braid.add`, `sub`, `mul`, `div` with
    broadcasting, `exp`, the activations and their gradients, roundings to
    bf16, conversions between f32 and bf16 storage; the verifier's error
    lists them all) whose results all have one shape, the region's
    iteration space. The entry block's arguments are the operands (each
    broadcasts to that shape); `braid.yield` returns the values used
    outside. Values are f32 but for bf16 storage under bf16-mixed, which
    only conversions read and write: an operand unpacked in the region, a
    value packed there for the caller. It means exactly
    what its body means, op by op: code generation computes every element
    of every value in one loop nest over the iteration space, rounding each
    op's result to f32 as the op would, so a program with fused regions
    computes the same bits as without. Made by `braid-fuse-elementwise`,
    last before `braid-lower-to-emitc` (in braidc's pipeline unless
    `--no-fuse`).

    Row-wise ops may be in the region too (RowReductionOpInterface):
    `layer_norm`, `rms_norm`, their input gradients, `softmax` over the
    last axis, and `cross_entropy` and `cross_entropy_grad` (not
    vocabulary-parallel). The iteration shape is
    then the shape of their first operand (the rows are all dimensions but
    the last), every elementwise value has it, and each row is computed in
    turn: the elementwise ops before a row-wise op, its statistics over the
    row, its result, the elementwise ops after it. Their other operands
    (scale, bias, labels of the leading shape, the loss gradient) are
    operands of the region; `cross_entropy`'s rank-0 loss, a mean over all
    rows, may only be yielded.

    ```mlir
    %fc, %gelu = braid.fused (%xw, %bias) : (tensor<2x8x128xf32>, tensor<128xf32>)
        -> (tensor<2x8x128xf32>, tensor<2x8x128xf32>) {
    ^bb0(%a: tensor<2x8x128xf32>, %b: tensor<128xf32>):
      %0 = braid.add %a, %b : (tensor<2x8x128xf32>, tensor<128xf32>) -> tensor<2x8x128xf32>
      %1 = braid.gelu tanh %0 : tensor<2x8x128xf32>
      braid.yield %0, %1 : tensor<2x8x128xf32>, tensor<2x8x128xf32>
    }
    ```
  }];
  let arguments = (ins Variadic<AnyRankedTensor>:$inputs);
  let results = (outs Variadic<Braid_FloatTensor>:$results);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    `(` $inputs `)` attr-dict `:` functional-type($inputs, $results) $body
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// Whether `op` may be in a fused region as an elementwise op: a
    /// FusibleElementwiseOpInterface op with one statically shaped result
    /// whose isFusible() holds (f32 values; tanh GELU only: exact GELU's
    /// erf in double is not the same bits in every loop, see
    /// braid/rt/elementwise_math.h).
    static bool isFusible(::mlir::Operation *op);
    /// Whether `op` may be in a fused region as a row-wise op: f32, static,
    /// reducing over the last dimension of its first operand (the list
    /// above; softmax over the last axis, cross-entropy not
    /// vocabulary-parallel).
    static bool isRowwise(::mlir::Operation *op);
    /// The shape every elementwise value of the region has: the first
    /// operand's of the first row-wise op, else result #0's.
    ::llvm::ArrayRef<int64_t> getIterationShape();
  }];
}

def Braid_MatmulBiasOp : Braid_DiffOp<"matmul_bias",
    [Braid_ComputesInBF16,
     DeclareOpInterfaceMethods<Braid_CostOpInterface, ["getMatmulFlops"]>]> {
  let summary = "Matmul with a bias added to every row (and tanh GELU after).";
  let description = [{
    `braid.matmul %lhs, %rhs` (same operands, transposes and result) with
    `bias` (`[N]`, the result's last dimension) added to every row of the
    product, then tanh GELU when `gelu` is given: exactly `braid.add` of the
    product and the bias, then `braid.gelu tanh`, each result rounded to
    the element type as those ops round it, except that a bf16 product is
    held in f32 until the bias is added, as a bf16 linear layer's is (the
    sum is rounded to f32, then to bf16). Only tanh GELU, the function
    cuBLASLt's GELU epilogue computes. Made by `braid-fuse-matmul-epilogue`,
    which braidc runs after training, sharding and `braid-legalize-bf16` (so
    its tensors are f32 there); code generation computes it as one GEMM call
    with its epilogue (CPU: applied to each block of the product as it is
    computed; CUDA: cuBLASLt's BIAS / GELU_BIAS epilogues). A
    `braid.bf16_operands` attribute is kept from the matmul; on a bf16 op
    fused before `braid-legalize-bf16`, that pass sets it and splits a
    `gelu` epilogue off (the GEMM's epilogue cannot round the sum before
    the GELU).

    Run earlier, the op is differentiated and sharded as what it replaces.
    Its gradients are matmul's, of the pre-activation's gradient (with
    `gelu`, `gelu_grad` of the pre-activation, which the rule recomputes
    without GELU: one more product per operand differentiated), and for
    `bias` that gradient summed over all dimensions but the last. Its
    sharding rule is matmul's with the bias on the column factor, except
    that the contraction stays whole: devices holding a share of it would
    each add the bias (and apply GELU) to a partial sum. So, fused before
    `braid-shard`, a model's tensor parallelism finds no matmul pair to
    split (a row-parallel product's contraction cannot be); fuse after it,
    as braidc does. `braid-mixed-precision` makes it bf16 as it makes a
    matmul (`ComputesInBF16`).

    ```mlir
    %h = braid.matmul_bias %x, %w, %b gelu tanh : (tensor<2x8x32xf32>,
        tensor<32x128xf32>, tensor<128xf32>) -> tensor<2x8x128xf32>
    ```
  }];
  let arguments = (ins Braid_FloatTensor:$lhs, Braid_FloatTensor:$rhs,
                       Braid_FloatTensor:$bias, UnitAttr:$transpose_a,
                       UnitAttr:$transpose_b,
                       OptionalAttr<Braid_GeluApproximation>:$gelu);
  let results = (outs Braid_FloatTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs `,` $bias (`gelu` $gelu^)? attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

#endif // BRAID_DIALECT_BRAID_IR_BRAIDOPS_TD
