// Tests the tiled attention kernels end to end at sequence 150 (three
// 64-row blocks, the last partial): attention and its three gradients
// (one combined call), causal with grouped KV heads and not, compiled by
// braidc, equal braid-eval's element by element within 1e-5 (relative,
// the tensor's RMS as the floor) on inputs from the seed; a GPT and a
// Llama with grouped KV heads call the combined backward once per layer
// and their losses over 4 AdamW steps equal braid-eval's within 1e-4
// relative (insensitive to attention at initialisation, where the scores
// are near 0: the element-wise check is the one that sees the kernels).
//
// RUN: braidc %s --entry attn -o %t.attn
// RUN: %t.attn --seed 5 --dump > %t.attn.out
// RUN: braid-eval %s --entry attn --seed 5 --dump > %t.attn.eval
// RUN: %PYTHON %S/Inputs/compare-results.py %t.attn.out %t.attn.eval --rtol 1e-5 --tensors | FileCheck %s --check-prefix=ATTN
//
// RUN: %PYTHON -m braid.models gpt --layers 1 --hidden 32 --heads 2 --seq 150 --vocab 64 --batch 2 -o %t.gpt.mlir
// RUN: braid-opt %t.gpt.mlir --braid-autodiff --braid-train-step -o %t.gpt.train.mlir
// RUN: braidc %t.gpt.train.mlir --entry train_step --emit cpp -o %t.gpt.cpp
// RUN: FileCheck %s --check-prefix=CPP < %t.gpt.cpp
// RUN: braidc %t.gpt.train.mlir --entry train_step -o %t.gpt.prog
// RUN: %t.gpt.prog --steps 4 --seed 3 > %t.gpt.out
// RUN: braid-eval %t.gpt.train.mlir --steps 4 --seed 3 > %t.gpt.eval
// RUN: %PYTHON %S/Inputs/compare-results.py %t.gpt.out %t.gpt.eval --rtol 1e-4 | FileCheck %s
// RUN: %PYTHON -m braid.models llama --layers 1 --hidden 32 --heads 4 --kv-heads 2 --seq 150 --vocab 64 --batch 2 -o %t.llama.mlir
// RUN: braid-opt %t.llama.mlir --braid-autodiff --braid-train-step -o %t.llama.train.mlir
// RUN: braidc %t.llama.train.mlir --entry train_step -o %t.llama.prog
// RUN: %t.llama.prog --steps 4 --seed 3 > %t.llama.out
// RUN: braid-eval %t.llama.train.mlir --steps 4 --seed 3 > %t.llama.eval
// RUN: %PYTHON %S/Inputs/compare-results.py %t.llama.out %t.llama.eval --rtol 1e-4 | FileCheck %s

// CPP: braid_rt_attention_f32(
// CPP: braid_rt_attention_grad_all_f32(
// CPP-NOT: braid_rt_attention_grad_f32(

// CHECK: ok: 4 losses within 0.0001
// ATTN: ok: 6 tensors within 1e-05 element by element

func.func @attn(%q: tensor<2x150x4x16xf32> {braid.name = "q"}, %k: tensor<2x150x2x16xf32> {braid.name = "k"}, %v: tensor<2x150x2x16xf32> {braid.name = "v"}, %dy: tensor<2x150x4x16xf32> {braid.name = "dy"}, %kl: tensor<2x70x2x16xf32> {braid.name = "kl"}) -> (tensor<2x150x4x16xf32>, tensor<2x150x4x16xf32>, tensor<2x150x2x16xf32>, tensor<2x150x2x16xf32>, tensor<2x150x4x16xf32>, tensor<2x70x2x16xf32>) {
  %y = braid.attention %q, %k, %v {causal} : (tensor<2x150x4x16xf32>, tensor<2x150x2x16xf32>, tensor<2x150x2x16xf32>) -> tensor<2x150x4x16xf32>
  %dq = braid.attention_grad %q, %k, %v, %dy {operand = 0 : i64, causal} : (tensor<2x150x4x16xf32>, tensor<2x150x2x16xf32>, tensor<2x150x2x16xf32>, tensor<2x150x4x16xf32>) -> tensor<2x150x4x16xf32>
  %dk = braid.attention_grad %q, %k, %v, %dy {operand = 1 : i64, causal} : (tensor<2x150x4x16xf32>, tensor<2x150x2x16xf32>, tensor<2x150x2x16xf32>, tensor<2x150x4x16xf32>) -> tensor<2x150x2x16xf32>
  %dv = braid.attention_grad %q, %k, %v, %dy {operand = 2 : i64, causal} : (tensor<2x150x4x16xf32>, tensor<2x150x2x16xf32>, tensor<2x150x2x16xf32>, tensor<2x150x4x16xf32>) -> tensor<2x150x2x16xf32>
  %yn = braid.attention %q, %kl, %kl {scale = 0.5 : f64} : (tensor<2x150x4x16xf32>, tensor<2x70x2x16xf32>, tensor<2x70x2x16xf32>) -> tensor<2x150x4x16xf32>
  %dkl = braid.attention_grad %q, %kl, %kl, %dy {operand = 1 : i64, scale = 0.5 : f64} : (tensor<2x150x4x16xf32>, tensor<2x70x2x16xf32>, tensor<2x70x2x16xf32>, tensor<2x150x4x16xf32>) -> tensor<2x70x2x16xf32>
  return %y, %dq, %dk, %dv, %yn, %dkl : tensor<2x150x4x16xf32>, tensor<2x150x4x16xf32>, tensor<2x150x2x16xf32>, tensor<2x150x2x16xf32>, tensor<2x150x4x16xf32>, tensor<2x70x2x16xf32>
}
