// RUN: %PYTHON -m braid.models gpt --layers 2 --hidden 32 --heads 4 --seq 8 --vocab 64 --batch 4 -o %t.gpt.mlir
// RUN: braid-opt %t.gpt.mlir --braid-shard="dp=2 tp=2" | FileCheck %s
// RUN: %PYTHON -m braid.models llama --layers 1 --hidden 32 --heads 4 --kv-heads 2 --seq 8 --vocab 64 --batch 4 -o %t.llama.mlir
// RUN: braid-opt %t.llama.mlir --braid-shard="tp=2" | FileCheck %s --check-prefix=LLAMA
// RUN: not braid-opt %t.gpt.mlir --braid-shard="tp=3" 2>&1 | FileCheck %s --check-prefix=HEADS
// RUN: not braid-opt %t.gpt.mlir --braid-shard="dp=3" 2>&1 | FileCheck %s --check-prefix=BATCH

// Tests the standard annotations: the batch over dp, Megatron's column- and
// row-parallel projections over tp, and nothing else.
// CHECK: braid.mesh @mesh {axes = ["dp", "tp"], shape = array<i64: 2, 2>}
// CHECK: braid.param "attn.q.weight"
// CHECK-NEXT: braid.shard %{{.*}} : tensor<32x32xf32> to #braid.sharding<@mesh, {{\[}}[], ["tp"]]> {priority = -1 : i64}
// CHECK: braid.param "attn.q.bias"
// CHECK-NEXT: braid.shard %{{.*}} : tensor<32xf32> to #braid.sharding<@mesh, {{\[}}["tp"]]> {priority = -1 : i64}
// CHECK: braid.param "attn.proj.weight"
// CHECK-NEXT: braid.shard %{{.*}} : tensor<32x32xf32> to #braid.sharding<@mesh, {{\[}}["tp"], []]> {priority = -1 : i64}
// CHECK: braid.param "attn.proj.bias"
// CHECK-NOT: braid.shard
// CHECK: braid.param "ln_2.weight"
// CHECK: func.func @forward(%{{.*}}: tensor<4x8xi32> {braid.name = "tokens", braid.range = 64 : i64, braid.sharding = #braid.sharding<@mesh, {{\[}}["dp"], []]>}

// LLAMA: braid.param "self_attn.k_proj.weight"
// LLAMA-NEXT: braid.shard %{{.*}} : tensor<32x16xf32> to #braid.sharding<@mesh, {{\[}}[], ["tp"]]>
// LLAMA: braid.param "mlp.down_proj.weight"
// LLAMA-NEXT: braid.shard %{{.*}} to #braid.sharding<@mesh, {{\[}}["tp"], []]>

// HEADS: error: 'braid.param' op parameter 'attn.q.weight' has dimension 1 of size 32, not divisible by tp = 3
// BATCH: error: 'func.func' op argument #0 has batch dimension 4, not divisible by dp = 3
