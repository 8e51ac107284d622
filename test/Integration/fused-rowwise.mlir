// Tests every row-wise op in a fused region numerically (braid.fused with
// layer_norm, rms_norm, their gradients, softmax, cross_entropy and its
// gradient): regions with elementwise ops before and after the row-wise
// op, a softmax of scaled scores, a loss and its gradient over logits the
// region computes (sharing their statistics), compiled by braidc (fused by
// default) print exactly what the same program compiled with --no-fuse
// prints (one kernel per op, every value dumped to the last digit; run on
// one thread, where the loss kernel sums the rows in row order as the
// fused loop does), and agree with braid-eval element by element within
// 1e-5 (the losses to the last digit). A label out of range stops the fused program with the unfused
// program's message, naming the cross_entropy.
//
// RUN: braid-opt %s --braid-fuse-elementwise | FileCheck %s --check-prefix=IR
// RUN: braidc %s --entry f -o %t.fused
// RUN: braidc %s --entry f --no-fuse -o %t.plain
// RUN: env OMP_NUM_THREADS=1 %t.fused --seed 5 --dump > %t.fused.out
// RUN: env OMP_NUM_THREADS=1 %t.plain --seed 5 --dump > %t.plain.out
// RUN: diff %t.fused.out %t.plain.out
// RUN: env OMP_NUM_THREADS=2 %t.fused --seed 5 --dump > %t.fused2.out
// RUN: diff %t.fused.out %t.fused2.out
// RUN: braid-eval %s --entry f --seed 5 --dump > %t.eval
// RUN: %PYTHON %S/Inputs/compare-results.py %t.fused.out %t.eval --rtol 1e-5 --tensors | FileCheck %s
// RUN: cat %t.fused.out %t.eval | FileCheck %s --check-prefix=LOSS
// RUN: braidc %s --entry f --emit cpp -o %t.cpp
// RUN: FileCheck %s --check-prefix=CPP < %t.cpp
// RUN: sed 's/braid.range = 8/braid.range = 9/' %s > %t.bad.mlir
// RUN: braidc %t.bad.mlir --entry f -o %t.bad
// RUN: not %t.bad --seed 5 2>&1 | FileCheck %s --check-prefix=BAD

// The two losses (rank-0 results, not compared above) are braid-eval's.
// LOSS: {{^}}result6 [[L6:[0-9.e+-]+]]{{$}}
// LOSS: {{^}}result8 [[L8:[0-9.e+-]+]]{{$}}
// LOSS: result 6: tensor<f32> = [[L6]]{{$}}
// LOSS: result 8: tensor<f32> = [[L8]]{{$}}

// IR-COUNT-6: braid.fused
// IR-NOT: braid.fused
// CHECK: ok: 8 tensors within 1e-05 element by element

// The loss and its gradient share one pass of exponentials; no kernel call
// is left for a fused row-wise op.
// CPP: braid.fused: 3 ops over [2x3x8] row by row (2 row-wise)
// CPP: const float e = expf(
// CPP-NOT: braid_rt_layer_norm_f32(
// CPP-NOT: braid_rt_cross_entropy
// BAD: braid.cross_entropy: label

func.func @f(%x: tensor<2x3x8xf32> {braid.name = "x"}, %h: tensor<2x3x8xf32> {braid.name = "h"}, %b: tensor<8xf32> {braid.name = "b"}, %g: tensor<8xf32> {braid.name = "g"}, %beta: tensor<8xf32> {braid.name = "beta"}, %c: tensor<f32> {braid.name = "c"}, %dy: tensor<2x3x8xf32> {braid.name = "dy"}, %labels: tensor<2x3xi32> {braid.name = "labels", braid.range = 8 : i64}) -> (tensor<2x3x8xf32>, tensor<2x3x8xf32>, tensor<2x3x8xf32>, tensor<2x3x8xf32>, tensor<2x3x8xf32>, tensor<2x3x8xf32>, tensor<f32>, tensor<2x3x8xf32>, tensor<f32>, tensor<2x3x8xf32>) {
  // Residual add, layer_norm, tanh GELU after it.
  %0 = braid.add %h, %b : (tensor<2x3x8xf32>, tensor<8xf32>) -> tensor<2x3x8xf32>
  %1 = braid.add %x, %0 : (tensor<2x3x8xf32>, tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
  %2 = braid.layer_norm %1, %g, %beta : (tensor<2x3x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x3x8xf32>
  %3 = braid.gelu tanh %2 : tensor<2x3x8xf32>
  // Softmax of scaled scores.
  %4 = braid.mul %h, %c : (tensor<2x3x8xf32>, tensor<f32>) -> tensor<2x3x8xf32>
  %5 = braid.softmax %4 {axis = 2 : i64} : tensor<2x3x8xf32>
  // Residual add, rms_norm, a product after it.
  %6 = braid.sub %x, %h : (tensor<2x3x8xf32>, tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
  %7 = braid.rms_norm %6, %g : (tensor<2x3x8xf32>, tensor<8xf32>) -> tensor<2x3x8xf32>
  %8 = braid.mul %7, %6 : (tensor<2x3x8xf32>, tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
  // Gradient sum, layer_norm_grad, rms_norm_grad of the same rows, residual
  // gradient add.
  %9 = braid.add %dy, %h : (tensor<2x3x8xf32>, tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
  %10 = braid.layer_norm_grad %x, %g, %9 : (tensor<2x3x8xf32>, tensor<8xf32>, tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
  %11 = braid.rms_norm_grad %10, %beta, %9 : (tensor<2x3x8xf32>, tensor<8xf32>, tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
  %12 = braid.add %dy, %11 : (tensor<2x3x8xf32>, tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
  // Logits computed in the region, their loss and its gradient.
  %13 = braid.add %x, %dy : (tensor<2x3x8xf32>, tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
  %14 = braid.cross_entropy %13, %labels : (tensor<2x3x8xf32>, tensor<2x3xi32>) -> tensor<f32>
  %15 = braid.cross_entropy_grad %13, %labels, %c : (tensor<2x3x8xf32>, tensor<2x3xi32>, tensor<f32>) -> tensor<2x3x8xf32>
  // The loss and its gradient alone, over the region's operand.
  %16 = braid.cross_entropy %x, %labels : (tensor<2x3x8xf32>, tensor<2x3xi32>) -> tensor<f32>
  %17 = braid.cross_entropy_grad %x, %labels, %c : (tensor<2x3x8xf32>, tensor<2x3xi32>, tensor<f32>) -> tensor<2x3x8xf32>
  return %1, %3, %5, %8, %12, %10, %14, %15, %16, %17 : tensor<2x3x8xf32>, tensor<2x3x8xf32>, tensor<2x3x8xf32>, tensor<2x3x8xf32>, tensor<2x3x8xf32>, tensor<2x3x8xf32>, tensor<f32>, tensor<2x3x8xf32>, tensor<f32>, tensor<2x3x8xf32>
}
