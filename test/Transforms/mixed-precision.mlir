// RUN: braid-opt %s --braid-mixed-precision="precision=bf16-mixed" | FileCheck %s
// RUN: braid-opt %s --braid-mixed-precision | FileCheck %s --check-prefix=F32
// RUN: braid-opt %s --braid-mixed-precision="precision=bf16-mixed" --braid-autodiff | FileCheck %s --check-prefix=GRAD
// RUN: braid-opt %s --braid-mixed-precision="precision=bf16-mixed" | braid-opt | FileCheck %s
// RUN: not braid-opt %s --braid-mixed-precision="precision=fp8" 2>&1 | FileCheck %s --check-prefix=UNKNOWN

// Where the casts go on a small GPT-like model (a layer norm, a linear layer
// with bias, tanh GELU and a residual add in a repeated layer; a tied
// embedding and LM head; cross-entropy).
// - The layer's argument and result (activations) are bf16.
// - The layer norm computes in f32: its bf16 input is converted to f32, its
//   f32 scale and bias are read as they are, and its f32 result is
//   converted once to bf16 for the matmul.
// - Each f32 parameter read that feeds a bf16 op has one bf16 working copy,
//   right after the read (wte's serves both the embedding and the LM head).
// - matmul, add and gelu are bf16; the logits are converted to f32 for the
//   cross-entropy, whose loss is f32; the signature of @forward is
//   unchanged.

// CHECK-LABEL: braid.layer @block(%{{.*}}: tensor<2x4x16xbf16>) -> tensor<2x4x16xbf16>
// CHECK-NEXT: %[[X32:.*]] = braid.convert %arg0 : tensor<2x4x16xbf16> to tensor<2x4x16xf32>
// CHECK-NEXT: %[[G:.*]] = braid.param "ln.weight" {{.*}} : tensor<16xf32>
// CHECK-NEXT: %[[B:.*]] = braid.param "ln.bias" {{.*}} : tensor<16xf32>
// CHECK-NEXT: %[[LN:.*]] = braid.layer_norm %[[X32]], %[[G]], %[[B]]{{.*}} : (tensor<2x4x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
// CHECK-NEXT: %[[LN16:.*]] = braid.convert %[[LN]] : tensor<2x4x16xf32> to tensor<2x4x16xbf16>
// CHECK-NEXT: %[[W:.*]] = braid.param "fc.weight" {{.*}} : tensor<16x16xf32>
// CHECK-NEXT: %[[W16:.*]] = braid.convert %[[W]] : tensor<16x16xf32> to tensor<16x16xbf16>
// CHECK-NEXT: %[[XW:.*]] = braid.matmul %[[LN16]], %[[W16]] : (tensor<2x4x16xbf16>, tensor<16x16xbf16>) -> tensor<2x4x16xbf16>
// CHECK-NEXT: %[[FB:.*]] = braid.param "fc.bias" {{.*}} : tensor<16xf32>
// CHECK-NEXT: %[[FB16:.*]] = braid.convert %[[FB]] : tensor<16xf32> to tensor<16xbf16>
// CHECK-NEXT: %[[H:.*]] = braid.add %[[XW]], %[[FB16]] : (tensor<2x4x16xbf16>, tensor<16xbf16>) -> tensor<2x4x16xbf16>
// CHECK-NEXT: %[[A:.*]] = braid.gelu tanh %[[H]] : tensor<2x4x16xbf16>
// CHECK-NEXT: %[[Y:.*]] = braid.add %arg0, %[[A]] : (tensor<2x4x16xbf16>, tensor<2x4x16xbf16>) -> tensor<2x4x16xbf16>
// CHECK-NEXT: braid.yield %[[Y]] : tensor<2x4x16xbf16>

// CHECK-LABEL: func.func @forward(%{{.*}}: tensor<2x4xi32> {{.*}}, %{{.*}}: tensor<2x4xi32> {{.*}}) -> tensor<f32>
// CHECK-NEXT: %[[WTE:.*]] = braid.param "wte.weight" {{.*}} : tensor<32x16xf32>
// CHECK-NEXT: %[[WTE16:.*]] = braid.convert %[[WTE]] : tensor<32x16xf32> to tensor<32x16xbf16>
// CHECK-NEXT: %[[E:.*]] = braid.embedding %[[WTE16]], %arg0 : (tensor<32x16xbf16>, tensor<2x4xi32>) -> tensor<2x4x16xbf16>
// CHECK-NEXT: %[[R:.*]] = braid.repeat @block(%[[E]]) {{.*}} : (tensor<2x4x16xbf16>) -> tensor<2x4x16xbf16>
// CHECK-NEXT: %[[L:.*]] = braid.matmul %[[R]], %[[WTE16]] {transpose_b} : (tensor<2x4x16xbf16>, tensor<32x16xbf16>) -> tensor<2x4x32xbf16>
// CHECK-NEXT: %[[L32:.*]] = braid.convert %[[L]] : tensor<2x4x32xbf16> to tensor<2x4x32xf32>
// CHECK-NEXT: %[[LOSS:.*]] = braid.cross_entropy %[[L32]], %arg1 : (tensor<2x4x32xf32>, tensor<2x4xi32>) -> tensor<f32>
// CHECK-NEXT: return %[[LOSS]] : tensor<f32>

// A function returning a bf16 value returns it converted to f32.
// CHECK-LABEL: func.func @logits(%{{.*}}: tensor<2x4xi32> {{.*}}) -> tensor<2x4x32xf32>
// CHECK: %[[L:.*]] = braid.matmul {{.*}} -> tensor<2x4x32xbf16>
// CHECK-NEXT: %[[L32:.*]] = braid.convert %[[L]] : tensor<2x4x32xbf16> to tensor<2x4x32xf32>
// CHECK-NEXT: return %[[L32]] : tensor<2x4x32xf32>

// F32-NOT: braid.convert
// F32-NOT: bf16

// The gradient of each working copy is bf16 and is converted to f32 for its
// master weight: the gradient function returns f32 gradients.
// GRAD-LABEL: braid.layer @block.W
// GRAD: %[[DWB:.*]] = braid.matmul {{.*}} {braid.phase = "W", transpose_a} : (tensor<2x4x16xbf16>, tensor<2x4x16xbf16>) -> tensor<2x16x16xbf16>
// GRAD-NEXT: %[[DW:.*]] = braid.reduce sum %[[DWB]] {{.*}} -> tensor<16x16xbf16>
// GRAD-NEXT: braid.convert %[[DW]] {braid.phase = "W"} : tensor<16x16xbf16> to tensor<16x16xf32>
// GRAD-LABEL: func.func @forward_grad
// GRAD-SAME: -> (tensor<f32>, tensor<32x16xf32> {braid.gradient_of = "wte.weight"}
// GRAD-SAME: tensor<1x16x16xf32> {braid.gradient_of = "h.{}.fc.weight"

// UNKNOWN: error: braid-mixed-precision: unknown precision 'fp8'; expected f32 or bf16-mixed

braid.layer @block(%x: tensor<2x4x16xf32>) -> tensor<2x4x16xf32> {
  %g = braid.param "ln.weight" {init = #braid.init<ones>} : tensor<16xf32>
  %b = braid.param "ln.bias" {init = #braid.init<zeros>} : tensor<16xf32>
  %n = braid.layer_norm %x, %g, %b {epsilon = 1.0e-05 : f64} : (tensor<2x4x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
  %w = braid.param "fc.weight" {init = #braid.init<normal(0.02)>} : tensor<16x16xf32>
  %xw = braid.matmul %n, %w : (tensor<2x4x16xf32>, tensor<16x16xf32>) -> tensor<2x4x16xf32>
  %fb = braid.param "fc.bias" {init = #braid.init<zeros>} : tensor<16xf32>
  %h = braid.add %xw, %fb : (tensor<2x4x16xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
  %a = braid.gelu tanh %h : tensor<2x4x16xf32>
  %y = braid.add %x, %a : (tensor<2x4x16xf32>, tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
  braid.yield %y : tensor<2x4x16xf32>
}

func.func @forward(%tokens: tensor<2x4xi32> {braid.name = "tokens", braid.range = 32 : i64},
                   %labels: tensor<2x4xi32> {braid.name = "labels", braid.range = 32 : i64}) -> tensor<f32> {
  %wte = braid.param "wte.weight" {init = #braid.init<normal(0.02)>} : tensor<32x16xf32>
  %e = braid.embedding %wte, %tokens : (tensor<32x16xf32>, tensor<2x4xi32>) -> tensor<2x4x16xf32>
  %h = braid.repeat @block(%e) {prefix = "h", count = 1 : i64} : (tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
  %logits = braid.matmul %h, %wte {transpose_b} : (tensor<2x4x16xf32>, tensor<32x16xf32>) -> tensor<2x4x32xf32>
  %loss = braid.cross_entropy %logits, %labels : (tensor<2x4x32xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

func.func @logits(%tokens: tensor<2x4xi32> {braid.name = "tokens", braid.range = 32 : i64}) -> tensor<2x4x32xf32> {
  %wte = braid.param "wte.weight" {init = #braid.init<normal(0.02)>} : tensor<32x16xf32>
  %e = braid.embedding %wte, %tokens : (tensor<32x16xf32>, tensor<2x4xi32>) -> tensor<2x4x16xf32>
  %h = braid.repeat @block(%e) {prefix = "h", count = 1 : i64} : (tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
  %logits = braid.matmul %h, %wte {transpose_b} : (tensor<2x4x16xf32>, tensor<32x16xf32>) -> tensor<2x4x32xf32>
  return %logits : tensor<2x4x32xf32>
}
