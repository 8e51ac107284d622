// Tests the collectives of a partitioned GPT training step, counted per
// layer: Megatron's tensor parallelism (tp = 2 and 4) gives exactly one
// all_reduce per block (attention, MLP) in the forward layer and one per
// block in the input-gradient (B) layer, none in W; data parallelism gives
// none in F and B, and one gradient reduction per parameter (16) in W.
// Sequence parallelism (tp = 2) turns each block's all_reduce into an
// all_gather before it and a reduce_scatter after it, in F and in B, with
// or without dp = 2; ZeRO-2
// reduces every gradient with reduce_scatter (only scalars, the loss and
// the gradient norm, are all_reduced). Under tp the vocabulary is split
// too (Megatron's vocab-parallel embedding and cross-entropy): the table is
// never gathered; the embedding's pending sum and the LM head's input
// gradient are the only non-scalar all_reduces of the training step.
//
// RUN: %PYTHON -m braid.models gpt --layers 2 --hidden 32 --heads 4 --seq 8 --vocab 64 --batch 4 -o %t.mlir
// RUN: braid-opt %t.mlir --braid-autodiff --braid-shard="tp=2" --braid-propagate-sharding --braid-partition -o %t.tp2.mlir
// RUN: FileCheck %s --check-prefix=TP < %t.tp2.mlir
// RUN: braid-opt %t.mlir --braid-autodiff --braid-shard="tp=4" --braid-propagate-sharding --braid-partition -o %t.tp4.mlir
// RUN: FileCheck %s --check-prefix=TP < %t.tp4.mlir
// RUN: braid-opt %t.mlir --braid-autodiff --braid-shard="dp=2" --braid-propagate-sharding --braid-partition -o %t.dp2.mlir
// RUN: FileCheck %s --check-prefix=DP < %t.dp2.mlir
// RUN: braid-opt %t.mlir --braid-autodiff --braid-shard="tp=2 sp=true" --braid-propagate-sharding --braid-partition -o %t.sp.mlir
// RUN: FileCheck %s --check-prefix=SP < %t.sp.mlir
// RUN: braid-opt %t.mlir --braid-autodiff --braid-shard="dp=2 tp=2 sp=true" --braid-propagate-sharding --braid-partition -o %t.dp2sp.mlir
// RUN: FileCheck %s --check-prefix=DPSP < %t.dp2sp.mlir
// RUN: braid-opt %t.mlir --braid-autodiff --braid-train-step --braid-shard="dp=2 zero=2" --braid-propagate-sharding --braid-partition -o %t.zero2.mlir
// RUN: FileCheck %s --check-prefix=ZERO2 < %t.zero2.mlir
// RUN: braid-opt %t.mlir --braid-autodiff --braid-train-step --braid-shard="tp=2" --braid-propagate-sharding --braid-partition -o %t.vocab.mlir
// RUN: FileCheck %s --check-prefix=VOCAB < %t.vocab.mlir

// TP-LABEL: braid.layer @block.F
// TP-COUNT-2: braid.all_reduce sum {{.*}} on @mesh ["tp"]
// TP-NOT: braid.all_
// TP-LABEL: braid.layer @block.B
// TP-COUNT-2: braid.all_reduce sum {{.*}} on @mesh ["tp"]
// TP-NOT: braid.all_
// TP-LABEL: braid.layer @block.W
// TP-NOT: braid.all_
// TP: braid.yield

// DP-LABEL: braid.layer @block.F
// DP-NOT: braid.all_
// DP-LABEL: braid.layer @block.B
// DP-NOT: braid.all_
// DP-LABEL: braid.layer @block.W
// DP-COUNT-16: braid.all_reduce sum {{.*}} on @mesh ["dp"]
// DP-NOT: braid.all_
// DP: braid.yield

// SP-LABEL: braid.layer @block.F
// SP-NOT: braid.all_reduce
// SP: braid.all_gather {{.*}} on @mesh ["tp"] {{.*}}dim = 1 : i64
// SP-NOT: braid.all_reduce
// SP: braid.reduce_scatter {{.*}} on @mesh ["tp"] {{.*}}dim = 1 : i64
// SP-NOT: braid.all_reduce
// SP: braid.all_gather {{.*}} on @mesh ["tp"] {{.*}}dim = 1 : i64
// SP-NOT: braid.all_reduce
// SP: braid.reduce_scatter {{.*}} on @mesh ["tp"] {{.*}}dim = 1 : i64
// SP-NOT: braid.all_
// B reduce-scatters each block's input gradient once: the attention's is
// dq + dk + dv, summed while pending and scattered as one.
// SP-LABEL: braid.layer @block.B
// SP-NOT: braid.all_
// SP-NOT: braid.reduce_scatter
// SP: braid.all_gather {{.*}} on @mesh ["tp"] {{.*}}dim = 1 : i64} : (tensor<4x4x32xf32>) -> tensor<4x8x32xf32>
// SP-NOT: braid.all_
// SP-NOT: braid.reduce_scatter
// SP: braid.reduce_scatter {{.*}} on @mesh ["tp"] {{.*}}dim = 1 : i64} : (tensor<4x8x32xf32>) -> tensor<4x4x32xf32>
// SP-NOT: braid.all_
// SP-NOT: braid.reduce_scatter
// SP: braid.all_gather {{.*}} on @mesh ["tp"] {{.*}}dim = 1 : i64} : (tensor<4x4x32xf32>) -> tensor<4x8x32xf32>
// SP-NOT: braid.all_
// SP-NOT: braid.reduce_scatter
// SP: braid.reduce_scatter {{.*}} on @mesh ["tp"] {{.*}}dim = 1 : i64} : (tensor<4x8x32xf32>) -> tensor<4x4x32xf32>
// SP-NOT: braid.all_
// SP-NOT: braid.reduce_scatter
// SP: braid.yield
// The W piece gathers only the saved inputs of the column-parallel
// projections along the sequence; its first argument, the MLP activation,
// keeps its tp split along the hidden dimension (not gathered and sliced).
// SP-LABEL: braid.layer @block.W
// SP-NOT: braid.all_slice
// SP-COUNT-4: braid.all_gather {{.*}} on @mesh ["tp"] {{.*}}dim = 1 : i64} : (tensor<4x4x32xf32>) -> tensor<4x8x32xf32>
// SP-NOT: braid.all_gather
// SP-NOT: braid.all_slice
// SP-COUNT-6: braid.all_reduce sum {{.*}} on @mesh ["tp"] {{.*}} : tensor<32xf32>
// SP-NOT: braid.all_
// SP: braid.yield

// With dp = 2 as well, each block's pieces run the same tp collectives as
// with dp = 1 (the batch split does not shield the sequence and hidden
// dimensions from the tp splits), and W reduces the 16 gradients over dp
// (the layer norms' also over tp, for their sequence shares).
// DPSP-LABEL: braid.layer @block.F
// DPSP-NOT: braid.all_
// DPSP: braid.all_gather {{.*}} on @mesh ["tp"] {{.*}}dim = 1 : i64} : (tensor<2x4x32xf32>) -> tensor<2x8x32xf32>
// DPSP-NOT: braid.all_
// DPSP: braid.reduce_scatter {{.*}} on @mesh ["tp"] {{.*}}dim = 1 : i64} : (tensor<2x8x32xf32>) -> tensor<2x4x32xf32>
// DPSP-NOT: braid.all_
// DPSP: braid.all_gather {{.*}} on @mesh ["tp"] {{.*}}dim = 1 : i64} : (tensor<2x4x32xf32>) -> tensor<2x8x32xf32>
// DPSP-NOT: braid.all_
// DPSP: braid.reduce_scatter {{.*}} on @mesh ["tp"] {{.*}}dim = 1 : i64} : (tensor<2x8x32xf32>) -> tensor<2x4x32xf32>
// DPSP-NOT: braid.all_
// DPSP-NOT: braid.reduce_scatter
// DPSP-LABEL: braid.layer @block.B
// DPSP-NOT: braid.all_
// DPSP-NOT: braid.reduce_scatter
// DPSP: braid.all_gather {{.*}} on @mesh ["tp"] {{.*}}dim = 1 : i64} : (tensor<2x4x32xf32>) -> tensor<2x8x32xf32>
// DPSP-NOT: braid.all_
// DPSP-NOT: braid.reduce_scatter
// DPSP: braid.reduce_scatter {{.*}} on @mesh ["tp"] {{.*}}dim = 1 : i64} : (tensor<2x8x32xf32>) -> tensor<2x4x32xf32>
// DPSP-NOT: braid.all_
// DPSP-NOT: braid.reduce_scatter
// DPSP: braid.all_gather {{.*}} on @mesh ["tp"] {{.*}}dim = 1 : i64} : (tensor<2x4x32xf32>) -> tensor<2x8x32xf32>
// DPSP-NOT: braid.all_
// DPSP-NOT: braid.reduce_scatter
// DPSP: braid.reduce_scatter {{.*}} on @mesh ["tp"] {{.*}}dim = 1 : i64} : (tensor<2x8x32xf32>) -> tensor<2x4x32xf32>
// DPSP-NOT: braid.all_
// DPSP-NOT: braid.reduce_scatter
// DPSP-LABEL: braid.layer @block.W
// DPSP-NOT: braid.all_slice
// DPSP-COUNT-4: braid.all_gather {{.*}} on @mesh ["tp"] {{.*}}dim = 1 : i64} : (tensor<2x4x32xf32>) -> tensor<2x8x32xf32>
// DPSP-NOT: braid.all_gather
// DPSP-NOT: braid.all_slice
// DPSP-NOT: braid.reduce_scatter
// DPSP-COUNT-16: braid.all_reduce sum {{.*}} on @mesh ["dp"{{(, "tp")?}}]
// DPSP-NOT: braid.all_
// DPSP: braid.yield

// ZERO2-LABEL: braid.layer @block.W
// ZERO2-COUNT-16: braid.reduce_scatter {{.*}} on @mesh ["dp"]
// ZERO2-NOT: braid.all_
// ZERO2: braid.yield
// ZERO2-LABEL: func.func @train_step
// ZERO2-NOT: braid.all_reduce {{.*}} tensor<{{[0-9]}}
// ZERO2: return

// VOCAB-LABEL: func.func @train_step
// VOCAB-NOT: braid.all_gather
// VOCAB: %[[WTE:.*]] = braid.param "wte.weight" {block_of = #braid.sharding<@mesh, {{\[}}["tp"], []]>{{.*}} : tensor<32x32xf32>
// VOCAB: %[[E:.*]] = braid.embedding %[[WTE]], %{{.*}} {{{.*}}mesh = @mesh, vocab_axes = ["tp"]} : (tensor<32x32xf32>, tensor<4x8xi32>) -> tensor<4x8x32xf32>
// VOCAB-NEXT: braid.all_reduce sum %[[E]] on @mesh ["tp"]
// VOCAB: braid.matmul {{.*}} -> tensor<4x8x32xf32>
// VOCAB-NEXT: braid.cross_entropy {{.*}}vocab_axes = ["tp"]
// VOCAB: braid.cross_entropy_grad {{.*}}vocab_axes = ["tp"]
// VOCAB: braid.all_reduce sum {{.*}} : tensor<4x8x32xf32>
// VOCAB: braid.embedding_grad {{.*}}vocab_axes = ["tp"]} : (tensor<4x8xi32>, tensor<4x8x32xf32>) -> tensor<32x32xf32>
// VOCAB-NOT: braid.all_gather
// VOCAB-NOT: braid.all_reduce {{.*}} tensor<{{[0-9]}}
// VOCAB: return
