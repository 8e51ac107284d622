//===- Passes.td - braid transformation passes -------------*- tablegen -*-===//

#ifndef BRAID_DIALECT_BRAID_TRANSFORMS_PASSES_TD
#define BRAID_DIALECT_BRAID_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def AutodiffPass : Pass<"braid-autodiff", "::mlir::ModuleOp"> {
  let summary = "Derives the gradient function of a scalar loss, with each "
                "layer's backward split into B and W.";
  let description = [{
    For the function `entry` (a forward pass returning a rank-0 loss as its
    first result), adds a function `<entry>_grad` with the same arguments
    that returns the loss followed by the gradient of every parameter.

    Every op of the new function and of the layers it creates carries
    `braid.phase`: `F` (the forward pass), `B` (gradients of activations,
    on the critical path between pipeline stages) or `W` (gradients of
    parameters, which only need values saved by F and produced by B, so a
    schedule may defer them). Each differentiated layer `@L` becomes three
    layers: `@L.F` (forward; also yields, stacked per instance, the
    activations the backward needs), `@L.B` (run in reverse; yields the input
    gradient and the result gradients W needs) and `@L.W` (yields the
    parameter gradients). The training step therefore stays independent of
    depth.

    With `recompute=full`, `@L.F` saves only the layer's inputs and `@L.B`
    re-runs the forward ops before its own; with `recompute=selective`,
    only ops marked `SelectivelyRecomputed` (the attention core) are re-run.
    The gradients are the same; the saved activations are smaller.

    In a function split by `braid-pipeline-split`, every new op carries the
    `braid.chunk` of the forward op it differentiates, so each chunk's B and
    W stay with its F.

    Gradient results carry `braid.gradient_of`: the parameter's full name,
    or for a layer parameter a pattern such as `h.{}.fc.weight` whose `{}`
    is the instance; such results are stacked over the instances listed in
    `braid.instances = array<i64: first, count>`.

    Before:
    ```mlir
    func.func @forward(%x: tensor<4x8xf32>, %y: tensor<4xi32>) -> tensor<f32> {
      %w = braid.param "w" {init = #braid.init<normal(0.1)>} : tensor<8x10xf32>
      %l = braid.matmul %x, %w : (tensor<4x8xf32>, tensor<8x10xf32>) -> tensor<4x10xf32>
      %loss = braid.cross_entropy %l, %y : (tensor<4x10xf32>, tensor<4xi32>) -> tensor<f32>
      return %loss : tensor<f32>
    }
    ```
    After (abridged):
    ```mlir
    func.func @forward_grad(%x: ..., %y: ...)
        -> (tensor<f32>, tensor<8x10xf32> {braid.gradient_of = "w"}) {
      %w = braid.param "w" ... {braid.phase = "F"}
      %l = braid.matmul %x, %w {braid.phase = "F"}
      %loss = braid.cross_entropy %l, %y {braid.phase = "F"}
      %one = braid.constant dense<1.0> : tensor<f32> {braid.phase = "B"}
      %dl = braid.cross_entropy_grad %l, %y, %one {braid.phase = "B"}
      %dw = braid.matmul %x, %dl {braid.phase = "W", transpose_a}
      return %loss, %dw
    }
    ```
  }];
  let options = [
    Option<"entry", "entry", "std::string", /*default=*/"\"forward\"",
           "The function to differentiate (its first result is the loss).">,
    Option<"recompute", "recompute", "std::string", /*default=*/"\"none\"",
           "Activation recomputation in layers: none (save what the "
           "backward needs), full (save each layer's inputs and recompute "
           "its forward in B) or selective (recompute only the attention "
           "core).">,
    Option<"wrtArguments", "wrt-arguments", "bool", /*default=*/"false",
           "Also return gradients of the floating-point arguments "
           "(braid.gradient_of = \"arg:<name>\").">,
  ];
  let dependentDialects = ["::mlir::braid::BraidDialect",
                           "::mlir::func::FuncDialect"];
}

def TrainStepPass : Pass<"braid-train-step", "::mlir::ModuleOp"> {
  let summary = "Builds the training step: gradient accumulation, clipping, "
                "learning-rate schedule and optimizer update.";
  let description = [{
    From `<entry>_grad` (made by `braid-autodiff`), adds
    `@train_step(batch..., %step) -> (loss, lr, grad_norm)`:

    1. With `accumulation = k > 1`, every batch argument gains a leading
       dimension of size k, and the gradient function runs once per
       micro-batch (a `braid.repeat` without prefix, so all micro-batches
       share the parameters); loss and gradients are averaged, which for a
       mean loss over equal micro-batches is the update of one step on the
       whole batch. With `defer-w`, the F and B ops of every micro-batch run
       first and all W ops after them (the reordering zero-bubble pipeline
       schedules rely on), with identical results. With `pipeline`, the
       micro-batches go through `braid.pipeline @<entry>_grad` instead:
       the gradient function stays a function that
       `braid-pipeline-outline` and `braid-pipeline-schedule` turn into a
       scheduled pipeline (run them after this pass, or before it: a
       gradient function that already carries a `braid.schedule` is
       always called through `braid.pipeline`, with k defaulting to the
       schedule's micro-batch count).
    2. The global gradient norm is computed; with `clip-norm > 0` every
       gradient is scaled by `min(1, clip-norm / (norm + 1e-6))`.
    3. The learning rate of `%step` follows `braid.lr_schedule` (linear
       warm-up, then constant, linear or cosine decay). With
       `lr-reference-batch = N`, `lr` and `min-lr` are first scaled by
       global batch / N (the linear scaling rule of Goyal et al. 2017),
       where the global batch is k times the size of the leading dimension
       of the first batch argument.
    4. Every parameter is updated by `braid.adamw_update` or
       `braid.sgd_update` and written back with `braid.store_param`;
       optimizer state lives in `braid.param ... {state}` tensors named
       `<param>.adamw.m`, `<param>.adamw.v` or `<param>.sgd.momentum`
       (zeros initially). Parameters of repeated layers are updated by a
       `braid.repeat` over the same instances.

    Run `braid-eval --steps N` on the result to train.
  }];
  let options = [
    Option<"entry", "entry", "std::string", /*default=*/"\"forward\"",
           "The differentiated function (uses @<entry>_grad).">,
    Option<"optimizer", "optimizer", "std::string", /*default=*/"\"adamw\"",
           "adamw or sgd.">,
    Option<"lr", "lr", "double", /*default=*/"3.0e-4", "Peak learning rate.">,
    Option<"minLr", "min-lr", "double", /*default=*/"0.0",
           "Learning rate at the end of the decay.">,
    Option<"warmupSteps", "warmup-steps", "int64_t", /*default=*/"0",
           "Steps of linear warm-up.">,
    Option<"totalSteps", "total-steps", "int64_t", /*default=*/"1",
           "Steps over which the learning rate decays (including warm-up).">,
    Option<"decay", "decay", "std::string", /*default=*/"\"constant\"",
           "Decay after warm-up: constant, linear or cosine.">,
    Option<"beta1", "beta1", "double", /*default=*/"0.9", "AdamW beta1.">,
    Option<"beta2", "beta2", "double", /*default=*/"0.999", "AdamW beta2.">,
    Option<"epsilon", "epsilon", "double", /*default=*/"1.0e-8",
           "AdamW epsilon.">,
    Option<"weightDecay", "weight-decay", "double", /*default=*/"-1.0",
           "Weight decay (default: 0.01 for adamw, 0 for sgd).">,
    Option<"momentum", "momentum", "double", /*default=*/"0.0",
           "SGD momentum.">,
    Option<"nesterov", "nesterov", "bool", /*default=*/"false",
           "SGD with Nesterov momentum.">,
    Option<"clipNorm", "clip-norm", "double", /*default=*/"0.0",
           "Global gradient-norm clipping threshold (0: off).">,
    Option<"accumulation", "accumulation", "int64_t", /*default=*/"1",
           "Micro-batches per step (gradient accumulation).">,
    Option<"deferW", "defer-w", "bool", /*default=*/"false",
           "Run every micro-batch's W ops after all F and B ops.">,
    Option<"pipeline", "pipeline", "bool", /*default=*/"false",
           "Run the micro-batches through braid.pipeline (for pipeline "
           "parallelism).">,
    Option<"lrReferenceBatch", "lr-reference-batch", "int64_t",
           /*default=*/"0",
           "Scale the learning rate by global batch / this (0: off).">,
    Option<"postValidate", "post-validate", "bool", /*default=*/"false",
           "Update optimistically (unclipped) before the gradient norm is "
           "known, then keep the update or roll it back and redo it with "
           "the clipping scale, or skip it (non-finite).">,
    Option<"deferValidation", "defer-validation", "bool", /*default=*/"false",
           "Validate each step's optimistic update in the next call, after "
           "its forward and backward pass (@train_step gains the inputs "
           "previous_step and final and the results previous_grad_norm and "
           "retry).">,
  ];
  let dependentDialects = ["::mlir::braid::BraidDialect",
                           "::mlir::func::FuncDialect"];
}

def CostReportPass : Pass<"braid-cost-report", "::mlir::ModuleOp"> {
  let summary = "Prints per-layer F, B and W FLOPs and saved activation "
                "memory of a gradient function.";
  let description = [{
    For `@<entry>_grad` (made by `braid-autodiff`), prints one row per
    repeated layer and one for the ops outside layers: the number of
    instances, the matrix-product FLOPs per instance of each phase (F, B,
    W), all FLOPs per instance, and the bytes of activations F saves for the
    backward per instance (what recomputation reduces). Counts come from
    `CostOpInterface`. The IR is unchanged.

    ```
    $ braid-opt model.mlir --braid-autodiff --braid-cost-report -o /dev/null
    ```
  }];
  let options = [
    Option<"entry", "entry", "std::string", /*default=*/"\"forward\"",
           "The differentiated function (reports on @<entry>_grad).">,
  ];
}

def PropagateShardingPass : Pass<"braid-propagate-sharding", "::mlir::ModuleOp"> {
  let summary = "Gives every value a sharding from a few annotations.";
  let description = [{
    Starting from `braid.sharding` argument attributes and `braid.shard`
    constraints, moves shardings through ops along the factors of their
    `ShardingRuleOpInterface` rules, forwards and backwards until nothing
    changes, then makes every value still unknown replicated: the result is
    total and never depends on iteration order beyond program order, so it
    is deterministic. Where a factor gets different shardings from
    different tensors, the one with the higher priority wins, then the one
    of the larger tensor (moving it would cost more), then the first
    operand. A sharding is dropped where its dimension is not divisible or
    its axes are taken by another factor of the op. Layers repeated by
    `braid.repeat` are propagated once, with the carried values' sharding.

    Every op gets `braid.shardings` (one per result) and every function
    argument `braid.sharding`. With `print-provenance`, a remark on each op
    says where each result's sharding came from.
  }];
  let options = [
    Option<"printProvenance", "print-provenance", "bool", /*default=*/"false",
           "Report, for every op, why each result got its sharding.">,
  ];
}

def PartitionPass : Pass<"braid-partition", "::mlir::ModuleOp"> {
  let summary = "Rewrites sharded functions into the program each device runs.";
  let description = [{
    After `braid-propagate-sharding`, rewrites every function in place into
    its per-device (SPMD) form: tensors get their local shapes, parameters
    read their blocks (`block_of`), and where an op needs its operands
    sharded differently from how they are, collectives are inserted. An op
    whose reduction factor (a matmul's contraction, a mean over a sharded
    batch) is sharded leaves a pending partial sum, resolved only where a
    consumer needs it: by a reduce_scatter when the consumer wants the
    summed axes on one dimension, by an all_reduce otherwise. Means are
    scaled by each device's share first.

    Resharding, in order: pending sums are resolved; dimensions sharded
    differently are gathered (all_gather); dimensions the consumer wants
    sharded are sliced locally (all_slice, no communication). Function
    results are made replicated unless they carry `braid.sharding`; the
    results and arguments of the rewritten function carry `braid.block_of`,
    so `braid-eval --mesh` can run it and assemble whole tensors.

    Megatron's MLP (column- then row-parallel) thus gets exactly one
    all_reduce, and data parallelism none in the forward pass.
  }];
}

def ShardPass : Pass<"braid-shard", "::mlir::ModuleOp"> {
  let summary = "Applies the standard data- and tensor-parallel annotations "
                "found in the program's structure.";
  let description = [{
    A convenience planner: adds `braid.mesh @mesh` with axes `dp` and `tp`,
    splits the leading (batch) dimension of every function argument over
    `dp`, and applies Megatron-LM's tensor parallelism where the forward
    program's dataflow calls for it, whatever the parameters are called
    (`TensorParallelPlan.h`). Inside each layer and function, the output
    features of a matmul whose weight is a parameter are followed through
    the ops' sharding rules:

    - if they reach a second matmul that sums over them against another
      weight, only through ops that keep them parallel (elementwise ops,
      reshapes into heads, attention over heads, SwiGLU's product), the
      pair is split Megatron's way: the first weight column-parallel (its
      output dimension over `tp`), with every parameter applied along that
      dimension on the way (its bias); the second row-parallel (its
      contracted dimension over `tp`, its bias whole). GPT's
      `attn.{q,k,v}`/`attn.proj` and `mlp.fc`/`mlp.proj`, Llama's
      `q,k,v_proj`/`o_proj` and `gate,up_proj`/`down_proj` are such pairs;
    - if the way to the second matmul goes through slices that each take
      one of b equal blocks of them (a fused q/k/v projection: nanoGPT's
      `c_attn`, `nn.MultiheadAttention`'s `in_proj`), the first weight and
      its bias are split strided over the b blocks (`#braid.sharding`'s
      `blocks`), so that each device holds its heads of q, of k and of v;
    - if they reach a loss that splits its vocabulary cooperatively
      (`braid.cross_entropy`), the weight is the LM head: vocabulary
      parallel, with its bias;
    - if they reach an op that needs them whole or reduces them (a
      normalisation, a softmax over them), the weight stays whole.

    A table whose rows integer ids look up (`braid.embedding`) is split
    along its rows (the vocabulary). The vocabulary splits are dropped
    where `tp` does not divide it; a tied table and head is split once.
    Optimizer state follows the parameter its update op combines it with.
    `explain` prints, as a remark on each parameter, what was decided and
    why.

    With `sp`, each layer's input (the residual stream, `[batch, sequence,
    hidden]`) is split along the sequence over `tp`, weaker than the tensor
    parallel splits: the layer-norm and residual regions run on a share of
    the sequence and an all_gather along the sequence precedes each block.
    (The block's pending sum is still resolved by an all_reduce and then
    cut locally, not yet by Megatron's reduce_scatter: propagation does not
    yet carry the sequence split backwards through the bias add.)

    With `zero = 1` or `2` (ZeRO over `dp`), optimizer state (`braid.param
    ... {state}`) is split over `dp` along its first dimension that `dp`
    divides and `tp` does not split; the update then runs on each device's
    share: gradients arrive by reduce_scatter and updated parameters leave
    by all_gather, in place of one all_reduce. (Stages 1 and 2 differ in
    how long full gradients live, not in the communication the partitioner
    emits.) With `zero = 3`, parameters are split the same way too, and are
    all_gathered where the forward and the backward use them.

    Everything else follows by `braid-propagate-sharding`. Annotations
    already in the IR are kept and take precedence (the planner's are
    priority -1). A dimension not divisible by its axis is an error naming
    the parameter, never a silently replicated tensor.

    ```
    braid-opt gpt.mlir --braid-shard="dp=2 tp=2 zero=2" --braid-propagate-sharding --braid-partition
    ```
  }];
  let options = [
    Option<"dp", "dp", "int64_t", /*default=*/"1", "Data-parallel degree.">,
    Option<"tp", "tp", "int64_t", /*default=*/"1", "Tensor-parallel degree.">,
    Option<"zero", "zero", "int64_t", /*default=*/"0",
           "ZeRO stage over dp: 0 (off), 1, 2 or 3.">,
    Option<"sp", "sp", "bool", /*default=*/"false",
           "Sequence parallelism: split the sequence dimension of every "
           "layer's input over tp (Korthikanti et al. 2022).">,
    Option<"explain", "explain", "bool", /*default=*/"false",
           "Explain the tensor-parallel plan: a remark on each parameter "
           "saying how tp splits it and why.">,
  ];
}

def AsyncCollectivesPass : Pass<"braid-async-collectives", "::mlir::ModuleOp"> {
  let summary = "Splits collectives into start and wait so that independent "
                "work overlaps communication.";
  let description = [{
    Replaces every collective that has an asynchronous form (`all_reduce`,
    `all_gather`, `reduce_scatter`, `all_to_all`, `broadcast_from`: those
    whose `CollectiveOpInterface::createStart` builds a `<collective>_start`)
    by that start op where the collective was, and a `braid.wait` right
    before the first op of the same block that uses the result (before the
    terminator if none does). The ops in
    between run while the data moves. Attributes (cause, phase, chunk)
    carry over to both. Run it on per-device programs, after
    `braid-partition`; the result computes exactly what the input does.

    ```mlir
    %y = braid.all_reduce sum %x on @mesh ["tp"] : tensor<8x64xf32>
    %h = braid.matmul %a, %b ...
    %z = braid.add %y, %h ...
    // becomes
    %f = braid.all_reduce_start sum %x on @mesh ["tp"] : tensor<8x64xf32> -> !braid.future<tensor<8x64xf32>>
    %h = braid.matmul %a, %b ...
    %y = braid.wait %f : !braid.future<tensor<8x64xf32>>
    %z = braid.add %y, %h ...
    ```
  }];
  let dependentDialects = ["::mlir::braid::BraidDialect"];
}

def Zero3PrefetchPass : Pass<"braid-zero3-prefetch", "::mlir::ModuleOp"> {
  let summary = "Starts ZeRO-3 parameter gathers ahead of their use.";
  let description = [{
    Under ZeRO-3 each parameter is stored as a share and all_gathered just
    before the op that uses it, so the transfer hides behind nothing. In
    every function and layer body, this pass groups the all_gathers of
    parameter shares (`braid.param` results) by the op that first needs
    them, in the order of need (a backward layer needs them in reverse
    layer order, so it is prefetched in that order), and starts group k
    right before the op that consumes group k - `depth` (the first `depth`
    groups at the top of the block), waiting for each right before its
    first use. So the next groups' parameters move while the current
    group's op computes, and at most `depth` gathers of a block are in
    flight at any point (each holding a whole parameter). Blocking gathers
    become their started form; a read is not moved above a store of its
    parameter. `depth = 0` changes nothing. The result computes exactly
    what the input does. Run it on per-device programs, after
    `braid-partition`.

    ```mlir
    %a = braid.param "ln.weight" {block_of = ...} : tensor<8xf32>
    %ga = braid.all_gather %a on @mesh ["dp"] {dim = 0 : i64} ...
    %x = braid.layer_norm %in, %ga, ...
    %w = braid.param "fc.weight" {block_of = ...} : tensor<8x64xf32>
    %gw = braid.all_gather %w on @mesh ["dp"] {dim = 0 : i64} ...
    %y = braid.matmul %x, %gw ...
    // becomes (depth = 1)
    %a = braid.param "ln.weight" ...
    %fa = braid.all_gather_start %a ...
    %ga = braid.wait %fa ...
    %w = braid.param "fc.weight" ...
    %fw = braid.all_gather_start %w ...   // moves during the layer norm
    %x = braid.layer_norm %in, %ga, ...
    %gw = braid.wait %fw ...
    %y = braid.matmul %x, %gw ...
    ```

    With `across-repeats`, gathers cross a repeated layer's instances:
    the layer's first `depth` groups are started by the instance before,
    reading the next instance's share (`braid.param` marked
    `braid.next_instance`) right before the op that consumes group
    `m + j - depth` of its `m` groups, and carried into the next instance
    as futures (the repeat's carried operands), which waits for them where
    it did; the first instance's start before the repeat, placed among the
    enclosing block's groups. Without it, gathers do not cross a block: a
    repeated layer's first gathers are not started by the previous
    instance.

    A bucket of `braid-bucket-gathers` (an all_gather of the concatenation
    of several shares) is one group, its reads, reshapes and concatenation
    moving with its start. It does not cross instances (its input is a
    temporary of the instance): a layer whose first `depth` groups include
    one keeps its gathers in its instances, with a warning; braidc runs
    `braid-bucket-gathers` with `leave-first` = depth so that those groups
    stay single gathers.
  }];
  let options = [
    Option<"depth", "depth", "int64_t", /*default=*/"1",
           "Parameter groups gathered ahead of the one in use (0: just in "
           "time).">,
    Option<"acrossRepeats", "across-repeats", "bool", /*default=*/"false",
           "Start a repeated layer's first groups in the instance before, "
           "carried into the next as futures (the first instance's before "
           "the repeat).">,
  ];
  let dependentDialects = ["::mlir::braid::BraidDialect"];
}

def ScheduleCollectivesPass : Pass<"braid-schedule-collectives", "::mlir::ModuleOp"> {
  let summary = "Moves collective starts as early as their operands allow and "
                "waits as late as their uses allow.";
  let description = [{
    `braid-async-collectives` starts each collective where it was, often
    right after compute it does not depend on, so little overlaps. This pass
    reorders every block (functions, layer bodies, pipeline pieces) as a
    list schedule of its dataflow graph: a `<collective>_start` is placed as
    soon as its operand is computed, pulling the pure ops (and parameter
    reads, and repeats of layers that only compute) that produce it ahead
    of independent work, but never another `braid.repeat`, a pipeline, a
    wait or an optimizer update (InPlaceOpInterface's
    mayUpdateParameterSlot): a start that needs one of those is placed
    right after it; a `braid.wait`, and the pure ops
    that use its result, are placed only when an op that keeps its place (a
    repeat, a `braid.store_param`, a collective, the terminator) needs them.
    So a start crosses whole layers (`braid.repeat`) when its operand does
    not depend on them: the head's gradient all_reduces overlap the layers'
    backward. Ops that read or write parameters keep their order, and no
    start or wait whose operand may share a parameter's buffer (a parameter
    read or a view of one) crosses an op that may write a parameter (a
    started all_gather reads its operand until the wait); others do: the
    gradient norm's all_reduce of post-validate overlaps the optimistic
    updates. Starts ready at the same point go in the order their results
    are first needed (earliest deadline first), not in program order. At
    most `max-in-flight` collectives are started early and not yet waited
    for (the most urgent get the slots); a start beyond that stays where it
    was.

    A wait inside a layer body would hold each instance of a repeat until
    its own collective is done. So first (option `across-repeats`), a layer
    that only repeats use is split at the waits of its reductions
    (all_reduce, reduce_scatter) whose results, through pure ops, only its
    stacked results need: the layer yields the future, its repeat returns
    the future of the stack (one collective per instance), and the wait and
    a repeat of the new layer `<name>.waited` holding the ops after the
    wait follow the repeat. A data-parallel layer's gradient bucket then
    stays in flight while the following instances compute its neighbours'
    gradients. A repeat of `count` instances counts as `count` collectives
    in flight (and starts moved early before it leave room for them); a
    layer is split at no more waits than `max-in-flight` allows.

    In a pipelined step, the data-parallel reductions of the gradients a
    `braid.pipeline` returns (moved out of the pieces by
    `braid-pipeline-outline`, bucketed per chunk) depend on the whole
    pipeline op, so no reordering can start them before it ends. With
    `into-pipelines`, every start that the schedule placed right after a
    pipeline, on its results through pure ops only (a bucket's reshapes
    and concat), is marked `braid.start_in_pipeline`: the generated code
    issues it, with those pure ops, inside the pipeline, on the stage that
    computes its operands, as soon as their last micro-batch is
    accumulated (after the last W action producing them), so it is in
    flight while the stage runs its remaining actions; it is waited for
    where the schedule put the wait. The mark changes no value (braid-eval
    ignores it); the starts it marks were already counted in flight.

    Only the order changes, so results are bit-identical. Collectives are
    recognised through `CollectiveOpInterface`.

    ```mlir
    %g = braid.reduce sum %dw ...
    %y = braid.repeat @block.B(...)          // does not use %g
    %f = braid.all_reduce_start sum %g ...
    %n = braid.wait %f ...
    // becomes
    %g = braid.reduce sum %dw ...
    %f = braid.all_reduce_start sum %g ...   // overlaps the layers
    %y = braid.repeat @block.B(...)
    %n = braid.wait %f ...
    ```

    Splitting a layer at its wait:

    ```mlir
    braid.layer @block.W(...) -> tensor<96xf32> {
      %f = braid.all_reduce_start sum %g ...
      %r = braid.wait %f ...
      %s = braid.slice %r ...
      braid.yield %s
    }
    %dw = braid.repeat @block.W(...) {count = 4 : i64, carried = 0 : i64}
    // becomes
    braid.layer @block.W(...) -> !braid.future<tensor<128xf32>> {
      %f = braid.all_reduce_start sum %g ...
      braid.yield %f
    }
    braid.layer @block.W.waited(%r: tensor<128xf32>) -> tensor<96xf32> {
      %s = braid.slice %r ...
      braid.yield %s
    }
    %f = braid.repeat @block.W(...) ... -> !braid.future<tensor<4x128xf32>>
    %r = braid.wait %f : !braid.future<tensor<4x128xf32>>
    %dw = braid.repeat @block.W.waited(%r) {count = 4 : i64, carried = 0 : i64}
    ```
  }];
  let options = [
    Option<"maxInFlight", "max-in-flight", "int64_t", /*default=*/"8",
           "Collectives started early and not yet waited for, at most "
           "(a start beyond that stays where it was).">,
    Option<"acrossRepeats", "across-repeats", "bool", /*default=*/"true",
           "Split layers at the waits of their reductions, so that each "
           "instance's collective stays in flight after it, until after the "
           "repeat.">,
    Option<"intoPipelines", "into-pipelines", "bool", /*default=*/"true",
           "Mark the starts placed right after a braid.pipeline on its "
           "results (braid.start_in_pipeline): generated code issues each "
           "inside the pipeline, once the stage has run the last W action "
           "producing its operand.">,
  ];
  let dependentDialects = ["::mlir::braid::BraidDialect"];
}

def BucketCollectivesPass : Pass<"braid-bucket-collectives", "::mlir::ModuleOp"> {
  let summary = "Fuses consecutive gradient reductions of small tensors into buckets.";
  let description = [{
    After `braid-partition`, a data-parallel program reduces each gradient
    with its own `braid.all_reduce` (or, under ZeRO, `braid.reduce_scatter`):
    a layer with 16 parameters sends 16 messages, most of them a few
    hundred bytes, each paying the latency. This pass fuses the
    all_reduces of a block over one group (same mesh, axes and reduction,
    f32, blocking) into one over the concatenation of their flattened inputs, up
    to `bucket-mb` megabytes per bucket (as PyTorch DDP's `bucket_cap_mb`,
    default 25), then slices each result back out:

    ```mlir
    %f = braid.concat %a', %b' ...   // each input reshaped to rank 1
    %r = braid.all_reduce sum %f on @mesh ["dp"] {braid.bucket = 2 : i64}
    %a2 = braid.slice %r ...         // reshaped back
    ```

    Consecutive reduce_scatters over one group are fused likewise into one
    whose block for each group position is the concatenation of the
    members' blocks for it: each input is viewed as [n, block] (reshaped;
    transposed first when a dimension of size > 1 precedes the scattered
    one), the views are concatenated along dimension 1 and
    flattened, and each member's result is its slice of the fused block.
    Each kind and group fills a bucket of its own, so an all_reduce
    between reduce_scatters, or one over dp and tp between those over dp,
    does not end theirs.

    A bucket closes at an op in between that needs the result of one of
    its members and cannot wait (an op with side effects, a collective
    that communicates, a repeat, the terminator; an `all_slice` moves no
    data and waits), so every use still sees the reduced value; a
    side-effect free op that needs earlier members' results (the gradient
    norm's sum_squares of each reduced gradient) does not close it, but
    moves, with the side-effect free ops that depend on it, below the
    fused collective, which takes the place of the last member. Element-wise sums over
    the same group are unchanged by the fusion. `bucket-mb=0` turns it off.
  }];
  let options = [
    Option<"bucketMb", "bucket-mb", "double", /*default=*/"25.0",
           "Largest bucket, in megabytes (2^20 bytes); 0: no bucketing.">,
  ];
}

def BucketGathersPass : Pass<"braid-bucket-gathers", "::mlir::ModuleOp"> {
  let summary = "Fuses a block's ZeRO-3 parameter gathers into buckets.";
  let description = [{
    Under ZeRO-3 `braid-partition` all_gathers each parameter share right
    before the op that uses it: a layer with 16 parameters gathers 16
    times, each call paying the latency. As FSDP gathers one flat
    parameter per wrapped unit, this pass fuses the all_gathers of
    parameter shares (`braid.param` results, directly or through
    sharding-transparent ops such as bf16-mixed's working-copy
    `braid.convert`) of a block that follow one another (same mesh, axes,
    element type, pipeline phase and chunk, blocking) into one all_gather
    along dimension 0 of the concatenation of their flattened shares, up
    to `bucket-mb` megabytes of gathered parameters per bucket (the cap of
    `braid-bucket-collectives`, braidc's `--bucket-mb`), at the first
    member; the later members' reads (with their working-copy ops) move up
    to it. Each element type fills its own bucket, so that bf16-mixed's f32
    norm parameters between bf16 working copies do not end one. Each member's full tensor is taken from the fused result where
    the member was:

    ```mlir
    %f = braid.concat %a', %b' ...          // each share reshaped to rank 1
    %g = braid.all_gather %f on @mesh ["dp"] {braid.bucket = 2 : i64, dim = 0 : i64}
    %rows = braid.reshape %g ...            // [n, total]: a row per device
    %a2 = braid.slice %rows ...             // [n, a's share], reshaped back
    ```

    A member gathered along a dimension preceded by one of size > 1 (a
    share [outer, m, rest]) has its piece [n, outer * m * rest] reshaped to
    [n, outer, m * rest], transposed to [outer, n, m * rest] and reshaped to
    its full shape. Gathers are copies, so the result is exact. A bucket
    holds its parameters gathered from the fused gather to its last
    member's use: the peak memory of a block grows to a bucket's worth.

    A bucket closes at a store of a parameter and at a repeat, pipeline,
    call or op with regions (its body would run holding the bucket, and
    may store parameters), so the gathers before and after a repeated
    layer are separate buckets. With
    `leave-first` = N, in a layer only repeats use, the gathers of the
    first N ops that need parameters stay single when they gather the
    share itself: `braid-zero3-prefetch` across-repeats (depth N) starts
    those in the instance before, which it cannot do for a bucket (its
    input is a concatenation, a temporary of the instance). braidc passes
    its `--zero3-prefetch`. `bucket-mb=0` turns the pass off.
  }];
  let options = [
    Option<"bucketMb", "bucket-mb", "double", /*default=*/"25.0",
           "Largest bucket, in megabytes (2^20 bytes) of gathered "
           "parameters; 0: no bucketing.">,
    Option<"leaveFirst", "leave-first", "int64_t", /*default=*/"0",
           "In a repeated layer, the first N parameter groups (by the op "
           "that needs them) stay single for braid-zero3-prefetch "
           "across-repeats.">,
  ];
}

def CompressGradientsPass : Pass<"braid-compress-gradients", "::mlir::ModuleOp"> {
  let summary = "Sends data-parallel gradient reductions as bf16 or fp16, "
                "accumulated in f32.";
  let description = [{
    Marks every `all_reduce` and `reduce_scatter` (blocking or started) that
    sums an f32 tensor of rank 1 or more over data-parallel axes only (the
    gradient reductions of a partitioned training step) with
    `braid.compress = "bf16"` (or `"fp16"`):

    ```mlir
    %g = braid.all_reduce sum %x on @mesh ["dp"] {braid.compress = "bf16"} : tensor<64x32xf32>
    ```

    The lowering calls the runtime's `braid_rt_all_reduce_sum_f32_as_bf16`
    (`reduce_scatter` likewise): a ring in which each hop rounds the partial
    sum it sends to 16 bits, to nearest even, and the receiver adds it to
    its own f32 values; the all_reduce rounds the finished sum once more so
    that every device gets the same bits. Half the bytes on the wire;
    `braid-comm-report` counts 2 bytes per element and prints the bytes
    saved. Rank-0 sums (the loss, the norm's sums of squares) and
    tensor-parallel collectives are left exact. `braid-eval` ignores the
    attribute (it reduces exactly). Run it after `braid-partition` and
    before `braid-bucket-collectives`, which buckets only collectives
    marked alike.

    `format=powersgd rank=R` marks instead the all_reduces and
    reduce_scatters (ZeRO's: each device keeps its share of the
    approximation) of 2-D gradients, and of stacked ones (a pipeline's
    per-chunk layer gradients), each matrix of the batch on its own
    (`braid.compress = "powersgd"`, `braid.powersgd = {rank, q, error}`),
    and reads their state first in their block (so that no later
    reordering, such as a scheduled start, runs a reduction before its
    state is read): `powersgd.<owner>.<k>.q`
    ([..., cols, R], the warm start, normal(1)) and `.error` (this device's
    error feedback, zeros), both `state` params, so checkpoints keep them.
    The shapes are the local block's (a tensor-parallel weight's gradient
    is its tp block): the error is this device's block of a tensor split
    over every mesh axis of more than one device, Q its block of one split
    over the axes other than the reduction's (replicated on a dp mesh).
    `<owner>` is the enclosing layer or function, and a repeated layer's
    instances each have their own. The lowering calls the runtime's
    PowerSGD (`braid_rt_powersgd_all_reduce_f32`, per matrix); other
    gradients stay exact and PowerSGD reductions are never bucketed.
  }];
  let options = [
    Option<"format", "format", "std::string", /*default=*/"\"bf16\"",
           "The wire format: bf16 or fp16; or powersgd.">,
    Option<"rank", "rank", "int64_t", /*default=*/"4",
           "With powersgd: the rank of the approximation.">,
    ListOption<"axes", "axes", "std::string",
               "The data-parallel mesh axes (default: dp).">,
  ];
}

def CommReportPass : Pass<"braid-comm-report", "::mlir::ModuleOp"> {
  let summary = "Lists every collective of a partitioned program with its "
                "cause, volume and estimated time.";
  let description = [{
    For each function after `braid-partition`, prints every collective (in
    the function and, once per instance, in the layers it repeats): kind,
    mesh axes, group size n, message size S per device, the bytes each
    device sends under a ring algorithm, the estimated time under the α-β
    model, how many times it runs, and its cause (the op whose operand
    needed it, recorded by the partitioner as `braid.cause`). Then the
    totals per function, phase and mesh axis. Ring model:

    - all_reduce: 2(n-1)α + 2(n-1)/n · S/β, sending 2(n-1)/n · S;
    - all_gather, reduce_scatter, all_to_all: (n-1)α + (n-1)/n · S/β,
      sending (n-1)/n · S (S the larger of input and output);
    - broadcast_from: (n-1)α + S/β (pipelined chain);
    - all_slice: no communication.

    The asynchronous forms (`<collective>_start`) are listed as their
    collective, with `[async]` before the cause. Kinds, groups and the ring
    model come from `CollectiveOpInterface`.

    ```
    braid-opt gpt.mlir --braid-shard="tp=8" --braid-propagate-sharding \
        --braid-partition --braid-comm-report=bandwidth=150e9 -o /dev/null
    ```
  }];
  let options = [
    Option<"alpha", "alpha", "double", /*default=*/"5.0e-6",
           "Latency per message step, in seconds.">,
    Option<"bandwidth", "bandwidth", "double", /*default=*/"100.0e9",
           "Link bandwidth, in bytes per second.">,
  ];
}

def PipelineSplitPass : Pass<"braid-pipeline-split", "::mlir::ModuleOp"> {
  let summary = "Assigns the layers of a forward function to pipeline stages "
                "(p stages, or p*v chunks).";
  let description = [{
    Splits the forward function `entry` (before `braid-autodiff`) into
    `stages * chunks` consecutive pieces ("chunks") and marks every op with
    the chunk that runs it (`braid.chunk`). The units it places are the
    instances of every `braid.repeat` and the runs of ops between repeats
    (the embedding before the first, the head and loss after the last), so
    the embedding and the LM head count like layers.

    By default the split minimises the largest chunk's forward FLOPs
    (`CostOpInterface`), with any number of layer instances per chunk, so
    a split is uneven where that balances better. `layers=a,b,...` gives the
    number of layer instances of each chunk instead (the ops before the
    first layer go to chunk 0, the ops after the last to the last chunk);
    every instance must be placed exactly once. A count may be 0 where the
    chunk still runs something: chunk 0 then holds only the ops before the
    first layer (a GPT's embedding), the last chunk only those after the
    last (the head); a chunk left with nothing is an error.

    A repeat whose instances fall into several chunks becomes one repeat
    per chunk (`first`/`count` keep the instance numbers, so parameter
    names and values do not change and the function computes exactly what
    it did). A parameter goes to the chunk of its first user; a parameter
    used in several chunks (tied embeddings) is listed by `report` under
    each. Chunk `c` runs on stage `c mod p` (`placement=loop`, interleaved
    1F1B) or in a V (`placement=v`, ZB-V: chunk `c < p` on stage `c`,
    `c >= p` on stage `2p-1-c`); the function's `braid.chunk_stages` lists
    the stage of each chunk.

    ```
    $ braid-opt gpt.mlir --braid-pipeline-split="stages=4 report"
    ```
  }];
  let options = [
    Option<"entry", "entry", "std::string", /*default=*/"\"forward\"",
           "The forward function to split.">,
    Option<"stages", "stages", "int64_t", /*default=*/"2",
           "Number of pipeline stages p.">,
    Option<"chunks", "chunks", "int64_t", /*default=*/"1",
           "Model chunks per stage v (p*v pieces in all).">,
    Option<"placement", "placement", "std::string", /*default=*/"\"loop\"",
           "Stage of each chunk: loop (chunk c on stage c mod p) or v "
           "(ZB-V; needs chunks=2).">,
    ListOption<"layers", "layers", "int64_t",
               "Layer instances per chunk, in order (default: balance "
               "forward FLOPs).">,
    Option<"report", "report", "bool", /*default=*/"false",
           "Print each chunk's stage, layers, FLOPs and parameters.">,
  ];
  let dependentDialects = ["::mlir::braid::BraidDialect",
                           "::mlir::func::FuncDialect"];
}

def PipelineOutlinePass : Pass<"braid-pipeline-outline", "::mlir::ModuleOp"> {
  let summary = "Cuts a chunk-split gradient function into one function per "
                "chunk and phase (F, B, W).";
  let description = [{
    For `@<entry>_grad` made by `braid-autodiff` from a function split by
    `braid-pipeline-split` (so every op carries `braid.chunk` and
    `braid.phase`), moves the ops of each (chunk, phase) pair, in program
    order, into a function `@<entry>_grad.c<k>.<F|B|W>` that carries the
    pair as `braid.chunk` / `braid.phase`. Its arguments are the values it
    needs from other pieces (or the batch); its results are the values
    other pieces (or the gradient function's results) need. These are the
    per-chunk programs a pipeline schedule runs, and their arguments and
    results are exactly what stages send and receive. Parameters are read
    in every piece that uses them, never passed; so is an op that reads
    only parameters and has no side effect (bf16-mixed's working copy of a
    tied weight): each piece that uses it gets its own copy.

    `@<entry>_grad` keeps its signature and becomes a driver that calls the
    pieces in dependence order (ties in program order), so it computes
    exactly what it did; a dependence cycle between pieces is an error.

    When every caller of `@<entry>_grad` is a `braid.pipeline`, the sum of
    a tied parameter's partial gradients and the summing all_reduces of the
    gradients it returns move into the callers, after the pipeline (which
    returns means; these ops are linear, so only the order of sums
    changes); an all_reduce a W layer only yields as a stacked result first
    leaves the layer for one of the stacked gradient after each repeat. So
    every data-parallel gradient is reduced once per step, not once per
    micro-batch, and a moved collective keeps its `braid.chunk`.

    ```
    $ braid-opt gpt.mlir --braid-pipeline-split=stages=4 --braid-autodiff \
        --braid-pipeline-outline
    ```
  }];
  let options = [
    Option<"entry", "entry", "std::string", /*default=*/"\"forward\"",
           "The differentiated function (outlines @<entry>_grad).">,
  ];
  let dependentDialects = ["::mlir::braid::BraidDialect",
                           "::mlir::func::FuncDialect"];
}

def PipelineSchedulePass : Pass<"braid-pipeline-schedule", "::mlir::ModuleOp"> {
  let summary = "Attaches a verified pipeline schedule, timed by each "
                "piece's FLOPs, to an outlined gradient function.";
  let description = [{
    For `@<entry>_grad` cut by `braid-pipeline-outline`, generates the
    schedule `schedule` for the stages and chunks that `braid-pipeline-split`
    chose (`braid.chunk_stages` on `@<entry>`) and `microbatches`
    micro-batches, with the times of F, B and W of every chunk taken from
    the FLOPs of its pieces (`CostOpInterface`; relative times, so the
    automatic scheduler sees uneven stages such as the LM head's). The
    schedule, with its sends and receives, is verified (dependences,
    matched point-to-point transfers, no deadlock, memory within
    `mem-limit` for `auto`) and attached to `@<entry>_grad` as
    `braid.schedule = {name, microbatches, ranks = [[actions of rank 0],
    ...]}`. With `report`, prints each rank's actions and the simulated
    bubble rate.

    The schedule must fit the split: `interleaved-1f1b` needs `chunks >= 2`
    in a loop, `zb-v` two chunks in a V, the others one chunk per stage.
    When a training step runs `@<entry>_grad` through `braid.pipeline`
    (`braid-train-step` with `pipeline`), its micro-batch count is the
    default for `microbatches`, and another value is an error.

    ```
    $ braid-opt gpt.mlir --braid-pipeline-split=stages=4 --braid-autodiff \
        --braid-pipeline-outline \
        --braid-pipeline-schedule="schedule=zb-h1 microbatches=8 report"
    ```
  }];
  let options = [
    Option<"entry", "entry", "std::string", /*default=*/"\"forward\"",
           "The split forward function (schedules @<entry>_grad).">,
    Option<"schedule", "schedule", "std::string", /*default=*/"\"1f1b\"",
           "gpipe, 1f1b, interleaved-1f1b, zb-h1, zb-h2, zb-v or auto.">,
    Option<"microbatches", "microbatches", "int64_t", /*default=*/"0",
           "Micro-batches per step m (default: that of the braid.pipeline "
           "calling the gradient function, else the number of stages).">,
    Option<"memLimit", "mem-limit", "double", /*default=*/"0.0",
           "auto only: peak activation memory per rank in micro-batches "
           "(default: p).">,
    Option<"report", "report", "bool", /*default=*/"false",
           "Print the schedule and its simulated bubble rate.">,
  ];
}

def FuseMatmulEpiloguePass
    : Pass<"braid-fuse-matmul-epilogue", "::mlir::ModuleOp"> {
  let summary = "Folds a bias add (and tanh GELU after it) into the matmul.";
  let description = [{
    A `braid.matmul` whose only use is a `braid.add` of a bias over its
    rows (a rank-1 operand of the result's last dimension, broadcast to
    every row; either operand order) becomes one `braid.matmul_bias`, which
    code generation computes as one GEMM with an epilogue (cuBLASLt's
    `CUBLASLT_EPILOGUE_BIAS` on CUDA) instead of a GEMM and an elementwise
    kernel reading and writing the product again. When the add's only use is
    a tanh `braid.gelu`, that joins too (`CUBLASLT_EPILOGUE_GELU_BIAS`:
    cuBLASLt's GELU is the tanh approximation, GPT-2's; exact GELU, with
    erf, is not folded). A GELU whose input is used elsewhere (a training
    step's GELU gradient reads it) stays where it is: the op has one
    result. The matmul's attributes (`braid.bf16_operands`, the phase) are
    kept. The result is the same: the add and the GELU keep their formulas
    and roundings (`braid-eval` computes `braid.matmul_bias` as the three
    ops; the CPU kernel adds the bias and applies the GELU of
    braid/rt/elementwise_math.h to each block of the product as it is
    computed).

    braidc runs it after `braid-legalize-bf16` (under bf16-mixed a bf16
    product is rounded to bf16 before the bias add, so that matmul keeps
    its add) and before `braid-fuse-elementwise`; `braidc
    --no-matmul-epilogue` (or `--no-fuse`) skips it.

    ```mlir
    %xw = braid.matmul %x, %w : (tensor<2x8x32xf32>, tensor<32x128xf32>) -> tensor<2x8x128xf32>
    %fc = braid.add %xw, %b : (tensor<2x8x128xf32>, tensor<128xf32>) -> tensor<2x8x128xf32>
    %h = braid.gelu tanh %fc : tensor<2x8x128xf32>
    // becomes
    %h = braid.matmul_bias %x, %w, %b gelu tanh : (tensor<2x8x32xf32>,
        tensor<32x128xf32>, tensor<128xf32>) -> tensor<2x8x128xf32>
    ```
  }];
  let dependentDialects = ["::mlir::braid::BraidDialect"];
}

def FuseElementwisePass : Pass<"braid-fuse-elementwise", "::mlir::ModuleOp"> {
  let summary = "Groups chains of elementwise ops into braid.fused regions.";
  let description = [{
    Each run of elementwise ops that feed each other and share one result
    shape (a bias add and GELU, a residual add, a scaling, the activation
    gradients of the backward pass) becomes one `braid.fused` op, which
    code generation computes in one loop nest (one `__global__` kernel on
    CUDA) instead of one kernel per op, each reading and writing the whole
    tensor. Results used after the region are the fused op's results; the
    others never reach memory.

    A row-wise op (`layer_norm`, `rms_norm`, their input gradients,
    `softmax` over the last axis, `cross_entropy` and its gradient; see
    `RowReductionOpInterface`) joins the region computing its rows (the residual
    add before a norm, the scaling before a softmax, the gradient sum
    before a norm's gradient), or the region of a loss or loss gradient
    over the same logits (they share the rows' statistics); the elementwise
    ops reading its result join after it. Code generation computes such a
    region a row at a time: the ops before the row-wise op, its reduction
    over the row, its result, the ops after it.

    Ops join greedily in program order, within one block (a function, a
    layer, a pipeline piece): an op joins the region of an operand's
    producer when their result shapes agree, unless an op outside the
    region already uses one of the region's values (the fused op stands
    where its last op was, so such a use would come before its definition).
    The fused program computes the same bits: each op keeps its formula and
    its rounding to f32 (the CPU kernels and the fused loops share
    braid/rt/elementwise_math.h).

    braidc runs it last, just before `braid-lower-to-emitc` (after
    `braid-partition`, pipeline outlining and scheduling, bucketing and
    async collectives): sharding, partitioning, pipelining and the cost and
    communication reports then see only the dialect's ordinary ops, and
    regions never span pipeline pieces or collectives. `braidc --no-fuse`
    skips it. `braid-eval` evaluates `braid.fused` op by op, so a module
    after this pass evaluates as before.

    ```mlir
    %fc = braid.add %xw, %bias : (tensor<2x8x128xf32>, tensor<128xf32>) -> tensor<2x8x128xf32>
    %gelu = braid.gelu tanh %fc : tensor<2x8x128xf32>
    // becomes (%fc is used later, by the backward pass)
    %fc, %gelu = braid.fused (%xw, %bias) : (tensor<2x8x128xf32>, tensor<128xf32>)
        -> (tensor<2x8x128xf32>, tensor<2x8x128xf32>) {
    ^bb0(%a: tensor<2x8x128xf32>, %b: tensor<128xf32>):
      %0 = braid.add %a, %b : (tensor<2x8x128xf32>, tensor<128xf32>) -> tensor<2x8x128xf32>
      %1 = braid.gelu tanh %0 : tensor<2x8x128xf32>
      braid.yield %0, %1 : tensor<2x8x128xf32>, tensor<2x8x128xf32>
    }
    ```
  }];
  let options = [
    Option<"minOps", "min-ops", "int64_t", /*default=*/"2",
           "Fuse only runs of at least this many ops (2; 1 makes every "
           "fusible op a region of its own).">,
  ];
  let dependentDialects = ["::mlir::braid::BraidDialect"];
}

def MixedPrecisionPass : Pass<"braid-mixed-precision", "::mlir::ModuleOp"> {
  let summary = "Makes a forward program bf16 mixed precision: bf16 "
                "activations and matrix products, f32 master weights, norms, "
                "softmax and loss.";
  let description = [{
    With `precision=bf16-mixed`, rewrites a model's forward program (every
    function and layer, before `braid-autodiff`) so that:

    - parameters stay f32 (the master weights the optimizer updates); each
      parameter read that feeds a bf16 op gets one `braid.convert` to bf16
      right after it (the step's working copy);
    - matmul, attention, the elementwise ops and activations, rotary and
      embedding compute in bf16: their floating-point operands are
      converted to bf16 and their results are bf16 (a matmul accumulates
      its products in f32, `braid-eval` in double, and rounds the sum to
      bf16; a linear layer's bias is added to the f32 sum, which is then
      rounded);
    - layer_norm, rms_norm, softmax, cross_entropy, reduce (and any other
      op) compute in f32: bf16 operands are converted to f32 first, so norm
      statistics, softmax sums and the loss are f32;
    - reshape, transpose, broadcast, slice and concat keep their operand's
      type; every float argument and result of a layer is bf16 (the
      activations between layers), a function's signature is unchanged
      (its bf16 results are converted back to f32).

    `braid-autodiff` then derives the backward pass from the ops' own
    gradients: activation gradients are bf16, and each working copy's
    gradient is converted back to f32 for its master weight, so the
    training step's gradient norm, clipping and optimizer state stay f32.
    `precision=f32` (the default) leaves the module unchanged.

    Before:
    ```mlir
    %w = braid.param "w" {init = #braid.init<normal(0.1)>} : tensor<8x10xf32>
    %l = braid.matmul %x, %w : (tensor<4x8xf32>, tensor<8x10xf32>) -> tensor<4x10xf32>
    %loss = braid.cross_entropy %l, %y : (tensor<4x10xf32>, tensor<4xi32>) -> tensor<f32>
    ```
    After:
    ```mlir
    %w = braid.param "w" {init = #braid.init<normal(0.1)>} : tensor<8x10xf32>
    %w16 = braid.convert %w : tensor<8x10xf32> to tensor<8x10xbf16>
    %x16 = braid.convert %x : tensor<4x8xf32> to tensor<4x8xbf16>
    %l = braid.matmul %x16, %w16 : (tensor<4x8xbf16>, tensor<8x10xbf16>) -> tensor<4x10xbf16>
    %l32 = braid.convert %l : tensor<4x10xbf16> to tensor<4x10xf32>
    %loss = braid.cross_entropy %l32, %y : (tensor<4x10xf32>, tensor<4xi32>) -> tensor<f32>
    ```
  }];
  let options = [
    Option<"precision", "precision", "std::string", /*default=*/"\"f32\"",
           "f32 (leave the module unchanged) or bf16-mixed.">,
  ];
  let dependentDialects = ["::mlir::braid::BraidDialect"];
}

def LegalizeBF16Pass : Pass<"braid-legalize-bf16", "::mlir::ModuleOp"> {
  let summary = "Holds bf16 values in f32 with explicit rounding, for kernels "
                "that compute in f32.";
  let description = [{
    Every bf16 tensor becomes an f32 tensor holding bf16 values: each op
    that computed a bf16 result computes it in f32 and is followed by a
    `braid.round` to bf16 (ties to even), so the program computes what the
    bf16 one does, up to an op's own f32 rounding before the bf16 one.
    Ops that only move data (reshape, transpose, broadcast, slice, concat)
    need no rounding; a `braid.convert` to bf16 becomes a `braid.round`,
    one from bf16 to f32 disappears. A `braid.matmul` of two bf16
    operands is marked `braid.bf16_operands`: the lowering calls
    `braid_rt_matmul_bf16in_f32`, a GEMM on bf16 copies of them (exact)
    with f32 sums. braidc runs it before lowering, so
    `--precision bf16-mixed` programs run on the f32 kernels of both
    targets (and that bf16 GEMM); it changes nothing in a module without
    bf16.

    A layer's stacked results that hold bf16 values (bf16, or f32
    converted from bf16) and that only repeats read as stacked operands
    (what a forward saves for its backward) stay bf16 tensors: the layer
    packs each (`braid.convert` to bf16, exact) before its yield, and the
    layers reading them unpack it (`braid.convert` to f32) just before the
    first use. The lowering holds them in `uint16_t` buffers, 2 bytes an
    element. In a scheduled pipeline, a piece's results that hold bf16
    values and that only pieces on the same stage read (F's saved values
    for B and W; with two chunks a stage, what one hands the other) are
    bf16 too: packed by their layers or before the
    piece's return, unpacked by the reading piece or handed on packed to
    its layers; what is sent between stages or averaged stays f32.

    ```mlir
    %y = braid.gelu tanh %x : tensor<4x64xbf16>
    // becomes
    %0 = braid.gelu tanh %x : tensor<4x64xf32>
    %y = braid.round %0 to bf16 : tensor<4x64xf32>
    ```
  }];
  let dependentDialects = ["::mlir::braid::BraidDialect"];
}

#endif // BRAID_DIALECT_BRAID_TRANSFORMS_PASSES_TD
