//===- GptModel.h - A small GPT for the planner's tests ---------*- C++ -*-===//
//
// python3 -m braid.models gpt --layers 4 --hidden 64 --heads 4 --seq 16
//     --vocab 128 --batch 2   (the @forward function and its layer)
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_UNITTESTS_PLANNER_GPTMODEL_H
#define BRAID_UNITTESTS_PLANNER_GPTMODEL_H

constexpr const char *kGpt4 = R"mlir(
braid.layer @block(%x: tensor<2x16x64xf32>) -> tensor<2x16x64xf32> {
  %ln_1.weight = braid.param "ln_1.weight" {init = #braid.init<ones>} : tensor<64xf32>
  %ln_1.bias = braid.param "ln_1.bias" {init = #braid.init<zeros>} : tensor<64xf32>
  %ln_1 = braid.layer_norm %x, %ln_1.weight, %ln_1.bias {epsilon = 1.0e-05 : f64} : (tensor<2x16x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<2x16x64xf32>
  %attn.q.weight = braid.param "attn.q.weight" {init = #braid.init<normal(0.02)>} : tensor<64x64xf32>
  %attn.q.xw = braid.matmul %ln_1, %attn.q.weight : (tensor<2x16x64xf32>, tensor<64x64xf32>) -> tensor<2x16x64xf32>
  %attn.q.bias = braid.param "attn.q.bias" {init = #braid.init<zeros>} : tensor<64xf32>
  %attn.q = braid.add %attn.q.xw, %attn.q.bias : (tensor<2x16x64xf32>, tensor<64xf32>) -> tensor<2x16x64xf32>
  %q = braid.reshape %attn.q : (tensor<2x16x64xf32>) -> tensor<2x16x4x16xf32>
  %attn.k.weight = braid.param "attn.k.weight" {init = #braid.init<normal(0.02)>} : tensor<64x64xf32>
  %attn.k.xw = braid.matmul %ln_1, %attn.k.weight : (tensor<2x16x64xf32>, tensor<64x64xf32>) -> tensor<2x16x64xf32>
  %attn.k.bias = braid.param "attn.k.bias" {init = #braid.init<zeros>} : tensor<64xf32>
  %attn.k = braid.add %attn.k.xw, %attn.k.bias : (tensor<2x16x64xf32>, tensor<64xf32>) -> tensor<2x16x64xf32>
  %k = braid.reshape %attn.k : (tensor<2x16x64xf32>) -> tensor<2x16x4x16xf32>
  %attn.v.weight = braid.param "attn.v.weight" {init = #braid.init<normal(0.02)>} : tensor<64x64xf32>
  %attn.v.xw = braid.matmul %ln_1, %attn.v.weight : (tensor<2x16x64xf32>, tensor<64x64xf32>) -> tensor<2x16x64xf32>
  %attn.v.bias = braid.param "attn.v.bias" {init = #braid.init<zeros>} : tensor<64xf32>
  %attn.v = braid.add %attn.v.xw, %attn.v.bias : (tensor<2x16x64xf32>, tensor<64xf32>) -> tensor<2x16x64xf32>
  %v = braid.reshape %attn.v : (tensor<2x16x64xf32>) -> tensor<2x16x4x16xf32>
  %attn = braid.attention %q, %k, %v {causal} : (tensor<2x16x4x16xf32>, tensor<2x16x4x16xf32>, tensor<2x16x4x16xf32>) -> tensor<2x16x4x16xf32>
  %attn.out = braid.reshape %attn : (tensor<2x16x4x16xf32>) -> tensor<2x16x64xf32>
  %attn.proj.weight = braid.param "attn.proj.weight" {init = #braid.init<normal(0.0070710678118654745)>} : tensor<64x64xf32>
  %attn.proj.xw = braid.matmul %attn.out, %attn.proj.weight : (tensor<2x16x64xf32>, tensor<64x64xf32>) -> tensor<2x16x64xf32>
  %attn.proj.bias = braid.param "attn.proj.bias" {init = #braid.init<zeros>} : tensor<64xf32>
  %attn.proj = braid.add %attn.proj.xw, %attn.proj.bias : (tensor<2x16x64xf32>, tensor<64xf32>) -> tensor<2x16x64xf32>
  %x_1 = braid.add %x, %attn.proj : (tensor<2x16x64xf32>, tensor<2x16x64xf32>) -> tensor<2x16x64xf32>
  %ln_2.weight = braid.param "ln_2.weight" {init = #braid.init<ones>} : tensor<64xf32>
  %ln_2.bias = braid.param "ln_2.bias" {init = #braid.init<zeros>} : tensor<64xf32>
  %ln_2 = braid.layer_norm %x_1, %ln_2.weight, %ln_2.bias {epsilon = 1.0e-05 : f64} : (tensor<2x16x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<2x16x64xf32>
  %mlp.fc.weight = braid.param "mlp.fc.weight" {init = #braid.init<normal(0.02)>} : tensor<64x256xf32>
  %mlp.fc.xw = braid.matmul %ln_2, %mlp.fc.weight : (tensor<2x16x64xf32>, tensor<64x256xf32>) -> tensor<2x16x256xf32>
  %mlp.fc.bias = braid.param "mlp.fc.bias" {init = #braid.init<zeros>} : tensor<256xf32>
  %mlp.fc = braid.add %mlp.fc.xw, %mlp.fc.bias : (tensor<2x16x256xf32>, tensor<256xf32>) -> tensor<2x16x256xf32>
  %gelu = braid.gelu tanh %mlp.fc : tensor<2x16x256xf32>
  %mlp.proj.weight = braid.param "mlp.proj.weight" {init = #braid.init<normal(0.0070710678118654745)>} : tensor<256x64xf32>
  %mlp.proj.xw = braid.matmul %gelu, %mlp.proj.weight : (tensor<2x16x256xf32>, tensor<256x64xf32>) -> tensor<2x16x64xf32>
  %mlp.proj.bias = braid.param "mlp.proj.bias" {init = #braid.init<zeros>} : tensor<64xf32>
  %mlp.proj = braid.add %mlp.proj.xw, %mlp.proj.bias : (tensor<2x16x64xf32>, tensor<64xf32>) -> tensor<2x16x64xf32>
  %x_2 = braid.add %x_1, %mlp.proj : (tensor<2x16x64xf32>, tensor<2x16x64xf32>) -> tensor<2x16x64xf32>
  braid.yield %x_2 : tensor<2x16x64xf32>
}

func.func @forward(%tokens: tensor<2x16xi32> {braid.name = "tokens", braid.range = 128 : i64}, %labels: tensor<2x16xi32> {braid.name = "labels", braid.range = 128 : i64}) -> tensor<f32> {
  %wte.weight = braid.param "wte.weight" {init = #braid.init<normal(0.02)>} : tensor<128x64xf32>
  %wpe.weight = braid.param "wpe.weight" {init = #braid.init<normal(0.01)>} : tensor<16x64xf32>
  %emb = braid.embedding %wte.weight, %tokens : (tensor<128x64xf32>, tensor<2x16xi32>) -> tensor<2x16x64xf32>
  %x = braid.add %emb, %wpe.weight : (tensor<2x16x64xf32>, tensor<16x64xf32>) -> tensor<2x16x64xf32>
  %h = braid.repeat @block(%x) {prefix = "h", count = 4 : i64} : (tensor<2x16x64xf32>) -> tensor<2x16x64xf32>
  %ln_f.weight = braid.param "ln_f.weight" {init = #braid.init<ones>} : tensor<64xf32>
  %ln_f.bias = braid.param "ln_f.bias" {init = #braid.init<zeros>} : tensor<64xf32>
  %ln_f = braid.layer_norm %h, %ln_f.weight, %ln_f.bias {epsilon = 1.0e-05 : f64} : (tensor<2x16x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<2x16x64xf32>
  %logits = braid.matmul %ln_f, %wte.weight {transpose_b} : (tensor<2x16x64xf32>, tensor<128x64xf32>) -> tensor<2x16x128xf32>
  %loss = braid.cross_entropy %logits, %labels : (tensor<2x16x128xf32>, tensor<2x16xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
)mlir";

#endif // BRAID_UNITTESTS_PLANNER_GPTMODEL_H
