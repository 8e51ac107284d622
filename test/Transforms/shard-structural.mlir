// Tests that braid-shard finds Megatron's tensor-parallel plan in the
// program's structure, not in parameter names: a GPT and a Llama whose
// parameters, layers and prefixes are all renamed (p0, p1, ...; L0, ...;
// r0, ...) get exactly the plan of the originals, through the training
// step (backward layers, optimizer state, ZeRO) and sequence parallelism.
//
// RUN: %PYTHON -m braid.models gpt --layers 2 --hidden 32 --heads 4 --seq 8 --vocab 64 --batch 4 -o %t.gpt.in.mlir
// RUN: braid-opt %t.gpt.in.mlir -o %t.gpt.mlir
// RUN: %PYTHON %S/Inputs/rename-params.py %t.gpt.mlir > %t.gpt.renamed.mlir
// RUN: braid-opt %t.gpt.mlir --braid-shard="dp=2 tp=2 sp=true" | sed -E 's/"[^"]*"/"S"/g; s/@[A-Za-z0-9_.$-]+/@S/g' > %t.gpt.plan
// RUN: braid-opt %t.gpt.renamed.mlir --braid-shard="dp=2 tp=2 sp=true" | sed -E 's/"[^"]*"/"S"/g; s/@[A-Za-z0-9_.$-]+/@S/g' > %t.gpt.renamed.plan
// RUN: diff %t.gpt.plan %t.gpt.renamed.plan
// RUN: braid-opt %t.gpt.mlir --braid-autodiff --braid-train-step --braid-shard="dp=2 tp=2 zero=1" | sed -E 's/"[^"]*"/"S"/g; s/@[A-Za-z0-9_.$-]+/@S/g' > %t.gpt.step.plan
// RUN: braid-opt %t.gpt.renamed.mlir --braid-autodiff --braid-train-step --braid-shard="dp=2 tp=2 zero=1" | sed -E 's/"[^"]*"/"S"/g; s/@[A-Za-z0-9_.$-]+/@S/g' > %t.gpt.renamed.step.plan
// RUN: diff %t.gpt.step.plan %t.gpt.renamed.step.plan
// RUN: braid-opt %t.gpt.renamed.mlir --braid-shard="tp=2" | FileCheck %s --check-prefix=GPT
// RUN: braid-opt %t.gpt.renamed.mlir --braid-autodiff --braid-train-step -o %t.gpt.step.mlir
// RUN: %PYTHON %S/Inputs/rename-params.py %t.gpt.step.mlir > %t.gpt.step.renamed.mlir
// RUN: braid-opt %t.gpt.step.renamed.mlir --braid-shard="tp=2" | FileCheck %s --check-prefix=STATE
//
// RUN: %PYTHON -m braid.models llama --layers 1 --hidden 32 --heads 4 --kv-heads 2 --seq 8 --vocab 64 --batch 4 -o %t.llama.in.mlir
// RUN: braid-opt %t.llama.in.mlir -o %t.llama.mlir
// RUN: %PYTHON %S/Inputs/rename-params.py %t.llama.mlir > %t.llama.renamed.mlir
// RUN: braid-opt %t.llama.mlir --braid-autodiff --braid-train-step="optimizer=sgd" --braid-shard="tp=4" | sed -E 's/"[^"]*"/"S"/g; s/@[A-Za-z0-9_.$-]+/@S/g' > %t.llama.plan
// RUN: braid-opt %t.llama.renamed.mlir --braid-autodiff --braid-train-step="optimizer=sgd" --braid-shard="tp=4" | sed -E 's/"[^"]*"/"S"/g; s/@[A-Za-z0-9_.$-]+/@S/g' > %t.llama.renamed.plan
// RUN: diff %t.llama.plan %t.llama.renamed.plan
// RUN: braid-opt %t.llama.renamed.mlir --braid-shard="tp=2" | FileCheck %s --check-prefix=LLAMA
//
// `explain` says what it decided and why; without it the pass says nothing.
// RUN: braid-opt %t.gpt.renamed.mlir --braid-shard="tp=2 explain" -o /dev/null 2>&1 | FileCheck %s --check-prefix=EXPLAIN
// RUN: braid-opt %t.gpt.renamed.mlir --braid-shard="tp=2" -o /dev/null 2>&1 | count 0
// RUN: braid-opt %t.gpt.renamed.mlir --braid-shard="dp=2 explain" -o /dev/null 2>&1 | FileCheck %s --check-prefix=TP1
// RUN: %PYTHON -m braid.models gpt --layers 1 --hidden 32 --heads 4 --seq 8 --vocab 66 --batch 4 -o %t.v66.mlir
// RUN: braid-opt %t.v66.mlir --braid-shard="tp=4 explain" -o /dev/null 2>&1 | FileCheck %s --check-prefix=V66
//
// Hand-written programs: a pair found through per-head ops under other
// names, and programs whose matmuls form no pair.
// RUN: braid-opt %s -split-input-file --braid-shard="tp=2" | FileCheck %s --check-prefix=HAND
// RUN: braid-opt %s -split-input-file --braid-shard="tp=2 explain" -o /dev/null 2>&1 | FileCheck %s --check-prefix=WHY

// In the GPT, p2 (attn.q.weight) is column, p3 (its bias) column, p8 (attn.proj.weight)
// row, p9 (its bias) whole, p10 (ln_2.weight) whole, p16 (the tied wte)
// vocabulary parallel.
// GPT: braid.param "p2"
// GPT-NEXT: braid.shard %{{.*}} : tensor<32x32xf32> to #braid.sharding<@mesh, {{\[}}[], ["tp"]]> {priority = -1 : i64}
// GPT: braid.param "p3"
// GPT-NEXT: braid.shard %{{.*}} : tensor<32xf32> to #braid.sharding<@mesh, {{\[}}["tp"]]> {priority = -1 : i64}
// GPT: braid.param "p8"
// GPT-NEXT: braid.shard %{{.*}} : tensor<32x32xf32> to #braid.sharding<@mesh, {{\[}}["tp"], []]> {priority = -1 : i64}
// GPT: braid.param "p9"
// GPT-NOT: braid.shard
// GPT: braid.param "p10"
// GPT-NOT: braid.shard
// GPT: braid.param "p12"
// GPT-NEXT: braid.shard %{{.*}} : tensor<32x128xf32> to #braid.sharding<@mesh, {{\[}}[], ["tp"]]>
// GPT: braid.param "p14"
// GPT-NEXT: braid.shard %{{.*}} : tensor<128x32xf32> to #braid.sharding<@mesh, {{\[}}["tp"], []]>
// GPT: braid.param "p16"
// GPT-NEXT: braid.shard %{{.*}} : tensor<64x32xf32> to #braid.sharding<@mesh, {{\[}}["tp"], []]>
// GPT: braid.param "p17"
// GPT-NOT: braid.shard
// GPT: braid.param "p18"

// Optimizer state follows the parameter its update combines it with,
// whatever the state is called (here p2's m and v, renamed too). "p2"
// without a phase is read by the original layer, then by the update.
// STATE: braid.param "p2" {init
// STATE: %[[W:.*]] = braid.param "p2" {init
// STATE-NEXT: braid.shard %[[W]] : tensor<32x32xf32> to #braid.sharding<@mesh, {{\[}}[], ["tp"]]>
// STATE-NEXT: %[[M:.*]] = braid.param "p{{[0-9]+}}" {init = #braid.init<zeros>, state}
// STATE-NEXT: braid.shard %[[M]] : tensor<32x32xf32> to #braid.sharding<@mesh, {{\[}}[], ["tp"]]>
// STATE-NEXT: %[[V:.*]] = braid.param "p{{[0-9]+}}" {init = #braid.init<zeros>, state}
// STATE-NEXT: braid.shard %[[V]] : tensor<32x32xf32> to #braid.sharding<@mesh, {{\[}}[], ["tp"]]>
// STATE-NEXT: braid.adamw_update

// In the Llama, p1 q_proj, p2 k_proj (grouped: 16 columns) and p3 v_proj
// are column-parallel, p4 o_proj row; p6 gate and p7 up column (SwiGLU's
// product keeps the split), p8 down row; p9 embed_tokens and p11 lm_head
// vocabulary parallel, p10 (the final norm) whole.
// LLAMA: braid.param "p2"
// LLAMA-NEXT: braid.shard %{{.*}} : tensor<32x16xf32> to #braid.sharding<@mesh, {{\[}}[], ["tp"]]>
// LLAMA: braid.param "p4"
// LLAMA-NEXT: braid.shard %{{.*}} : tensor<32x32xf32> to #braid.sharding<@mesh, {{\[}}["tp"], []]>
// LLAMA: braid.param "p6"
// LLAMA-NEXT: braid.shard %{{.*}} to #braid.sharding<@mesh, {{\[}}[], ["tp"]]>
// LLAMA: braid.param "p7"
// LLAMA-NEXT: braid.shard %{{.*}} to #braid.sharding<@mesh, {{\[}}[], ["tp"]]>
// LLAMA: braid.param "p8"
// LLAMA-NEXT: braid.shard %{{.*}} to #braid.sharding<@mesh, {{\[}}["tp"], []]>
// LLAMA: braid.param "p9"
// LLAMA-NEXT: braid.shard %{{.*}} : tensor<64x32xf32> to #braid.sharding<@mesh, {{\[}}["tp"], []]>
// LLAMA: braid.param "p10"
// LLAMA-NOT: braid.shard
// LLAMA: braid.param "p11"
// LLAMA-NEXT: braid.shard %{{.*}} : tensor<32x64xf32> to #braid.sharding<@mesh, {{\[}}[], ["tp"]]>

// EXPLAIN: remark: 'r0.*.p0': whole: not the weight of a matmul pair
// EXPLAIN: remark: 'r0.*.p2': column-parallel (dimension 1 over tp): the output of its braid.matmul reaches the matmul with 'p8' only through ops that keep dimension 1 parallel
// EXPLAIN: remark: 'r0.*.p3': column-parallel bias (dimension 0 over tp): applied along the dimension that 'p2' splits
// EXPLAIN: remark: 'r0.*.p8': row-parallel (dimension 0 over tp): its matmul sums over the dimension that 'p2', 'p4', 'p6' split
// EXPLAIN: remark: 'r0.*.p14': row-parallel (dimension 0 over tp): its matmul sums over the dimension that 'p12' split
// EXPLAIN: remark: 'p16': vocabulary-parallel table (dimension 0 over tp): its rows are looked up by id in braid.embedding (the vocabulary); also the output of its braid.matmul is the vocabulary of braid.cross_entropy, which splits it{{$}}
// EXPLAIN-NOT: remark: 'p16'

// TP1: remark: braid-shard: tp = 1, nothing to split over tp
// TP1-NOT: remark

// V66: remark: 'wte.weight': vocabulary-parallel table (dimension 0 over tp): {{.*}}; kept whole: dimension 0 of size 66 is not divisible by tp = 4

// Tests that a pair is found through a per-head softmax (the heads stay
// split, only the positions within a head are normalised).
// HAND-LABEL: func.func @per_head
// HAND: braid.param "in"
// HAND-NEXT: braid.shard %{{.*}} : tensor<8x16xf32> to #braid.sharding<@mesh, {{\[}}[], ["tp"]]>
// HAND: braid.param "out"
// HAND-NEXT: braid.shard %{{.*}} : tensor<16x8xf32> to #braid.sharding<@mesh, {{\[}}["tp"], []]>
// WHY: remark: 'in': column-parallel (dimension 1 over tp): the output of its braid.matmul reaches the matmul with 'out'
// WHY: remark: 'out': row-parallel (dimension 0 over tp)
func.func @per_head(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %w1 = braid.param "in" {init = #braid.init<normal(0.02)>} : tensor<8x16xf32>
  %h = braid.matmul %x, %w1 : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %heads = braid.reshape %h : (tensor<4x16xf32>) -> tensor<4x2x8xf32>
  %p = braid.softmax %heads {axis = 2 : i64} : tensor<4x2x8xf32>
  %flat = braid.reshape %p : (tensor<4x2x8xf32>) -> tensor<4x16xf32>
  %w2 = braid.param "out" {init = #braid.init<normal(0.02)>} : tensor<16x8xf32>
  %y = braid.matmul %flat, %w2 : (tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// Tests that a normalisation over the features between two matmuls, or a
// softmax over them, forms no pair: nothing is split over tp.
// HAND-LABEL: braid.layer @normalised
// HAND-NOT: ["tp"]
// HAND-LABEL: func.func @softmax_over_features
// HAND-NOT: ["tp"]
// HAND: return
// WHY: remark: 'h.*.a': whole: the output of its braid.matmul along dimension 1 reaches braid.rms_norm, which needs it whole
// WHY: remark: 'h.*.g': whole: not the weight of a matmul pair
// WHY: remark: 'h.*.b': whole: no second matmul sums over the output of its braid.matmul along dimension 1 (it leaves through braid.yield)
// WHY: remark: 'c': whole: the output of its braid.matmul along dimension 1 reaches braid.softmax, which needs it whole
// WHY: remark: 'd': whole: no second matmul sums over the output of its braid.matmul along dimension 1 (it leaves through func.return)
braid.layer @normalised(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %w1 = braid.param "a" {init = #braid.init<normal(0.02)>} : tensor<8x16xf32>
  %h = braid.matmul %x, %w1 : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %g = braid.param "g" {init = #braid.init<ones>} : tensor<16xf32>
  %n = braid.rms_norm %h, %g : (tensor<4x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  %w2 = braid.param "b" {init = #braid.init<normal(0.02)>} : tensor<16x8xf32>
  %y = braid.matmul %n, %w2 : (tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
  braid.yield %y : tensor<4x8xf32>
}
func.func @softmax_over_features(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %h = braid.repeat @normalised(%x) {prefix = "h", count = 2 : i64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %w1 = braid.param "c" {init = #braid.init<normal(0.02)>} : tensor<8x16xf32>
  %a = braid.matmul %h, %w1 : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %p = braid.softmax %a {axis = 1 : i64} : tensor<4x16xf32>
  %w2 = braid.param "d" {init = #braid.init<normal(0.02)>} : tensor<16x8xf32>
  %y = braid.matmul %p, %w2 : (tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// Tests that a product of a matmul's output with itself (attention scores
// built by hand, summed over the features) forms no pair, and that the
// second weight of a pair is not also made the first of another.
// HAND-LABEL: func.func @self_product
// HAND-NOT: ["tp"]
// HAND-LABEL: func.func @chain
// HAND: braid.param "first"
// HAND-NEXT: braid.shard %{{.*}} to #braid.sharding<@mesh, {{\[}}[], ["tp"]]>
// HAND: braid.param "second"
// HAND-NEXT: braid.shard %{{.*}} to #braid.sharding<@mesh, {{\[}}["tp"], []]>
// HAND: braid.param "third"
// HAND-NOT: braid.shard
// WHY: remark: 'e': whole: the output of its braid.matmul along dimension 1 reaches braid.matmul, which sums over it against an activation
func.func @self_product(%x: tensor<4x8xf32>) -> tensor<4x4xf32> {
  %w = braid.param "e" {init = #braid.init<normal(0.02)>} : tensor<8x16xf32>
  %h = braid.matmul %x, %w : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %s = braid.matmul %h, %h {transpose_b} : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x4xf32>
  return %s : tensor<4x4xf32>
}
func.func @chain(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %w1 = braid.param "first" {init = #braid.init<normal(0.02)>} : tensor<8x16xf32>
  %a = braid.matmul %x, %w1 : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %r = braid.relu %a : tensor<4x16xf32>
  %w2 = braid.param "second" {init = #braid.init<normal(0.02)>} : tensor<16x16xf32>
  %b = braid.matmul %r, %w2 : (tensor<4x16xf32>, tensor<16x16xf32>) -> tensor<4x16xf32>
  %s = braid.relu %b : tensor<4x16xf32>
  %w3 = braid.param "third" {init = #braid.init<normal(0.02)>} : tensor<16x8xf32>
  %y = braid.matmul %s, %w3 : (tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}
