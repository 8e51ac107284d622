// RUN: braid-opt %s --split-input-file --verify-diagnostics

// Tests braid.matmul_bias's verifier: the matmul's checks, a bias of the
// rows' length, tanh GELU only.

func.func @bias_length(%x: tensor<8x32xf32>, %w: tensor<32x16xf32>, %b: tensor<8xf32>) -> tensor<8x16xf32> {
  // expected-error @+1 {{bias must be [16] (the result's last dimension), got [8]}}
  %h = braid.matmul_bias %x, %w, %b : (tensor<8x32xf32>, tensor<32x16xf32>, tensor<8xf32>) -> tensor<8x16xf32>
  return %h : tensor<8x16xf32>
}

// -----

func.func @bias_rank(%x: tensor<8x32xf32>, %w: tensor<32x16xf32>, %b: tensor<1x16xf32>) -> tensor<8x16xf32> {
  // expected-error @+1 {{bias must be [16] (the result's last dimension), got [1, 16]}}
  %h = braid.matmul_bias %x, %w, %b : (tensor<8x32xf32>, tensor<32x16xf32>, tensor<1x16xf32>) -> tensor<8x16xf32>
  return %h : tensor<8x16xf32>
}

// -----

func.func @exact(%x: tensor<8x32xf32>, %w: tensor<32x16xf32>, %b: tensor<16xf32>) -> tensor<8x16xf32> {
  // expected-error @+1 {{takes tanh GELU only (cuBLASLt's GELU epilogue)}}
  %h = braid.matmul_bias %x, %w, %b gelu exact : (tensor<8x32xf32>, tensor<32x16xf32>, tensor<16xf32>) -> tensor<8x16xf32>
  return %h : tensor<8x16xf32>
}

// -----

func.func @contracting(%x: tensor<8x32xf32>, %w: tensor<16x16xf32>, %b: tensor<16xf32>) -> tensor<8x16xf32> {
  // expected-error @+1 {{contracting dimensions differ}}
  %h = braid.matmul_bias %x, %w, %b : (tensor<8x32xf32>, tensor<16x16xf32>, tensor<16xf32>) -> tensor<8x16xf32>
  return %h : tensor<8x16xf32>
}
