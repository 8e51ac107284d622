// Tests that braid-shard's tensor-parallel plan is the same under
// bf16-mixed as in f32. braid-mixed-precision (which runs first) has each
// matmul read a braid.convert of its parameter (the bf16 working copy),
// not the parameter; the plan looks through any op whose sharding rule
// splits its result exactly as its operand (one operand, each dimension
// an own parallel factor): braid.shard, braid.convert, braid.round, unary
// elementwise ops. Before, the plan found no pair, table or head under
// bf16-mixed and every parameter stayed whole: tp silently did nothing.
//
// The explanations (roles, dimensions, reasons) of the bf16-mixed GPT and
// Llama, through the training step and sequence parallelism, equal f32's
// line for line.
// RUN: %PYTHON -m braid.models gpt --layers 2 --hidden 32 --heads 4 --seq 8 --vocab 64 --batch 4 -o %t.gpt.mlir
// RUN: braid-opt %t.gpt.mlir --braid-autodiff --braid-train-step --braid-shard="dp=2 tp=2 sp explain" -o /dev/null 2>&1 | sed 's/.*remark: //' > %t.gpt.f32.why
// RUN: braid-opt %t.gpt.mlir --braid-mixed-precision=precision=bf16-mixed --braid-autodiff --braid-train-step --braid-shard="dp=2 tp=2 sp explain" -o /dev/null 2>&1 | sed 's/.*remark: //' > %t.gpt.bf16.why
// RUN: diff %t.gpt.f32.why %t.gpt.bf16.why
// RUN: FileCheck %s --check-prefix=GPT < %t.gpt.bf16.why
// RUN: %PYTHON -m braid.models llama --layers 1 --hidden 32 --heads 4 --kv-heads 2 --seq 8 --vocab 64 --batch 4 -o %t.llama.mlir
// RUN: braid-opt %t.llama.mlir --braid-autodiff --braid-train-step --braid-shard="tp=2 explain" -o /dev/null 2>&1 | sed 's/.*remark: //' > %t.llama.f32.why
// RUN: braid-opt %t.llama.mlir --braid-mixed-precision=precision=bf16-mixed --braid-autodiff --braid-train-step --braid-shard="tp=2 explain" -o /dev/null 2>&1 | sed 's/.*remark: //' > %t.llama.bf16.why
// RUN: diff %t.llama.f32.why %t.llama.bf16.why
// RUN: FileCheck %s --check-prefix=LLAMA < %t.llama.bf16.why
//
// GPT: 'h.*.attn.q.weight': column-parallel (dimension 1 over tp): the output of its braid.matmul reaches the matmul with 'attn.proj.weight'
// GPT: 'h.*.attn.q.bias': column-parallel bias (dimension 0 over tp)
// GPT: 'h.*.attn.proj.weight': row-parallel (dimension 0 over tp): its matmul sums over the dimension that 'attn.q.weight', 'attn.k.weight', 'attn.v.weight' split
// GPT: 'h.*.attn.proj.bias': whole
// GPT: 'h.*.mlp.fc.weight': column-parallel (dimension 1 over tp)
// GPT: 'h.*.mlp.fc.bias': column-parallel bias (dimension 0 over tp)
// GPT: 'h.*.mlp.proj.weight': row-parallel (dimension 0 over tp)
// GPT: 'wte.weight': vocabulary-parallel table (dimension 0 over tp): its rows are looked up by id in braid.embedding (the vocabulary); also the output of its braid.matmul is the vocabulary of braid.cross_entropy, which splits it
// GPT: 'wpe.weight': whole
//
// LLAMA: 'layers.*.self_attn.k_proj.weight': column-parallel (dimension 1 over tp)
// LLAMA: 'layers.*.self_attn.o_proj.weight': row-parallel (dimension 0 over tp)
// LLAMA: 'layers.*.mlp.gate_proj.weight': column-parallel (dimension 1 over tp)
// LLAMA: 'layers.*.mlp.up_proj.weight': column-parallel (dimension 1 over tp)
// LLAMA: 'layers.*.mlp.down_proj.weight': row-parallel (dimension 0 over tp): its matmul sums over the dimension that 'mlp.gate_proj.weight', 'mlp.up_proj.weight' split
// LLAMA: 'embed_tokens.weight': vocabulary-parallel table (dimension 0 over tp)
// LLAMA: 'norm.weight': whole
// LLAMA: 'lm_head.weight': vocabulary-parallel head (dimension 1 over tp): the output of its braid.matmul is the vocabulary of braid.cross_entropy
//
// Propagation splits each working copy as its parameter, and the
// partitioned program converts only the device's block.
// RUN: braid-opt %t.gpt.mlir --braid-mixed-precision=precision=bf16-mixed --braid-autodiff --braid-train-step --braid-shard="dp=2 tp=2" --braid-propagate-sharding | FileCheck %s --check-prefix=PROP
// RUN: braid-opt %t.gpt.mlir --braid-mixed-precision=precision=bf16-mixed --braid-autodiff --braid-train-step --braid-shard="dp=2 tp=2" --braid-propagate-sharding --braid-partition | FileCheck %s --check-prefix=PART
// PROP-LABEL: braid.layer @block.F
// PROP: braid.param "attn.q.weight"
// PROP-NEXT: %[[Q:.*]] = braid.shard
// PROP-NEXT: braid.convert %[[Q]] {{{.*}}braid.shardings = [#braid.sharding<@mesh, {{\[}}[], ["tp"]]>]} : tensor<32x32xf32> to tensor<32x32xbf16>
// PROP: braid.param "attn.proj.weight"
// PROP-NEXT: %[[P:.*]] = braid.shard
// PROP-NEXT: braid.convert %[[P]] {{{.*}}braid.shardings = [#braid.sharding<@mesh, {{\[}}["tp"], []]>]} : tensor<32x32xf32> to tensor<32x32xbf16>
// PART-LABEL: braid.layer @block.F
// PART: braid.param "attn.q.weight" {{.*}} : tensor<32x16xf32>
// PART-NEXT: braid.convert {{.*}} : tensor<32x16xf32> to tensor<32x16xbf16>
// PART: braid.param "attn.proj.weight" {{.*}} : tensor<16x32xf32>
// PART-NEXT: braid.convert {{.*}} : tensor<16x32xf32> to tensor<16x32xbf16>
// PART: braid.param "mlp.fc.weight" {{.*}} : tensor<32x64xf32>
// PART-NEXT: braid.convert {{.*}} : tensor<32x64xf32> to tensor<32x64xbf16>
//
// Hand-written: a pair whose weights are read through transparent ops of
// other kinds (a rounding, a negation), and one read through an op whose
// rule is not the identity (a softmax over the weight's features, which
// needs them whole), which is not looked through.
// RUN: braid-opt %s -split-input-file --braid-shard="tp=2" | FileCheck %s --check-prefix=HAND
// RUN: braid-opt %s -split-input-file --braid-shard="tp=2 explain" -o /dev/null 2>&1 | FileCheck %s --check-prefix=WHY

// HAND-LABEL: func.func @through_round
// HAND: braid.param "in"
// HAND-NEXT: braid.shard %{{.*}} : tensor<8x16xf32> to #braid.sharding<@mesh, {{\[}}[], ["tp"]]>
// HAND: braid.param "out"
// HAND-NEXT: braid.shard %{{.*}} : tensor<16x8xf32> to #braid.sharding<@mesh, {{\[}}["tp"], []]>
// WHY: remark: 'in': column-parallel (dimension 1 over tp): the output of its braid.matmul reaches the matmul with 'out'
// WHY: remark: 'out': row-parallel (dimension 0 over tp)
func.func @through_round(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %w1 = braid.param "in" {init = #braid.init<normal(0.02)>} : tensor<8x16xf32>
  %r1 = braid.round %w1 to bf16 : tensor<8x16xf32>
  %h = braid.matmul %x, %r1 : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %a = braid.relu %h : tensor<4x16xf32>
  %w2 = braid.param "out" {init = #braid.init<normal(0.02)>} : tensor<16x8xf32>
  %n2 = braid.neg %w2 : tensor<16x8xf32>
  %r2 = braid.round %n2 to bf16 : tensor<16x8xf32>
  %y = braid.matmul %a, %r2 : (tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// HAND-LABEL: func.func @through_softmax
// HAND-NOT: ["tp"]
// HAND: return
// WHY: remark: 'a': whole: the output of its braid.matmul along dimension 1 reaches braid.matmul, which sums over it against an activation
// WHY: remark: 'b': whole: not the weight of a matmul pair
func.func @through_softmax(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %w1 = braid.param "a" {init = #braid.init<normal(0.02)>} : tensor<8x16xf32>
  %h = braid.matmul %x, %w1 : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %w2 = braid.param "b" {init = #braid.init<normal(0.02)>} : tensor<16x8xf32>
  %s2 = braid.softmax %w2 {axis = 1 : i64} : tensor<16x8xf32>
  %y = braid.matmul %h, %s2 : (tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}
