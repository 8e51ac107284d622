// RUN: braid-opt %s --split-input-file --braid-legalize-bf16 | FileCheck %s
// RUN: braid-opt %s --split-input-file --braid-legalize-bf16 --braid-fuse-matmul-epilogue | FileCheck %s --check-prefix=FUSE

// Tests that a bf16 product whose only use is its bias add (a vector of the
// product's last dimension, either operand order) is not rounded: the add
// sums the bias with the f32 product in f32, then rounds to bf16, as
// braid-eval computes the bf16 program (isBF16BiasProduct) and PyTorch's
// bf16 addmm does; so
// braid-fuse-matmul-epilogue folds the add into a braid.matmul_bias of bf16
// operands. The add's own round stays, and a GELU after it reads the
// rounded sum (it does not fold).

// CHECK-LABEL: func.func @linear
// CHECK: %[[M:.*]] = braid.matmul %{{.*}}, %{{.*}} {braid.bf16_operands} : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<2x4xf32>
// CHECK-NEXT: %[[A:.*]] = braid.add %{{.*}}, %[[M]] : (tensor<4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
// CHECK-NEXT: %[[AR:.*]] = braid.round %[[A]] to bf16
// CHECK-NEXT: %[[G:.*]] = braid.gelu tanh %[[AR]]
// CHECK-NEXT: braid.round %[[G]] to bf16
// FUSE-LABEL: func.func @linear
// FUSE: %[[MB:.*]] = braid.matmul_bias %{{.*}}, %{{.*}}, %{{.*}} {braid.bf16_operands} : (tensor<2x8xf32>, tensor<8x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
// FUSE-NEXT: %[[R:.*]] = braid.round %[[MB]] to bf16
// FUSE-NEXT: braid.gelu tanh %[[R]]
func.func @linear(%x: tensor<2x8xbf16>, %w: tensor<8x4xbf16>, %b: tensor<4xbf16>) -> tensor<2x4xbf16> {
  %m = braid.matmul %x, %w : (tensor<2x8xbf16>, tensor<8x4xbf16>) -> tensor<2x4xbf16>
  %a = braid.add %b, %m : (tensor<4xbf16>, tensor<2x4xbf16>) -> tensor<2x4xbf16>
  %g = braid.gelu tanh %a : tensor<2x4xbf16>
  return %g : tensor<2x4xbf16>
}

// -----

// Tests that a product read again, or added to a full-size tensor or a
// column vector, is rounded where computed: nothing folds.

// CHECK-LABEL: func.func @not_bias
// CHECK: %[[M1:.*]] = braid.matmul
// CHECK-NEXT: braid.round %[[M1]] to bf16
// CHECK: %[[M2:.*]] = braid.matmul
// CHECK-NEXT: braid.round %[[M2]] to bf16
// CHECK: %[[M3:.*]] = braid.matmul
// CHECK-NEXT: braid.round %[[M3]] to bf16
// FUSE-LABEL: func.func @not_bias
// FUSE-NOT: braid.matmul_bias
func.func @not_bias(%x: tensor<2x8xbf16>, %w: tensor<8x4xbf16>, %b: tensor<4xbf16>, %full: tensor<2x4xbf16>, %col: tensor<2x1xbf16>) -> (tensor<2x4xbf16>, tensor<2x4xbf16>, tensor<2x4xbf16>, tensor<2x4xbf16>) {
  %m1 = braid.matmul %x, %w : (tensor<2x8xbf16>, tensor<8x4xbf16>) -> tensor<2x4xbf16>
  %a1 = braid.add %m1, %b : (tensor<2x4xbf16>, tensor<4xbf16>) -> tensor<2x4xbf16>
  %m2 = braid.matmul %x, %w : (tensor<2x8xbf16>, tensor<8x4xbf16>) -> tensor<2x4xbf16>
  %a2 = braid.add %m2, %full : (tensor<2x4xbf16>, tensor<2x4xbf16>) -> tensor<2x4xbf16>
  %m3 = braid.matmul %x, %w : (tensor<2x8xbf16>, tensor<8x4xbf16>) -> tensor<2x4xbf16>
  %a3 = braid.add %m3, %col : (tensor<2x4xbf16>, tensor<2x1xbf16>) -> tensor<2x4xbf16>
  return %a1, %m1, %a2, %a3 : tensor<2x4xbf16>, tensor<2x4xbf16>, tensor<2x4xbf16>, tensor<2x4xbf16>
}

// -----

// Tests that an f32 program's bias product is left as it was (no round).

// CHECK-LABEL: func.func @f32
// CHECK-NOT: braid.round
// FUSE-LABEL: func.func @f32
// FUSE: braid.matmul_bias
func.func @f32(%x: tensor<2x8xf32>, %w: tensor<8x4xf32>, %b: tensor<4xf32>) -> tensor<2x4xf32> {
  %m = braid.matmul %x, %w : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<2x4xf32>
  %a = braid.add %m, %b : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  return %a : tensor<2x4xf32>
}
