// RUN: braid-opt %s --braid-mixed-precision="precision=bf16-mixed" | FileCheck %s
//
// A GPT fused before mixed precision computes what the unfused bf16 GPT
// computes, bit for bit: its logits, and 3 training steps' losses, weights
// and optimizer state (its biases start at zero, so the steps are what
// would tell a bf16 product rounded before its bias add).
// RUN: %PYTHON -m braid.models gpt --layers 2 --hidden 32 --heads 4 --seq 8 --vocab 64 --batch 2 -o %t.gpt.mlir
// RUN: braid-opt %t.gpt.mlir --braid-mixed-precision="precision=bf16-mixed" -o %t.mp.mlir
// RUN: braid-opt %t.gpt.mlir --braid-fuse-matmul-epilogue --braid-mixed-precision="precision=bf16-mixed" -o %t.fused.mlir
// RUN: FileCheck %s --check-prefix=GPT < %t.fused.mlir
// RUN: not grep 'braid.matmul_bias.*f32' %t.fused.mlir
// RUN: braid-eval %t.mp.mlir --entry logits --seed 2 --dump > %t.mp.logits
// RUN: braid-eval %t.fused.mlir --entry logits --seed 2 --dump > %t.fused.logits
// RUN: diff %t.mp.logits %t.fused.logits
// RUN: braid-opt %t.mp.mlir --braid-autodiff --braid-train-step -o %t.mp.train.mlir
// RUN: braid-opt %t.fused.mlir --braid-autodiff --braid-train-step -o %t.fused.train.mlir
// RUN: braid-eval %t.mp.train.mlir --steps 3 --seed 2 --save-weights %t.mp.w --save-optimizer-state %t.mp.s > %t.mp.steps
// RUN: braid-eval %t.fused.train.mlir --steps 3 --seed 2 --save-weights %t.fused.w --save-optimizer-state %t.fused.s > %t.fused.steps
// RUN: diff %t.mp.steps %t.fused.steps
// RUN: cmp %t.mp.w %t.fused.w
// RUN: cmp %t.mp.s %t.fused.s
// RUN: FileCheck %s --check-prefix=STEPS < %t.fused.steps

// Tests that braid.matmul_bias (a model fused before braid-mixed-precision)
// computes in bf16 as braid.matmul does (the ComputesInBF16 trait): its
// activation, weight and bias are read as bf16 working copies, its result
// is bf16 (braid-eval sums the products in double and holds them in f32
// until the bias is added, then rounds the sum to f32 and then to bf16:
// test/Eval/matmul-bias-bf16.mlir),
// and the layer norm after it reads it converted to f32.

// CHECK-LABEL: braid.layer @block(%{{.*}}: tensor<2x4x16xbf16>) -> tensor<2x4x16xbf16>
// CHECK-NEXT: %[[W:.*]] = braid.param "fc.weight" {{.*}} : tensor<16x64xf32>
// CHECK-NEXT: %[[W16:.*]] = braid.convert %[[W]] : tensor<16x64xf32> to tensor<16x64xbf16>
// CHECK-NEXT: %[[B:.*]] = braid.param "fc.bias" {{.*}} : tensor<64xf32>
// CHECK-NEXT: %[[B16:.*]] = braid.convert %[[B]] : tensor<64xf32> to tensor<64xbf16>
// CHECK-NEXT: %[[H:.*]] = braid.matmul_bias %arg0, %[[W16]], %[[B16]] gelu tanh : (tensor<2x4x16xbf16>, tensor<16x64xbf16>, tensor<64xbf16>) -> tensor<2x4x64xbf16>
// CHECK-NEXT: %[[P:.*]] = braid.param "proj.weight" {{.*}} : tensor<16x64xf32>
// CHECK-NEXT: %[[P16:.*]] = braid.convert %[[P]] : tensor<16x64xf32> to tensor<16x64xbf16>
// CHECK-NEXT: %[[PB:.*]] = braid.param "proj.bias" {{.*}} : tensor<16xf32>
// CHECK-NEXT: %[[PB16:.*]] = braid.convert %[[PB]] : tensor<16xf32> to tensor<16xbf16>
// CHECK-NEXT: %[[Y:.*]] = braid.matmul_bias %[[H]], %[[P16]], %[[PB16]] {transpose_b} : (tensor<2x4x64xbf16>, tensor<16x64xbf16>, tensor<16xbf16>) -> tensor<2x4x16xbf16>
// CHECK-NEXT: %[[Y32:.*]] = braid.convert %[[Y]] : tensor<2x4x16xbf16> to tensor<2x4x16xf32>
// CHECK-NEXT: %[[G:.*]] = braid.param "ln.weight" {{.*}} : tensor<16xf32>
// CHECK-NEXT: %[[LB:.*]] = braid.param "ln.bias" {{.*}} : tensor<16xf32>
// CHECK-NEXT: %[[N:.*]] = braid.layer_norm %[[Y32]], %[[G]], %[[LB]]{{.*}} : (tensor<2x4x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
// CHECK-NEXT: %[[N16:.*]] = braid.convert %[[N]] : tensor<2x4x16xf32> to tensor<2x4x16xbf16>
// CHECK-NEXT: braid.yield %[[N16]] : tensor<2x4x16xbf16>

// The GPT's six biased products a layer, fused, are bf16.
// GPT-LABEL: braid.layer @block(
// GPT-COUNT-4: braid.matmul_bias {{[^g]*}} : (tensor<2x8x32xbf16>, tensor<32x32xbf16>, tensor<32xbf16>) -> tensor<2x8x32xbf16>
// GPT: braid.matmul_bias {{.*}} gelu tanh : (tensor<2x8x32xbf16>, tensor<32x128xbf16>, tensor<128xbf16>) -> tensor<2x8x128xbf16>
// GPT: braid.matmul_bias {{.*}} : (tensor<2x8x128xbf16>, tensor<128x32xbf16>, tensor<32xbf16>) -> tensor<2x8x32xbf16>
// GPT-NOT: braid.matmul_bias

// STEPS: step 0 loss
// STEPS: step 2 loss

braid.layer @block(%x: tensor<2x4x16xf32>) -> tensor<2x4x16xf32> {
  %w = braid.param "fc.weight" {init = #braid.init<normal(0.02)>} : tensor<16x64xf32>
  %b = braid.param "fc.bias" {init = #braid.init<zeros>} : tensor<64xf32>
  %h = braid.matmul_bias %x, %w, %b gelu tanh : (tensor<2x4x16xf32>, tensor<16x64xf32>, tensor<64xf32>) -> tensor<2x4x64xf32>
  %p = braid.param "proj.weight" {init = #braid.init<normal(0.02)>} : tensor<16x64xf32>
  %pb = braid.param "proj.bias" {init = #braid.init<zeros>} : tensor<16xf32>
  %y = braid.matmul_bias %h, %p, %pb {transpose_b} : (tensor<2x4x64xf32>, tensor<16x64xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
  %g = braid.param "ln.weight" {init = #braid.init<ones>} : tensor<16xf32>
  %lb = braid.param "ln.bias" {init = #braid.init<zeros>} : tensor<16xf32>
  %n = braid.layer_norm %y, %g, %lb {epsilon = 1.0e-05 : f64} : (tensor<2x4x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
  braid.yield %n : tensor<2x4x16xf32>
}
