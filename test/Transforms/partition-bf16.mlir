// Tests braid-partition under bf16-mixed precision: data parallelism
// reduces each parameter's f32 gradient (after the exact bf16 -> f32
// convert of its working copy's gradient), not the bf16 one, which would
// round the sum to bf16; the tied wte (embedding and LM head) gets one
// reduction of its summed f32 gradient, not one per use. ZeRO's
// reduce_scatter likewise; tensor parallelism's forward sums stay bf16 and
// its input gradients into a norm's backward are summed in f32.
// RUN: %PYTHON -m braid.models gpt --layers 1 --hidden 32 --heads 4 --seq 8 --vocab 64 --batch 4 -o %t.mlir
// RUN: braid-opt %t.mlir --braid-mixed-precision=precision=bf16-mixed --braid-autodiff --braid-train-step="lr=1e-3 clip-norm=1" --braid-shard="dp=2" --braid-propagate-sharding --braid-partition -o %t.dp2.mlir
// RUN: FileCheck %s --check-prefix=DP < %t.dp2.mlir
// RUN: not grep -E 'braid\.(all_reduce|reduce_scatter) .*\["dp"\].*xbf16>' %t.dp2.mlir
// RUN: braid-opt %t.mlir --braid-mixed-precision=precision=bf16-mixed --braid-autodiff --braid-train-step="lr=1e-3 clip-norm=1" --braid-shard="dp=2 zero=2" --braid-propagate-sharding --braid-partition -o %t.zero2.mlir
// RUN: FileCheck %s --check-prefix=ZERO < %t.zero2.mlir
// RUN: not grep -E 'braid\.(all_reduce|reduce_scatter) .*\["dp"\].*xbf16>' %t.zero2.mlir
// RUN: braid-opt %t.mlir --braid-mixed-precision=precision=bf16-mixed --braid-autodiff --braid-train-step="lr=1e-3 clip-norm=1" --braid-shard="dp=2 tp=2" --braid-propagate-sharding --braid-partition -o %t.dp2tp2.mlir
// RUN: FileCheck %s --check-prefix=TP < %t.dp2tp2.mlir
// RUN: not grep -E 'braid\.(all_reduce|reduce_scatter) .*\["dp"\].*xbf16>' %t.dp2tp2.mlir

// wte's gradient: one f32 all_reduce in the step.
// DP-LABEL: func.func @train_step
// DP: braid.all_reduce sum {{.*}} on @mesh ["dp"] {{.*}}: tensor<64x32xf32>
// DP-NOT: braid.all_reduce {{.*}}: tensor<64x32xf32>
// DP-LABEL: func.func

// ZERO-LABEL: func.func @train_step
// ZERO: braid.reduce_scatter {{.*}} on @mesh ["dp"] {{.*}}: (tensor<64x32xf32>) -> tensor<32x32xf32>
// ZERO-NOT: braid.reduce_scatter {{.*}}: (tensor<64x32xf32>)
// ZERO-LABEL: func.func

// Tensor parallelism (sharding.md, pending sums): the forward's sums stay
// bf16 (each layer's row-parallel attention and MLP projections, summed
// before their bias adds; the vocabulary-parallel embedding); the input
// gradients that reach a norm's backward through a widening convert are
// summed in f32 (each layer's ln_2 and ln_1, whose gradient is the sum
// dq + dk + dv passes on, and ln_f's from the LM head); W sums nothing over
// tp, and the step's other tp sums are the gradient norm's f32 scalars.
// TP-LABEL: braid.layer @block.F(
// TP-NOT: braid.all_reduce {{.*}}["tp"]
// TP: %[[AP:.*]] = braid.matmul %{{.*}}, %{{.*}} {braid.phase = "F"} : (tensor<2x8x16xbf16>, tensor<16x32xbf16>) -> tensor<2x8x32xbf16>
// TP-NOT: braid.all_reduce {{.*}}["tp"]
// TP: %[[APS:.*]] = braid.all_reduce sum %[[AP]] on @mesh ["tp"] {{.*}} : tensor<2x8x32xbf16>
// TP-NEXT: braid.add %[[APS]], %{{.*}} : (tensor<2x8x32xbf16>, tensor<32xbf16>) -> tensor<2x8x32xbf16>
// TP-NOT: braid.all_reduce {{.*}}["tp"]
// TP: %[[MP:.*]] = braid.matmul %{{.*}}, %{{.*}} {braid.phase = "F"} : (tensor<2x8x64xbf16>, tensor<64x32xbf16>) -> tensor<2x8x32xbf16>
// TP-NOT: braid.all_reduce {{.*}}["tp"]
// TP: %[[MPS:.*]] = braid.all_reduce sum %[[MP]] on @mesh ["tp"] {{.*}} : tensor<2x8x32xbf16>
// TP-NEXT: braid.add %[[MPS]], %{{.*}} : (tensor<2x8x32xbf16>, tensor<32xbf16>) -> tensor<2x8x32xbf16>
// TP-NOT: braid.all_reduce {{.*}}["tp"]
// TP-LABEL: braid.layer @block.B(
// TP-NOT: braid.all_reduce {{.*}}["tp"]
// TP: %[[DFC:.*]] = braid.matmul %{{.*}}, %{{.*}} {braid.phase = "B", transpose_b} : (tensor<2x8x64xbf16>, tensor<32x64xbf16>) -> tensor<2x8x32xbf16>
// TP-NEXT: %[[DFCW:.*]] = braid.convert %[[DFC]] {{.*}} : tensor<2x8x32xbf16> to tensor<2x8x32xf32>
// TP-NOT: braid.all_reduce {{.*}}["tp"]
// TP: %[[DFCS:.*]] = braid.all_reduce sum %[[DFCW]] on @mesh ["tp"] {{.*}} : tensor<2x8x32xf32>
// TP-NEXT: braid.layer_norm_grad %{{.*}}, %{{.*}}, %[[DFCS]]
// TP-NOT: braid.all_reduce {{.*}}["tp"]
// TP: braid.attention_grad
// TP-NOT: braid.all_reduce {{.*}}["tp"]
// TP: %[[DKV:.*]] = braid.add %{{.*}}, %{{.*}} {braid.phase = "B"} : (tensor<2x8x32xbf16>, tensor<2x8x32xbf16>) -> tensor<2x8x32xbf16>
// TP-NOT: braid.all_reduce {{.*}}["tp"]
// TP: %[[DQKV:.*]] = braid.add %[[DKV]], %{{.*}} {braid.phase = "B"} : (tensor<2x8x32xbf16>, tensor<2x8x32xbf16>) -> tensor<2x8x32xbf16>
// TP-NEXT: %[[DQKVW:.*]] = braid.convert %[[DQKV]] {{.*}} : tensor<2x8x32xbf16> to tensor<2x8x32xf32>
// TP-NOT: braid.all_reduce {{.*}}["tp"]
// TP: %[[DQKVS:.*]] = braid.all_reduce sum %[[DQKVW]] on @mesh ["tp"] {{.*}} : tensor<2x8x32xf32>
// TP-NEXT: braid.layer_norm_grad %{{.*}}, %{{.*}}, %[[DQKVS]]
// TP-NOT: braid.all_reduce {{.*}}["tp"]
// TP-LABEL: braid.layer @block.W(
// TP-NOT: braid.all_reduce {{.*}}["tp"]
// TP-LABEL: braid.layer @block(
// TP-LABEL: func.func @train_step(
// TP-NOT: braid.all_reduce {{.*}}["tp"]
// TP: %[[E:.*]] = braid.embedding {{.*}}vocab_axes = ["tp"]} : (tensor<32x32xbf16>, tensor<2x8xi32>) -> tensor<2x8x32xbf16>
// TP-NEXT: %[[ES:.*]] = braid.all_reduce sum %[[E]] on @mesh ["tp"] {{.*}} : tensor<2x8x32xbf16>
// TP-NEXT: braid.add %[[ES]], %{{.*}} : (tensor<2x8x32xbf16>, tensor<8x32xbf16>) -> tensor<2x8x32xbf16>
// TP-NOT: braid.all_reduce {{.*}}["tp"]
// TP: %[[DH:.*]] = braid.matmul %{{.*}}, %{{.*}} {braid.phase = "B"} : (tensor<2x8x32xbf16>, tensor<32x32xbf16>) -> tensor<2x8x32xbf16>
// TP-NOT: braid.all_reduce {{.*}}["tp"]
// TP: %[[DHW:.*]] = braid.convert %[[DH]] {{.*}} : tensor<2x8x32xbf16> to tensor<2x8x32xf32>
// TP-NEXT: %[[DHS:.*]] = braid.all_reduce sum %[[DHW]] on @mesh ["tp"] {{.*}} : tensor<2x8x32xf32>
// TP-NEXT: braid.layer_norm_grad %{{.*}}, %{{.*}}, %[[DHS]]
// TP-COUNT-11: braid.all_reduce sum %{{.*}} on @mesh ["tp"] {{.*}}sum_squares{{.*}} : tensor<f32>
// TP-NOT: braid.all_reduce {{.*}}["tp"]
// TP-LABEL: func.func @logits(
