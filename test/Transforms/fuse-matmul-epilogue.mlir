// RUN: braid-opt %s --split-input-file --braid-fuse-matmul-epilogue | FileCheck %s
// RUN: braid-opt %s --split-input-file --braid-fuse-matmul-epilogue | braid-opt --split-input-file | FileCheck %s

// Tests which bias adds (and GELUs) braid-fuse-matmul-epilogue folds into
// their matmuls: a bias over the rows in either operand order, a tanh GELU
// reading only the sum, the matmul's attributes kept; and what it leaves:
// exact GELU, a sum used elsewhere, a product used elsewhere, a bias that is
// not one vector of the rows' length, an add or GELU in a nested region.

// CHECK-LABEL: func.func @bias_gelu
// CHECK-SAME: (%[[X:.*]]: tensor<2x8x32xf32>, %[[W:.*]]: tensor<32x64xf32>, %[[B:.*]]: tensor<64xf32>)
// CHECK-NEXT: %[[H:.*]] = braid.matmul_bias %[[X]], %[[W]], %[[B]] gelu tanh {braid.bf16_operands, braid.phase = "F"} : (tensor<2x8x32xf32>, tensor<32x64xf32>, tensor<64xf32>) -> tensor<2x8x64xf32>
// CHECK-NEXT: return %[[H]]
func.func @bias_gelu(%x: tensor<2x8x32xf32>, %w: tensor<32x64xf32>, %b: tensor<64xf32>) -> tensor<2x8x64xf32> {
  %xw = braid.matmul %x, %w {braid.bf16_operands, braid.phase = "F"} : (tensor<2x8x32xf32>, tensor<32x64xf32>) -> tensor<2x8x64xf32>
  %fc = braid.add %xw, %b : (tensor<2x8x64xf32>, tensor<64xf32>) -> tensor<2x8x64xf32>
  %h = braid.gelu tanh %fc : tensor<2x8x64xf32>
  return %h : tensor<2x8x64xf32>
}

// -----

// The bias first, a transposed weight; the sum is also used elsewhere (as a
// training step's GELU gradient reads it), so the GELU stays.
// CHECK-LABEL: func.func @bias_first
// CHECK-NEXT: %[[S:.*]] = braid.matmul_bias %arg0, %arg1, %arg2 {transpose_b} : (tensor<8x32xf32>, tensor<16x32xf32>, tensor<16xf32>) -> tensor<8x16xf32>
// CHECK-NEXT: %[[G:.*]] = braid.gelu tanh %[[S]]
// CHECK-NEXT: return %[[S]], %[[G]]
func.func @bias_first(%x: tensor<8x32xf32>, %w: tensor<16x32xf32>, %b: tensor<16xf32>) -> (tensor<8x16xf32>, tensor<8x16xf32>) {
  %xw = braid.matmul %x, %w {transpose_b} : (tensor<8x32xf32>, tensor<16x32xf32>) -> tensor<8x16xf32>
  %fc = braid.add %b, %xw : (tensor<16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  %h = braid.gelu tanh %fc : tensor<8x16xf32>
  return %fc, %h : tensor<8x16xf32>, tensor<8x16xf32>
}

// -----

// Exact GELU (erf) is not cuBLASLt's: only the bias joins.
// CHECK-LABEL: func.func @exact_gelu
// CHECK-NEXT: %[[S:.*]] = braid.matmul_bias %arg0, %arg1, %arg2 : (tensor<8x32xf32>, tensor<32x16xf32>, tensor<16xf32>) -> tensor<8x16xf32>
// CHECK-NEXT: %[[G:.*]] = braid.gelu exact %[[S]]
// CHECK-NEXT: return %[[G]]
func.func @exact_gelu(%x: tensor<8x32xf32>, %w: tensor<32x16xf32>, %b: tensor<16xf32>) -> tensor<8x16xf32> {
  %xw = braid.matmul %x, %w : (tensor<8x32xf32>, tensor<32x16xf32>) -> tensor<8x16xf32>
  %fc = braid.add %xw, %b : (tensor<8x16xf32>, tensor<16xf32>) -> tensor<8x16xf32>
  %h = braid.gelu exact %fc : tensor<8x16xf32>
  return %h : tensor<8x16xf32>
}

// -----

// Left alone, one reason each: a product used again (%xw), a bias of rank
// 2 (%p), a full-size addend (%q), a bias along the columns (%s: [8, 1]).
// CHECK-LABEL: func.func @not_folded
// CHECK-NOT: braid.matmul_bias
// CHECK: return
func.func @not_folded(%x: tensor<8x8xf32>, %w: tensor<8x8xf32>, %b: tensor<8xf32>, %b2: tensor<1x8xf32>, %r: tensor<8x8xf32>, %bc: tensor<8x1xf32>) -> (tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>) {
  %xw = braid.matmul %x, %w : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  %a = braid.add %xw, %b : (tensor<8x8xf32>, tensor<8xf32>) -> tensor<8x8xf32>
  %p = braid.matmul %x, %w : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  %c = braid.add %p, %b2 : (tensor<8x8xf32>, tensor<1x8xf32>) -> tensor<8x8xf32>
  %q = braid.matmul %x, %w : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  %d = braid.add %q, %r : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  %s = braid.matmul %x, %w : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  %e = braid.add %s, %bc : (tensor<8x8xf32>, tensor<8x1xf32>) -> tensor<8x8xf32>
  return %xw, %a, %c, %d, %e : tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>
}

// -----

// Only ops in the matmul's block fold: the fused op would stand where the
// last folded op was, pulling the matmul into a nested region. The add in
// a region (%fc) stays with its matmul outside; the add next to its
// matmul folds without the GELU in a region (%g).
// CHECK-LABEL: func.func @nested_uses
// CHECK-NEXT: %[[P:.*]] = braid.matmul %arg0, %arg1 :
// CHECK-NEXT: emitc.if %arg3 {
// CHECK-NEXT: braid.add %[[P]], %arg2 :
// CHECK-NEXT: }
// CHECK-NEXT: %[[S:.*]] = braid.matmul_bias %arg0, %arg1, %arg2 :
// CHECK-NEXT: emitc.if %arg3 {
// CHECK-NEXT: braid.gelu tanh %[[S]] :
// CHECK-NEXT: }
// CHECK-NEXT: return
func.func @nested_uses(%x: tensor<8x32xf32>, %w: tensor<32x16xf32>, %b: tensor<16xf32>, %c: i1) {
  %xw = braid.matmul %x, %w : (tensor<8x32xf32>, tensor<32x16xf32>) -> tensor<8x16xf32>
  emitc.if %c {
    %fc = braid.add %xw, %b : (tensor<8x16xf32>, tensor<16xf32>) -> tensor<8x16xf32>
  }
  %p = braid.matmul %x, %w : (tensor<8x32xf32>, tensor<32x16xf32>) -> tensor<8x16xf32>
  %s = braid.add %p, %b : (tensor<8x16xf32>, tensor<16xf32>) -> tensor<8x16xf32>
  emitc.if %c {
    %g = braid.gelu tanh %s : tensor<8x16xf32>
  }
  return
}
