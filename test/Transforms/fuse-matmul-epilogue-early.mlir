// Tests braid.matmul_bias made before training and sharding (braidc fuses
// after both): braid-autodiff differentiates it (the pre-activation
// recomputed for gelu_grad, the bias gradient summed over rows), and
// braid-propagate-sharding / braid-partition shard it with its
// contraction whole (gathered, never left a partial sum to which every
// device would add the bias). Numerically, with 0 tolerance, since nothing
// is summed in a new order: a GPT fused first trains (3 AdamW steps, seed
// 2) to the same losses, weights and optimizer state as the unfused one,
// in f32 and in f64 (--f64), its gradients (forward_grad, seed 3) are the
// same, and sharded after fusion (dp2, tp2, dp2 x tp2, f64) its losses
// equal the serial unfused run's within 1e-12. (tp2 splits none of the
// fused projections: the contraction of the row-parallel ones cannot be
// split, so braid-shard finds no matmul pair; braidc fuses after it.)
//
// RUN: %PYTHON -m braid.models gpt --layers 2 --hidden 32 --heads 4 --seq 8 --vocab 64 --batch 4 -o %t.gpt.mlir
// RUN: braid-opt %t.gpt.mlir --braid-fuse-matmul-epilogue --braid-autodiff -o %t.fused.grad.mlir
// RUN: FileCheck %s --check-prefix=GRAD < %t.fused.grad.mlir
// RUN: braid-opt %t.gpt.mlir --braid-autodiff -o %t.plain.grad.mlir
// RUN: braid-eval %t.plain.grad.mlir --entry forward_grad --seed 3 --save-outputs %t.plain.g
// RUN: braid-eval %t.fused.grad.mlir --entry forward_grad --seed 3 --save-outputs %t.fused.g
// RUN: cmp %t.plain.g %t.fused.g
// RUN: braid-eval %t.plain.grad.mlir --entry forward_grad --seed 3 --f64 --save-outputs %t.plain.g64
// RUN: braid-eval %t.fused.grad.mlir --entry forward_grad --seed 3 --f64 --save-outputs %t.fused.g64
// RUN: cmp %t.plain.g64 %t.fused.g64
//
// braid-cost-report counts its product as matmul's: the forward's matrix
// FLOPs are the unfused program's; B has one more fc product per layer
// (2 * 4*8 * 32 * 128 = 262144), W two more; the pre-activation is no
// longer saved (16384 bytes fewer).
// RUN: braid-opt %t.plain.grad.mlir --braid-cost-report -o /dev/null | FileCheck %s --check-prefix=COST-PLAIN
// RUN: braid-opt %t.fused.grad.mlir --braid-cost-report -o /dev/null | FileCheck %s --check-prefix=COST-FUSED
// COST-PLAIN: h (@block) 2 819200 851968 786432 {{[0-9]+}} 65536
// COST-FUSED: h (@block) 2 819200 1114112 1310720 {{[0-9]+}} 49152
//
// RUN: braid-opt %t.fused.grad.mlir --braid-train-step -o %t.fused.train.mlir
// RUN: braid-opt %t.plain.grad.mlir --braid-train-step -o %t.plain.train.mlir
// RUN: braid-eval %t.plain.train.mlir --steps 3 --seed 2 --save-weights %t.plain.w --save-optimizer-state %t.plain.s > %t.plain
// RUN: braid-eval %t.fused.train.mlir --steps 3 --seed 2 --save-weights %t.fused.w --save-optimizer-state %t.fused.s > %t.fused
// RUN: diff %t.plain %t.fused
// RUN: cmp %t.plain.w %t.fused.w
// RUN: cmp %t.plain.s %t.fused.s
// RUN: braid-eval %t.plain.train.mlir --steps 3 --seed 2 --f64 > %t.plain64
// RUN: braid-eval %t.fused.train.mlir --steps 3 --seed 2 --f64 > %t.fused64
// RUN: diff %t.plain64 %t.fused64
//
// RUN: braid-opt %t.fused.train.mlir --braid-shard="dp=2" --braid-propagate-sharding --braid-partition -o %t.dp2.mlir
// RUN: braid-eval %t.dp2.mlir --mesh mesh --steps 3 --seed 2 --f64 > %t.dp2
// RUN: %PYTHON %S/../Integration/Inputs/compare-results.py %t.dp2 %t.plain64 --rtol 1e-12 | FileCheck %s --check-prefix=LOSS
// RUN: braid-opt %t.fused.train.mlir --braid-shard="tp=2" --braid-propagate-sharding --braid-partition -o %t.tp2.mlir
// RUN: braid-eval %t.tp2.mlir --mesh mesh --steps 3 --seed 2 --f64 > %t.tp2
// RUN: %PYTHON %S/../Integration/Inputs/compare-results.py %t.tp2 %t.plain64 --rtol 1e-12 | FileCheck %s --check-prefix=LOSS
// RUN: braid-opt %t.fused.train.mlir --braid-shard="dp=2 tp=2" --braid-propagate-sharding --braid-partition -o %t.dp2tp2.mlir
// RUN: braid-eval %t.dp2tp2.mlir --mesh mesh --steps 3 --seed 2 --f64 > %t.dp2tp2
// RUN: %PYTHON %S/../Integration/Inputs/compare-results.py %t.dp2tp2 %t.plain64 --rtol 1e-12 | FileCheck %s --check-prefix=LOSS
//
// Megatron's MLP below, fused, partitioned: the column-parallel product
// keeps its columns' bias block; the row-parallel one gathers its
// contraction instead of summing partial products, and the per-device
// program computes the serial values exactly.
// RUN: braid-opt %s --braid-propagate-sharding --braid-partition -o %t.mlp.mlir
// RUN: FileCheck %s --check-prefix=MLP < %t.mlp.mlir
// RUN: braid-eval %s --seed 1 --dump | tail -n +2 > %t.mlp.serial
// RUN: braid-eval %t.mlp.mlir --mesh mesh --seed 1 --dump | tail -n +2 > %t.mlp.spmd
// RUN: diff %t.mlp.serial %t.mlp.spmd

// The fc layer's GELU folds into its product in the forward; the backward
// recomputes the pre-activation (the product without GELU) for gelu_grad,
// in B for the input's gradient and in W for the weight's and the bias's,
// whose gradient is summed over batch and positions.
// GRAD-LABEL: braid.layer @block.F(
// GRAD: braid.matmul_bias {{.*}} gelu tanh {braid.phase = "F"} : (tensor<4x8x32xf32>, tensor<32x128xf32>, tensor<128xf32>)
// GRAD-LABEL: braid.layer @block.B(
// GRAD: %[[PRE:.*]] = braid.matmul_bias %{{[^ ]*}}, %{{[^ ]*}}, %{{[^ ]*}} {braid.phase = "B"} : (tensor<4x8x32xf32>, tensor<32x128xf32>, tensor<128xf32>)
// GRAD-NEXT: %[[DPRE:.*]] = braid.gelu_grad tanh %[[PRE]], %{{.*}} {braid.phase = "B"}
// GRAD-NEXT: braid.matmul %[[DPRE]], %{{.*}} {braid.phase = "B", transpose_b} : (tensor<4x8x128xf32>, tensor<32x128xf32>) -> tensor<4x8x32xf32>
// GRAD-LABEL: braid.layer @block.W(
// GRAD: %[[PRE2:.*]] = braid.matmul_bias %{{[^ ]*}}, %{{[^ ]*}}, %{{[^ ]*}} {braid.phase = "W"} : (tensor<4x8x32xf32>, tensor<32x128xf32>, tensor<128xf32>)
// GRAD-NEXT: %[[D2:.*]] = braid.gelu_grad tanh %[[PRE2]]
// GRAD-NEXT: braid.matmul %{{.*}}, %[[D2]] {braid.phase = "W", transpose_a} : (tensor<4x8x32xf32>, tensor<4x8x128xf32>) -> tensor<4x32x128xf32>
// GRAD: %[[PRE3:.*]] = braid.matmul_bias
// GRAD-NEXT: %[[D3:.*]] = braid.gelu_grad tanh %[[PRE3]]
// GRAD-NEXT: braid.reduce sum %[[D3]] {axes = array<i64: 0, 1>, braid.phase = "W"} : (tensor<4x8x128xf32>) -> tensor<128xf32>

// LOSS: ok: 3 losses within 1e-12

// MLP-LABEL: func.func @forward
// MLP: %[[W1:.*]] = braid.param "w1" {block_of = #braid.sharding<@mesh, {{\[}}[], ["tp"]]>{{.*}} : tensor<8x8xf32>
// MLP: %[[B1:.*]] = braid.param "b1" {block_of = #braid.sharding<@mesh, {{\[}}["tp"]]>{{.*}} : tensor<8xf32>
// MLP: %[[A:.*]] = braid.matmul_bias %{{.*}}, %[[W1]], %[[B1]] gelu tanh : (tensor<2x8xf32>, tensor<8x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
// MLP: %[[W2:.*]] = braid.param "w2" {block_of = #braid.sharding<@mesh, {{\[}}["tp"], []]>{{.*}} : tensor<8x8xf32>
// MLP: %[[B2:.*]] = braid.param "b2" {init
// MLP-NOT: braid.all_reduce
// MLP: %[[AG:.*]] = braid.all_gather %[[A]] on @mesh ["tp"] {{.*}}dim = 1 : i64} : (tensor<2x8xf32>) -> tensor<2x16xf32>
// MLP: %[[WG:.*]] = braid.all_gather %[[W2]] on @mesh ["tp"] {{.*}}dim = 0 : i64} : (tensor<8x8xf32>) -> tensor<16x8xf32>
// MLP: braid.matmul_bias %[[AG]], %[[WG]], %[[B2]] : (tensor<2x16xf32>, tensor<16x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
// MLP-NOT: braid.all_reduce
braid.mesh @mesh {axes = ["dp", "tp"], shape = array<i64: 2, 2>}
func.func @forward(%x: tensor<4x8xf32> {braid.sharding = #braid.sharding<@mesh, [["dp"], []]>}) -> tensor<4x8xf32> {
  %w1 = braid.param "w1" {init = #braid.init<normal(0.5)>} : tensor<8x16xf32>
  %w1s = braid.shard %w1 : tensor<8x16xf32> to #braid.sharding<@mesh, [[], ["tp"]]>
  %b1 = braid.param "b1" {init = #braid.init<normal(0.5)>} : tensor<16xf32>
  %a = braid.matmul_bias %x, %w1s, %b1 gelu tanh : (tensor<4x8xf32>, tensor<8x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  %w2 = braid.param "w2" {init = #braid.init<normal(0.5)>} : tensor<16x8xf32>
  %w2s = braid.shard %w2 : tensor<16x8xf32> to #braid.sharding<@mesh, [["tp"], []]>
  %b2 = braid.param "b2" {init = #braid.init<normal(0.5)>} : tensor<8xf32>
  %y = braid.matmul_bias %a, %w2s, %b2 : (tensor<4x16xf32>, tensor<16x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}
