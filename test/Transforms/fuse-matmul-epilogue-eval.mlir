// Tests that braid-eval evaluates braid.matmul_bias as the matmul, bias add
// and GELU it replaces, with the same roundings: a GPT's logits (its
// forward, where every layer's fc GELU folds too) and its training steps
// (forward and backward; the GELU stays there, since its gradient reads
// the sum) print the same values and losses to the last digit with and
// without braid-fuse-matmul-epilogue, rounding each op to f32 and (--f64)
// not at all, and leave byte-identical weights and optimizer state (the
// tolerance is 0: the pass changes no floating-point operation).
// braid-fuse-elementwise after it still fuses the rest, also bit for bit.
//
// RUN: %PYTHON -m braid.models gpt --layers 2 --hidden 32 --heads 4 --seq 8 --vocab 64 --batch 2 -o %t.gpt.mlir
// RUN: braid-opt %t.gpt.mlir --braid-fuse-matmul-epilogue -o %t.gpt.fwd.mlir
// RUN: FileCheck %s --check-prefix=FWD < %t.gpt.fwd.mlir
// RUN: braid-eval %t.gpt.mlir --entry logits --seed 2 --dump > %t.gpt.logits.plain
// RUN: braid-eval %t.gpt.fwd.mlir --entry logits --seed 2 --dump > %t.gpt.logits.fused
// RUN: diff %t.gpt.logits.plain %t.gpt.logits.fused
//
// RUN: braid-opt %t.gpt.mlir --braid-autodiff --braid-train-step -o %t.gpt.train.mlir
// RUN: braid-opt %t.gpt.train.mlir --braid-fuse-matmul-epilogue -o %t.gpt.fused.mlir
// RUN: FileCheck %s --check-prefix=TRAIN < %t.gpt.fused.mlir
// RUN: braid-eval %t.gpt.train.mlir --steps 3 --seed 2 --save-weights %t.plain.w --save-optimizer-state %t.plain.s > %t.plain
// RUN: braid-eval %t.gpt.fused.mlir --steps 3 --seed 2 --save-weights %t.fused.w --save-optimizer-state %t.fused.s > %t.fused
// RUN: diff %t.plain %t.fused
// RUN: cmp %t.plain.w %t.fused.w
// RUN: cmp %t.plain.s %t.fused.s
// RUN: FileCheck %s --check-prefix=STEPS < %t.fused
// RUN: braid-eval %t.gpt.train.mlir --steps 2 --seed 2 --f64 > %t.plain64
// RUN: braid-eval %t.gpt.fused.mlir --steps 2 --seed 2 --f64 > %t.fused64
// RUN: diff %t.plain64 %t.fused64
// RUN: braid-opt %t.gpt.fused.mlir --braid-fuse-elementwise -o %t.gpt.both.mlir
// RUN: braid-eval %t.gpt.both.mlir --steps 3 --seed 2 > %t.both
// RUN: diff %t.plain %t.both

// Forward (the block every layer repeats): q, k, v and the attention
// projection, fc with its GELU, the MLP projection; the head has no bias.
// FWD-LABEL: braid.layer @block(
// FWD-COUNT-4: braid.matmul_bias {{[^g]*}} : (tensor<2x8x32xf32>, tensor<32x32xf32>, tensor<32xf32>)
// FWD: braid.matmul_bias {{.*}} gelu tanh : (tensor<2x8x32xf32>, tensor<32x128xf32>, tensor<128xf32>)
// FWD-NOT: braid.gelu
// FWD: braid.matmul_bias {{.*}} : (tensor<2x8x128xf32>, tensor<128x32xf32>, tensor<32xf32>)
// FWD-NOT: braid.matmul_bias
//
// Training: the same six in the forward piece, the GELU left out (its
// gradient reads the sum); nothing in the backward pieces.
// TRAIN-LABEL: braid.layer @block.F(
// TRAIN-COUNT-4: braid.matmul_bias {{.*}} {braid.phase = "F"} : (tensor<2x8x32xf32>, tensor<32x32xf32>, tensor<32xf32>)
// TRAIN: %[[FC:.*]] = braid.matmul_bias {{.*}} {braid.phase = "F"} : (tensor<2x8x32xf32>, tensor<32x128xf32>, tensor<128xf32>)
// TRAIN-NEXT: braid.gelu tanh %[[FC]]
// TRAIN: braid.matmul_bias {{.*}} {braid.phase = "F"} : (tensor<2x8x128xf32>, tensor<128x32xf32>, tensor<32xf32>)
// TRAIN-NOT: braid.matmul_bias
// TRAIN-LABEL: braid.layer @block(
// TRAIN-COUNT-6: braid.matmul_bias
// TRAIN-NOT: braid.matmul_bias
//
// STEPS: step 0 loss
// STEPS: step 2 loss
