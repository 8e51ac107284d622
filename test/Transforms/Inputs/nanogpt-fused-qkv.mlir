// What the importer emits for the nanoGPT of python/tests/nanogpt.py with 2
// layers (hidden 32, 4 heads, sequence 16, vocabulary 128, batch 2): a fused
// q/k/v projection `c_attn` [96, 32] whose output three braid.slice ops cut
// into q, k and v. Used by Transforms/shard-fused-qkv.mlir and
// Integration/braidc-fused-qkv.mlir.
//   PYTHONPATH=python:python/tests python3 -m braid.torch nanogpt:make \
//     --args '{"n_layer": 2}' --batch '{"idx": {"shape": [2, 16], "high": 128},
//     "targets": {"shape": [2, 16], "high": 128}}' -o gpt.mlir

braid.layer @transformer_h(%x: tensor<2x16x32xf32>) -> tensor<2x16x32xf32> {
  %ln_1.weight = braid.param "ln_1.weight" {init = #braid.init<ones>} : tensor<32xf32>
  %ln_1.bias = braid.param "ln_1.bias" {init = #braid.init<zeros>} : tensor<32xf32>
  %ln = braid.layer_norm %x, %ln_1.weight, %ln_1.bias {epsilon = 1.0e-05 : f64} : (tensor<2x16x32xf32>, tensor<32xf32>, tensor<32xf32>) -> tensor<2x16x32xf32>
  %attn.c_attn.weight = braid.param "attn.c_attn.weight" {init = #braid.init<normal(0.02)>} : tensor<96x32xf32>
  %mm = braid.matmul %ln, %attn.c_attn.weight {transpose_b} : (tensor<2x16x32xf32>, tensor<96x32xf32>) -> tensor<2x16x96xf32>
  %attn.c_attn.bias = braid.param "attn.c_attn.bias" {init = #braid.init<zeros>} : tensor<96xf32>
  %add = braid.add %mm, %attn.c_attn.bias : (tensor<2x16x96xf32>, tensor<96xf32>) -> tensor<2x16x96xf32>
  %slice = braid.slice %add {start = array<i64: 0, 0, 0>, limit = array<i64: 2, 16, 32>} : (tensor<2x16x96xf32>) -> tensor<2x16x32xf32>
  %reshape = braid.reshape %slice : (tensor<2x16x32xf32>) -> tensor<2x16x4x8xf32>
  %slice_1 = braid.slice %add {start = array<i64: 0, 0, 32>, limit = array<i64: 2, 16, 64>} : (tensor<2x16x96xf32>) -> tensor<2x16x32xf32>
  %reshape_1 = braid.reshape %slice_1 : (tensor<2x16x32xf32>) -> tensor<2x16x4x8xf32>
  %slice_2 = braid.slice %add {start = array<i64: 0, 0, 64>, limit = array<i64: 2, 16, 96>} : (tensor<2x16x96xf32>) -> tensor<2x16x32xf32>
  %reshape_2 = braid.reshape %slice_2 : (tensor<2x16x32xf32>) -> tensor<2x16x4x8xf32>
  %attn = braid.attention %reshape, %reshape_1, %reshape_2 {causal, scale = 0.35355339059327373 : f64} : (tensor<2x16x4x8xf32>, tensor<2x16x4x8xf32>, tensor<2x16x4x8xf32>) -> tensor<2x16x4x8xf32>
  %reshape_3 = braid.reshape %attn : (tensor<2x16x4x8xf32>) -> tensor<2x16x32xf32>
  %attn.c_proj.weight = braid.param "attn.c_proj.weight" {init = #braid.init<normal(0.02)>} : tensor<32x32xf32>
  %mm_1 = braid.matmul %reshape_3, %attn.c_proj.weight {transpose_b} : (tensor<2x16x32xf32>, tensor<32x32xf32>) -> tensor<2x16x32xf32>
  %attn.c_proj.bias = braid.param "attn.c_proj.bias" {init = #braid.init<zeros>} : tensor<32xf32>
  %add_1 = braid.add %mm_1, %attn.c_proj.bias : (tensor<2x16x32xf32>, tensor<32xf32>) -> tensor<2x16x32xf32>
  %add_2 = braid.add %x, %add_1 : (tensor<2x16x32xf32>, tensor<2x16x32xf32>) -> tensor<2x16x32xf32>
  %ln_2.weight = braid.param "ln_2.weight" {init = #braid.init<ones>} : tensor<32xf32>
  %ln_2.bias = braid.param "ln_2.bias" {init = #braid.init<zeros>} : tensor<32xf32>
  %ln_1 = braid.layer_norm %add_2, %ln_2.weight, %ln_2.bias {epsilon = 1.0e-05 : f64} : (tensor<2x16x32xf32>, tensor<32xf32>, tensor<32xf32>) -> tensor<2x16x32xf32>
  %mlp.c_fc.weight = braid.param "mlp.c_fc.weight" {init = #braid.init<normal(0.02)>} : tensor<128x32xf32>
  %mm_2 = braid.matmul %ln_1, %mlp.c_fc.weight {transpose_b} : (tensor<2x16x32xf32>, tensor<128x32xf32>) -> tensor<2x16x128xf32>
  %mlp.c_fc.bias = braid.param "mlp.c_fc.bias" {init = #braid.init<zeros>} : tensor<128xf32>
  %add_3 = braid.add %mm_2, %mlp.c_fc.bias : (tensor<2x16x128xf32>, tensor<128xf32>) -> tensor<2x16x128xf32>
  %gelu = braid.gelu exact %add_3 : tensor<2x16x128xf32>
  %mlp.c_proj.weight = braid.param "mlp.c_proj.weight" {init = #braid.init<normal(0.02)>} : tensor<32x128xf32>
  %mm_3 = braid.matmul %gelu, %mlp.c_proj.weight {transpose_b} : (tensor<2x16x128xf32>, tensor<32x128xf32>) -> tensor<2x16x32xf32>
  %mlp.c_proj.bias = braid.param "mlp.c_proj.bias" {init = #braid.init<zeros>} : tensor<32xf32>
  %add_4 = braid.add %mm_3, %mlp.c_proj.bias : (tensor<2x16x32xf32>, tensor<32xf32>) -> tensor<2x16x32xf32>
  %add_5 = braid.add %add_2, %add_4 : (tensor<2x16x32xf32>, tensor<2x16x32xf32>) -> tensor<2x16x32xf32>
  braid.yield %add_5 : tensor<2x16x32xf32>
}

func.func @forward(%idx: tensor<2x16xi64> {braid.name = "idx", braid.range = 128 : i64}, %targets: tensor<2x16xi64> {braid.name = "targets", braid.range = 128 : i64}) -> tensor<f32> {
  %transformer.ln_f.weight = braid.param "transformer.ln_f.weight" {init = #braid.init<ones>} : tensor<32xf32>
  %transformer.ln_f.bias = braid.param "transformer.ln_f.bias" {init = #braid.init<zeros>} : tensor<32xf32>
  %transformer.wte.weight = braid.param "transformer.wte.weight" {init = #braid.init<normal(0.02)>} : tensor<128x32xf32>
  %emb = braid.embedding %transformer.wte.weight, %idx : (tensor<128x32xf32>, tensor<2x16xi64>) -> tensor<2x16x32xf32>
  %transformer.wpe.weight = braid.param "transformer.wpe.weight" {init = #braid.init<normal(0.02)>} : tensor<16x32xf32>
  %cst = braid.constant dense<"0x00000000000000000100000000000000020000000000000003000000000000000400000000000000050000000000000006000000000000000700000000000000080000000000000009000000000000000A000000000000000B000000000000000C000000000000000D000000000000000E000000000000000F00000000000000"> : tensor<16xi64>
  %emb_1 = braid.embedding %transformer.wpe.weight, %cst : (tensor<16x32xf32>, tensor<16xi64>) -> tensor<16x32xf32>
  %add = braid.add %emb, %emb_1 : (tensor<2x16x32xf32>, tensor<16x32xf32>) -> tensor<2x16x32xf32>
  %h = braid.repeat @transformer_h(%add) {prefix = "transformer.h", count = 2 : i64} : (tensor<2x16x32xf32>) -> tensor<2x16x32xf32>
  %ln = braid.layer_norm %h, %transformer.ln_f.weight, %transformer.ln_f.bias {epsilon = 1.0e-05 : f64} : (tensor<2x16x32xf32>, tensor<32xf32>, tensor<32xf32>) -> tensor<2x16x32xf32>
  %mm = braid.matmul %ln, %transformer.wte.weight {transpose_b} : (tensor<2x16x32xf32>, tensor<128x32xf32>) -> tensor<2x16x128xf32>
  %loss = braid.cross_entropy %mm, %targets : (tensor<2x16x128xf32>, tensor<2x16xi64>) -> tensor<f32>
  return %loss : tensor<f32>
}
