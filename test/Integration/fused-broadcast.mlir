// Tests the fused loops' indexing and every fusible op numerically: a
// region whose operands broadcast along leading, middle and last dimensions
// (and a rank-0 one), and regions with each unary op and activation
// gradient, compiled by braidc (fused by default) print exactly what the
// same program compiled with --no-fuse prints (one kernel per op, every
// value dumped to the last digit), and agree with braid-eval element by
// element within 1e-5.
//
// RUN: braid-opt %s --braid-fuse-elementwise | FileCheck %s --check-prefix=IR
// RUN: braidc %s --entry f -o %t.fused
// RUN: braidc %s --entry f --no-fuse -o %t.plain
// RUN: %t.fused --seed 5 --dump > %t.fused.out
// RUN: %t.plain --seed 5 --dump > %t.plain.out
// RUN: diff %t.fused.out %t.plain.out
// RUN: braid-eval %s --entry f --seed 5 --dump > %t.eval
// RUN: %PYTHON %S/Inputs/compare-results.py %t.fused.out %t.eval --rtol 1e-5 --tensors | FileCheck %s

// IR-COUNT-2: braid.fused
// IR-NOT: braid.fused
// CHECK: ok: 3 tensors within 1e-05 element by element

func.func @f(%x: tensor<2x3x4xf32> {braid.name = "x"}, %a: tensor<3x1xf32> {braid.name = "a"}, %b: tensor<4xf32> {braid.name = "b"}, %c: tensor<2x1x4xf32> {braid.name = "c"}, %s: tensor<f32> {braid.name = "s"}, %d: tensor<2x3x1xf32> {braid.name = "d"}) -> (tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>) {
  %0 = braid.add %x, %a : (tensor<2x3x4xf32>, tensor<3x1xf32>) -> tensor<2x3x4xf32>
  %1 = braid.mul %0, %b : (tensor<2x3x4xf32>, tensor<4xf32>) -> tensor<2x3x4xf32>
  %2 = braid.sub %1, %c : (tensor<2x3x4xf32>, tensor<2x1x4xf32>) -> tensor<2x3x4xf32>
  %3 = braid.div %2, %s : (tensor<2x3x4xf32>, tensor<f32>) -> tensor<2x3x4xf32>
  %4 = braid.add %d, %3 : (tensor<2x3x1xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %5 = braid.gelu tanh %4 : tensor<2x3x4xf32>
  %6 = braid.silu %5 : tensor<2x3x4xf32>
  %7 = braid.relu %6 : tensor<2x3x4xf32>
  %8 = braid.neg %4 : tensor<2x3x4xf32>
  %9 = braid.exp %8 : tensor<2x3x4xf32>
  %10 = braid.sqrt %9 : tensor<2x3x4xf32>
  %11 = braid.rsqrt %10 : tensor<2x3x4xf32>
  %12 = braid.gelu_grad tanh %4, %11 : tensor<2x3x4xf32>
  %13 = braid.silu_grad %4, %12 : tensor<2x3x4xf32>
  %14 = braid.relu_grad %4, %13 : tensor<2x3x4xf32>
  %r = braid.reduce sum %14 {axes = array<i64: 2>} : (tensor<2x3x4xf32>) -> tensor<2x3xf32>
  %rr = braid.reshape %r : (tensor<2x3xf32>) -> tensor<2x3x1xf32>
  %15 = braid.mul %x, %rr : (tensor<2x3x4xf32>, tensor<2x3x1xf32>) -> tensor<2x3x4xf32>
  %16 = braid.add %15, %14 : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  return %7, %14, %16 : tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>
}
