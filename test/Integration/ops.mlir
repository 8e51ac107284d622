// Tests that the lowerings of ops the GPT does not use compute what
// braid-eval computes: every element of every tensor result agrees within
// 1e-5 (relative, with the tensor's RMS as the floor; see
// Inputs/compare-results.py), on inputs generated from the seed.
//
// RUN: braidc %s --entry ops -o %t.prog
// RUN: %t.prog --seed 7 --dump > %t.out
// RUN: braid-eval %s --entry ops --seed 7 --dump > %t.eval
// RUN: %PYTHON %S/Inputs/compare-results.py %t.out %t.eval --rtol 1e-5 --tensors | FileCheck %s

// RUN: braidc %s --entry scan -o %t.scan
// RUN: %t.scan --seed 7 --dump > %t.scan.out
// RUN: braid-eval %s --entry scan --seed 7 --dump > %t.scan.eval
// RUN: %PYTHON %S/Inputs/compare-results.py %t.scan.out %t.scan.eval --rtol 1e-5 --tensors | FileCheck %s --check-prefix=SCAN

// CHECK: ok: 9 tensors within 1e-05 element by element
// SCAN: ok: 2 tensors within 1e-05 element by element

func.func @ops(%x: tensor<4x6xf32> {braid.name = "x"}, %y: tensor<4x6xf32> {braid.name = "y"}) -> (tensor<2x3xf32>, tensor<4x12xf32>, tensor<6x4xf32>, tensor<4x6xf32>, tensor<4x6xf32>, tensor<4x6xf32>, tensor<4x6xf32>, tensor<4x6xf32>, tensor<3x6xf32>) {
  %s = braid.slice %x {start = array<i64: 1, 0>, limit = array<i64: 3, 6>, stride = array<i64: 1, 2>} : (tensor<4x6xf32>) -> tensor<2x3xf32>
  %c = braid.concat %x, %y {axis = 1 : i64} : (tensor<4x6xf32>, tensor<4x6xf32>) -> tensor<4x12xf32>
  %t = braid.transpose %y {permutation = array<i64: 1, 0>} : (tensor<4x6xf32>) -> tensor<6x4xf32>
  %sm = braid.softmax %x {axis = 0 : i64} : tensor<4x6xf32>
  %m = braid.reduce max %x {axes = array<i64: 1>} : (tensor<4x6xf32>) -> tensor<4xf32>
  %mg = braid.reduce_max_grad %x, %m {axes = array<i64: 1>} : (tensor<4x6xf32>, tensor<4xf32>) -> tensor<4x6xf32>
  %sg = braid.slice_grad %s {start = array<i64: 1, 0>, limit = array<i64: 3, 6>, stride = array<i64: 1, 2>} : (tensor<2x3xf32>) -> tensor<4x6xf32>
  %k = braid.constant dense<[1.0, -2.0, 3.0, 0.5, 0.25, 4.0]> : tensor<6xf32>
  %d = braid.div %y, %k : (tensor<4x6xf32>, tensor<6xf32>) -> tensor<4x6xf32>
  %e = braid.exp %d : tensor<4x6xf32>
  %r = braid.rms_norm %x, %k : (tensor<4x6xf32>, tensor<6xf32>) -> tensor<4x6xf32>
  %rg = braid.rms_norm_grad %x, %k, %y : (tensor<4x6xf32>, tensor<6xf32>, tensor<4x6xf32>) -> tensor<4x6xf32>
  %sl = braid.silu_grad %x, %y : tensor<4x6xf32>
  %rl = braid.relu_grad %x, %sl : tensor<4x6xf32>
  %sum = braid.add %rg, %rl : (tensor<4x6xf32>, tensor<4x6xf32>) -> tensor<4x6xf32>
  %b = braid.broadcast %k : (tensor<6xf32>) -> tensor<3x6xf32>
  return %s, %c, %t, %sm, %mg, %sg, %e, %sum, %b : tensor<2x3xf32>, tensor<4x12xf32>, tensor<6x4xf32>, tensor<4x6xf32>, tensor<4x6xf32>, tensor<4x6xf32>, tensor<4x6xf32>, tensor<4x6xf32>, tensor<3x6xf32>
}

// A reversed scan: a carried value and stacked operands and results.
braid.layer @cell(%h: tensor<4xf32>, %x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %w = braid.param "w" {init = #braid.init<normal(1.0)>} : tensor<4xf32>
  %hw = braid.mul %h, %w : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %y = braid.add %hw, %x : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %e = braid.exp %y : tensor<4xf32>
  braid.yield %y, %e : tensor<4xf32>, tensor<4xf32>
}
func.func @scan(%h: tensor<4xf32> {braid.name = "h"}, %xs: tensor<3x4xf32> {braid.name = "xs"}) -> (tensor<4xf32>, tensor<3x4xf32>) {
  %r:2 = braid.repeat @cell(%h, %xs) {prefix = "c", count = 3 : i64, first = 1 : i64, carried = 1 : i64, reverse} : (tensor<4xf32>, tensor<3x4xf32>) -> (tensor<4xf32>, tensor<3x4xf32>)
  return %r#0, %r#1 : tensor<4xf32>, tensor<3x4xf32>
}
